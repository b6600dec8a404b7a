package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Request is the GPUs a run asks for.
type Request struct {
	// Count is how many GPUs; 0 with Indices means len(Indices).
	Count int
	// Memory is the free memory each GPU needs, in bytes; 0: any.
	Memory uint64
	// Indices asks for exactly these GPUs (NVML indices), when not empty.
	Indices []int
}

// want is how many devices r asks for.
func (r Request) want() int {
	if len(r.Indices) > 0 {
		return len(r.Indices)
	}
	return r.Count
}

// String is "2 GPUs with 20.0 GiB free", "GPUs 0,3": for logs and errors.
func (r Request) String() string {
	var s string
	switch {
	case len(r.Indices) == 1:
		s = "GPU " + joinInts(r.Indices)
	case len(r.Indices) > 1:
		s = "GPUs " + joinInts(r.Indices)
	case r.Count == 1:
		s = "1 GPU"
	default:
		s = strconv.Itoa(r.Count) + " GPUs"
	}
	if r.Memory > 0 {
		s += fmt.Sprintf(" with %.1f GiB free", float64(r.Memory)/(1<<30))
	}
	return s
}

// Choice is the devices given to a run, in index order.
type Choice struct {
	Devices []Device
}

// UUIDs are the chosen devices' UUIDs, in index order (for the locks).
func (c Choice) UUIDs() []string {
	out := make([]string, len(c.Devices))
	for i, d := range c.Devices {
		out[i] = d.UUID
	}
	return out
}

// Indices are the chosen devices' NVML indices, in order.
func (c Choice) Indices() []int {
	out := make([]int, len(c.Devices))
	for i, d := range c.Devices {
		out[i] = d.Index
	}
	return out
}

// ErrNoGPUs is wrapped by the error of a request that this host can never
// meet (no NVML, too few GPUs, no such GPU, not that much memory); errors
// that wrap it are *NoGPUsError.
var ErrNoGPUs = errors.New("gpu: request cannot be met on this host")

// ErrBadRequest is wrapped by the error of a request that makes no sense
// (no count, a negative one, an index twice).
var ErrBadRequest = errors.New("gpu: bad request")

// NoGPUsError says why a request can never be met on this host.
type NoGPUsError struct {
	Request Request
	// Unavailable is why there are no device figures at all (no NVIDIA
	// driver, a build without NVML); "" when there are.
	Unavailable string
	// Have is how many GPUs the host has.
	Have int
	// Fit is how many of them could ever have Request.Memory free (their
	// memory less the driver's reserve); Have when Memory is 0.
	Fit int
	// Missing are the requested indices the host has no GPU at.
	Missing []int
	// Small are the requested indices whose GPU is too small for Memory.
	Small []int
}

func (e *NoGPUsError) Error() string {
	switch {
	case e.Unavailable != "":
		return fmt.Sprintf("no GPUs for %s: %s", e.Request, e.Unavailable)
	case len(e.Missing) > 0:
		return fmt.Sprintf("no GPUs for %s: this host has no GPU %s (it has %d)", e.Request, joinInts(e.Missing), e.Have)
	case len(e.Small) > 0:
		return fmt.Sprintf("no GPUs for %s: GPU %s has less memory in all", e.Request, joinInts(e.Small))
	case e.Fit < e.Have:
		return fmt.Sprintf("no GPUs for %s: this host has %d GPUs, %d of them with that much memory", e.Request, e.Have, e.Fit)
	}
	return fmt.Sprintf("no GPUs for %s: this host has %d", e.Request, e.Have)
}

// Is makes errors.Is(err, ErrNoGPUs) true.
func (e *NoGPUsError) Is(target error) bool { return target == ErrNoGPUs }

// DeviceState is whether one device could be given to a run, and if not,
// why not: every reason that holds, as facts for bot/render to word.
type DeviceState struct {
	Device Device
	// Taken is true when a trainbot run holds the device's lock, or a run
	// of this trainbot has processes on it (a job that names its GPUs in
	// its own environment takes no lock); Runs are those runs (none when
	// the lock is another trainbot's).
	Taken bool
	Runs  []int64
	// Lock is what the lock of a taken device says of its holder (a run
	// of another trainbot, maybe another user's), when the caller knows
	// (it reads internal/gpulock); nil otherwise.
	Lock *LockHolder
	// Holders are the processes that are not a trainbot run's and hold
	// more than busy_memory on the device, largest first.
	Holders []Process
	// Busy is true when the device's utilisation (Device.Util) is at or
	// above BusyUtil and not only trainbot runs use it.
	Busy     bool
	BusyUtil int
	// FreeMemory is the memory not used nor reserved, in bytes;
	// TooLittle is true when it is less than the request's Memory.
	FreeMemory uint64
	TooLittle  bool
	// QuietFor is how long the device has been quiet (Availability.FreeFor),
	// FreeFor how long it must be.
	QuietFor, FreeFor time.Duration
	// Free is true when none of the above stands in the way.
	Free bool
}

// LockHolder is the run a device's host-wide lock names.
type LockHolder struct {
	Run  int64
	Job  string
	User string
	Host string
	// Orphan: its supervisor is gone, its processes live on.
	Orphan bool
}

// Recent reports whether the device is quiet now but not yet for long
// enough (the "free for 20s of 1m" case).
func (st DeviceState) Recent() bool {
	return !st.Taken && len(st.Holders) == 0 && !st.Busy && st.QuietFor < st.FreeFor
}

// BusyError says that a request cannot be met now, and why not for each
// device; it may be met later (queue it).
type BusyError struct {
	Request Request
	// Devices are every device of the snapshot, in index order (for a
	// request of Indices, those devices only).
	Devices []DeviceState
}

// FreeCount is how many of the devices are free.
func (e *BusyError) FreeCount() int {
	n := 0
	for _, st := range e.Devices {
		if st.Free {
			n++
		}
	}
	return n
}

// Error is the facts in English, for logs; bot/render words them for the
// chats (render.GPURefusal).
func (e *BusyError) Error() string {
	var parts []string
	for _, st := range e.Devices {
		if st.Free {
			continue
		}
		parts = append(parts, fmt.Sprintf("GPU %d %s", st.Device.Index, st.reason()))
	}
	return fmt.Sprintf("%d of %d GPUs free for %s: %s", e.FreeCount(), len(e.Devices), e.Request, strings.Join(parts, "; "))
}

// reason is the first reason a device is not free, in English.
func (st DeviceState) reason() string {
	switch {
	case st.Taken && len(st.Runs) > 0:
		return "taken by run #" + strconv.FormatInt(st.Runs[0], 10)
	case st.Taken && st.Lock != nil:
		return fmt.Sprintf("taken by run #%d (%s) of %s's trainbot", st.Lock.Run, st.Lock.Job, st.Lock.User)
	case st.Taken:
		return "taken by another trainbot's run"
	case len(st.Holders) > 0:
		p := st.Holders[0]
		who := p.User
		if who == "" {
			who = "an unknown user"
		}
		what := p.Command
		if what == "" {
			what = p.Name
		}
		return fmt.Sprintf("held by %s's process %d (%s) with %.1f GiB", who, p.PID, what, float64(p.MemUsed)/(1<<30))
	case st.Busy:
		return fmt.Sprintf("busy at %d%%", st.Device.Util)
	case st.TooLittle:
		return fmt.Sprintf("too little free memory (%.1f GiB)", float64(st.FreeMemory)/(1<<30))
	case st.QuietFor < st.FreeFor:
		return fmt.Sprintf("free for %s of %s", st.QuietFor.Round(time.Second), st.FreeFor)
	}
	return "free"
}

// Choose picks the devices for a request from a snapshot: free ones
// (quiet in av for freeFor, not taken, with req.Memory free), those with
// the most free memory. Among devices whose free memory differs by less
// than sameMemory it prefers a set close together (NVLink, then one PCIe
// switch, host bridge or NUMA node) when snap.Topology can tell, then the
// most free memory, then the lowest indices. taken are the UUIDs whose
// lock a trainbot run holds (internal/gpulock). av nil judges snap alone
// with the default thresholds.
//
// A request that can never be met on this host returns a *NoGPUsError
// (errors.Is ErrNoGPUs); one that cannot be met now a *BusyError.
func Choose(snap Snapshot, av *Availability, req Request, taken map[string]bool, freeFor time.Duration) (Choice, error) {
	if err := checkRequest(req); err != nil {
		return Choice{}, err
	}
	if av == nil {
		av = NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
		av.Observe(snap)
	}
	if err := never(snap, req); err != nil {
		return Choice{}, err
	}
	devs := snap.Devices
	if len(req.Indices) > 0 {
		devs = make([]Device, 0, len(req.Indices))
		for _, i := range req.Indices {
			d, ok := snap.DeviceByIndex(i)
			if !ok {
				d, _ = unansweredDevice(snap, i)
			}
			devs = append(devs, d)
		}
	}
	states := deviceStates(snap, devs, av, req, taken, freeFor)
	var free []int // positions in states
	for i, st := range states {
		if unanswered(snap, st.Device.Index) {
			// Not sampled now: not free, and quiet only from its next answer.
			states[i].Free, states[i].QuietFor = false, 0
			continue
		}
		if st.Free {
			free = append(free, i)
		}
	}
	if len(free) < req.want() {
		slices.SortFunc(states, func(a, b DeviceState) int { return cmp.Compare(a.Device.Index, b.Device.Index) })
		return Choice{}, &BusyError{Request: req, Devices: states}
	}
	var chosen []Device
	if len(req.Indices) > 0 {
		chosen = devs
	} else {
		chosen = pick(states, free, req.Count, snap.Topology)
	}
	chosen = slices.Clone(chosen)
	slices.SortFunc(chosen, func(a, b Device) int { return cmp.Compare(a.Index, b.Index) })
	return Choice{Devices: chosen}, nil
}

func checkRequest(req Request) error {
	switch {
	case req.Count < 0:
		return fmt.Errorf("%w: %d GPUs", ErrBadRequest, req.Count)
	case len(req.Indices) == 0 && req.Count == 0:
		return fmt.Errorf("%w: no GPU asked for", ErrBadRequest)
	case len(req.Indices) > 0 && req.Count != 0 && req.Count != len(req.Indices):
		return fmt.Errorf("%w: %d GPUs but %d indices (%s)", ErrBadRequest, req.Count, len(req.Indices), joinInts(req.Indices))
	}
	for i, x := range req.Indices {
		if x < 0 {
			return fmt.Errorf("%w: GPU %d", ErrBadRequest, x)
		}
		if slices.Contains(req.Indices[:i], x) {
			return fmt.Errorf("%w: GPU %d asked for twice", ErrBadRequest, x)
		}
	}
	return nil
}

// capacity is the most memory a device can ever have free.
func capacity(d Device) uint64 {
	if d.MemReserved > d.MemTotal {
		return 0
	}
	return d.MemTotal - d.MemReserved
}

// freeMemory is what is neither used nor reserved.
func freeMemory(d Device) uint64 {
	if d.MemUsed+d.MemReserved > d.MemTotal {
		return 0
	}
	return d.MemTotal - d.MemUsed - d.MemReserved
}

// never returns a *NoGPUsError when no state of the host's devices could
// meet req.
func never(snap Snapshot, req Request) error {
	if !snap.Available {
		reason := snap.Reason
		if reason == "" {
			reason = "no GPU telemetry"
		}
		return &NoGPUsError{Request: req, Unavailable: reason}
	}
	// A device that did not answer this sample is still the host's: its
	// memory is not known now, so it may fit.
	e := &NoGPUsError{Request: req, Have: len(snap.Devices) + len(snap.Unanswered), Fit: len(snap.Unanswered)}
	for _, d := range snap.Devices {
		if capacity(d) >= req.Memory {
			e.Fit++
		}
	}
	for _, i := range req.Indices {
		d, ok := snap.DeviceByIndex(i)
		switch {
		case !ok && unanswered(snap, i):
		case !ok:
			e.Missing = append(e.Missing, i)
		case capacity(d) < req.Memory:
			e.Small = append(e.Small, i)
		}
	}
	if len(e.Missing) > 0 || len(e.Small) > 0 || e.Fit < req.want() {
		return e
	}
	return nil
}

// unanswered reports whether device i did not answer the snapshot's sample.
func unanswered(snap Snapshot, i int) bool {
	_, ok := unansweredDevice(snap, i)
	return ok
}

func unansweredDevice(snap Snapshot, i int) (Device, bool) {
	for _, d := range snap.Unanswered {
		if d.Index == i {
			return d, true
		}
	}
	return Device{}, false
}

func deviceStates(snap Snapshot, devs []Device, av *Availability, req Request, taken map[string]bool, freeFor time.Duration) []DeviceState {
	states := make([]DeviceState, len(devs))
	for i, d := range devs {
		st := DeviceState{Device: d, Taken: taken[d.UUID], BusyUtil: av.busyUtil, FreeMemory: freeMemory(d),
			QuietFor: av.FreeFor(d.UUID), FreeFor: freeFor}
		ours, others := 0, 0
		for _, p := range snap.Processes {
			if p.Device != d.Index {
				continue
			}
			if p.RunID != 0 {
				ours++
				if !slices.Contains(st.Runs, p.RunID) {
					st.Runs = append(st.Runs, p.RunID)
				}
				continue
			}
			others++
			if p.MemUsed > av.busyMemory {
				st.Holders = append(st.Holders, p)
			}
		}
		slices.Sort(st.Runs)
		st.Taken = st.Taken || len(st.Runs) > 0
		slices.SortStableFunc(st.Holders, func(a, b Process) int { return cmp.Compare(b.MemUsed, a.MemUsed) })
		st.Busy = d.Util >= av.busyUtil && (ours == 0 || others > 0)
		st.TooLittle = st.FreeMemory < req.Memory
		st.Free = !st.Taken && len(st.Holders) == 0 && !st.Busy && !st.TooLittle && st.QuietFor >= freeFor
		states[i] = st
	}
	return states
}

// sameMemory is the difference in free memory below which two devices
// count as equal choices, so that the topology can decide: the few MiB a
// CUDA context or the driver takes should not split a NUMA node.
const sameMemory = 1 << 30

// maxSets is how many sets pick compares exactly; past it (16 devices and
// more) it builds the set greedily.
const maxSets = 5000

// pick chooses n of the free devices (positions into states): those with
// the most free memory; where free memory is within sameMemory of the
// last one needed, the set whose members are best connected, then the one
// with the most free memory, then the lowest indices.
func pick(states []DeviceState, free []int, n int, topo *Topology) []Device {
	cands := make([]DeviceState, len(free))
	for i, j := range free {
		cands[i] = states[j]
	}
	slices.SortStableFunc(cands, func(a, b DeviceState) int {
		if c := cmp.Compare(b.FreeMemory, a.FreeMemory); c != 0 {
			return c
		}
		return cmp.Compare(a.Device.Index, b.Device.Index)
	})
	devices := func(sts []DeviceState) []Device {
		out := make([]Device, len(sts))
		for i, st := range sts {
			out[i] = st.Device
		}
		return out
	}
	if len(cands) == n {
		return devices(cands)
	}
	edge := cands[n-1].FreeMemory
	// sure: clearly more free memory than the edge; pool: about the edge.
	var sure, pool []DeviceState
	for _, c := range cands {
		switch {
		case c.FreeMemory >= edge+sameMemory:
			sure = append(sure, c)
		case c.FreeMemory+sameMemory > edge:
			pool = append(pool, c)
		}
	}
	need := n - len(sure)
	if need == len(pool) || !topo.Known() {
		// Nothing to choose, or nothing to choose by but memory and index.
		return devices(append(sure, pool[:need]...))
	}
	var best []DeviceState
	bestScore, bestMem := -1, uint64(0)
	consider := func(set []DeviceState) {
		score, mem := setScore(set, topo)
		if score > bestScore || (score == bestScore && mem > bestMem) {
			best, bestScore, bestMem = slices.Clone(set), score, mem
		}
	}
	if binomial(len(pool), need) <= maxSets {
		// Every set, in lexicographic order of the pool (most free memory,
		// then lowest index first): ties keep the first.
		idx := make([]int, need)
		for i := range idx {
			idx[i] = i
		}
		set := make([]DeviceState, 0, n)
		for {
			set = append(set[:0], sure...)
			for _, i := range idx {
				set = append(set, pool[i])
			}
			consider(set)
			// next combination
			i := need - 1
			for i >= 0 && idx[i] == len(pool)-need+i {
				i--
			}
			if i < 0 {
				break
			}
			idx[i]++
			for j := i + 1; j < need; j++ {
				idx[j] = idx[j-1] + 1
			}
		}
		return devices(best)
	}
	// Greedy, from each device of the pool as a seed: add the one best
	// connected to the set so far.
	for seed := range pool {
		set := append(slices.Clone(sure), pool[seed])
		used := map[int]bool{seed: true}
		for len(set) < n {
			bi, bs := -1, -1
			for i, c := range pool {
				if used[i] {
					continue
				}
				s := 0
				for _, m := range set {
					s += topo.Between(m.Device.UUID, c.Device.UUID).score()
				}
				if s > bs {
					bi, bs = i, s
				}
			}
			used[bi] = true
			set = append(set, pool[bi])
		}
		consider(set)
	}
	return devices(best)
}

// setScore is how well a set is connected (the sum of its pairs' link
// scores) and its free memory.
func setScore(set []DeviceState, topo *Topology) (int, uint64) {
	score := 0
	var mem uint64
	for i, a := range set {
		mem += a.FreeMemory
		for _, b := range set[i+1:] {
			score += topo.Between(a.Device.UUID, b.Device.UUID).score()
		}
	}
	return score, mem
}

// binomial is n choose k, capped past maxSets.
func binomial(n, k int) int {
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > maxSets {
			return maxSets + 1
		}
	}
	return r
}

// VisibleEnv is the environment that shows a run exactly these devices,
// numbered as NVML numbers them: CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's own
// default order, fastest first, is not NVML's) and CUDA_VISIBLE_DEVICES
// with their NVML indices (mode "index", the default: launchers and
// scripts that parse the variable as integers keep working) or their
// UUIDs (mode "uuid"; indices when a device has no UUID). No devices: nil,
// never an empty CUDA_VISIBLE_DEVICES (which CUDA reads as "no GPU").
func VisibleEnv(devs []Device, mode string) []string {
	if len(devs) == 0 {
		return nil
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = strconv.Itoa(d.Index)
	}
	if mode == "uuid" {
		uuids := make([]string, len(devs))
		for i, d := range devs {
			uuids[i] = d.UUID
		}
		if !slices.Contains(uuids, "") {
			ids = uuids
		}
	}
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// eight is a snapshot of 8 idle 80 GiB devices at t, each with used[i]
// GiB in use (0 when used is short).
func eight(t time.Time, used ...float64) Snapshot {
	s := Snapshot{At: t, Available: true}
	for i := range 8 {
		var u float64
		if i < len(used) {
			u = used[i]
		}
		s.Devices = append(s.Devices, Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H100 80GB HBM3",
			MemTotal: 80 * gb, MemUsed: uint64(u * gb), Util: 0, MemUtil: 0, TempC: 40})
	}
	return s
}

// with returns s with more processes.
func (s Snapshot) with(procs ...Process) Snapshot {
	s.Processes = append(slices.Clone(s.Processes), procs...)
	return s
}

// at returns s at another time.
func (s Snapshot) at(t time.Time) Snapshot { s.At = t; return s }

func TestAvailabilityRules(t *testing.T) {
	big := Process{PID: 50, MemUsed: 2 * gb}
	small := Process{PID: 51, MemUsed: gb} // exactly busy_memory: not more
	run := Process{PID: 52, MemUsed: 30 * gb, RunID: 7}
	on := func(p Process, dev int) Process { p.Device = dev; return p }
	s := eight(t0).with(on(big, 0), on(small, 1), on(run, 2), on(run, 3), on(small, 3))
	s.Devices[2].Util = 99 // only a run's processes: its own utilisation
	s.Devices[3].Util = 99 // a run's and someone else's
	s.Devices[4].Util = 10 // at busy_util, no process (another container)
	s.Devices[5].Util = 9
	s.Devices[6].Util = -1 // unknown: memory decides
	a := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	a.Observe(s)
	a.Observe(s.at(t0.Add(time.Minute)))
	want := []time.Duration{0, time.Minute, time.Minute, 0, 0, time.Minute, time.Minute, time.Minute}
	for i, w := range want {
		if got := a.FreeFor(fmt.Sprintf("GPU-%d", i)); got != w {
			t.Errorf("GPU %d free for %v, want %v", i, got, w)
		}
	}
	if got := a.FreeFor("GPU-nope"); got != 0 {
		t.Errorf("unknown device free for %v", got)
	}

	// Busy once resets; a device that does not answer is forgotten; an
	// older snapshot changes nothing; no NVML forgets everything.
	s2 := eight(t0.Add(2 * time.Minute)).with(on(big, 1))
	s2.Devices = slices.Delete(s2.Devices, 7, 8)
	a.Observe(s2)
	a.Observe(eight(t0.Add(90 * time.Second)).with(on(big, 5)))
	a.Observe(eight(t0.Add(3 * time.Minute)))
	for i, w := range []time.Duration{time.Minute, 0, 3 * time.Minute, time.Minute, time.Minute, 3 * time.Minute, 3 * time.Minute, 0} {
		if got := a.FreeFor(fmt.Sprintf("GPU-%d", i)); got != w {
			t.Errorf("later: GPU %d free for %v, want %v", i, got, w)
		}
	}
	a.Observe(Snapshot{At: t0.Add(4 * time.Minute), Reason: "no NVIDIA driver"})
	if got := a.FreeFor("GPU-2"); got != 0 {
		t.Errorf("without NVML: free for %v", got)
	}
}

// quietSince returns an Availability that has seen s since from.
func quietSince(s Snapshot, from time.Time) *Availability {
	a := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	a.Observe(s.at(from))
	a.Observe(s)
	return a
}

func indices(c Choice) []int { return c.Indices() }

func TestChoosePicksMostFreeMemory(t *testing.T) {
	s := eight(t0.Add(time.Hour), 8, 3, 0.5, 6, 2, 0.25, 4, 7)
	a := quietSince(s, t0)
	c, err := Choose(s, a, Request{Count: 2}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := indices(c); !slices.Equal(got, []int{2, 5}) {
		t.Errorf("chose %v, want [2 5]", got)
	}
	if !slices.Equal(c.UUIDs(), []string{"GPU-2", "GPU-5"}) {
		t.Errorf("UUIDs = %v", c.UUIDs())
	}
	// Taken devices are not given, even when NVML shows nothing on them.
	c, err = Choose(s, a, Request{Count: 2}, map[string]bool{"GPU-5": true}, time.Minute)
	if err != nil || !slices.Equal(indices(c), []int{2, 4}) {
		t.Errorf("with GPU 5 taken: %v, %v; want [2 4]", indices(c), err)
	}
	// Memory: each needs 77.5 GiB free.
	c, err = Choose(s, a, Request{Count: 3, Memory: uint64(77.5 * gb)}, nil, time.Minute)
	if err != nil || !slices.Equal(indices(c), []int{2, 4, 5}) {
		t.Errorf("3 with 77.5 GiB: %v, %v; want [2 4 5]", indices(c), err)
	}
	_, err = Choose(s, a, Request{Count: 4, Memory: uint64(77.5 * gb)}, nil, time.Minute)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.FreeCount() != 3 || !busy.Devices[0].TooLittle || busy.Devices[2].TooLittle {
		t.Fatalf("4 with 77.5 GiB: %v", err)
	}
	// Explicit indices: exactly those, in index order.
	c, err = Choose(s, a, Request{Indices: []int{7, 0}}, nil, time.Minute)
	if err != nil || !slices.Equal(indices(c), []int{0, 7}) {
		t.Errorf("indices 7, 0: %v, %v", indices(c), err)
	}
	_, err = Choose(s, a, Request{Indices: []int{0, 5}}, map[string]bool{"GPU-5": true}, time.Minute)
	if !errors.As(err, &busy) || len(busy.Devices) != 2 || !busy.Devices[1].Taken || busy.Devices[0].Taken {
		t.Errorf("indices 0, 5 with 5 taken: %v", err)
	}
}

func TestChooseNeverOrBad(t *testing.T) {
	s := eight(t0.Add(time.Hour))
	a := quietSince(s, t0)
	for _, c := range []struct {
		name string
		req  Request
		snap Snapshot
		want string
	}{
		{"no NVML", Request{Count: 1}, Snapshot{At: t0, Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)"}, "no GPUs for 1 GPU: no NVIDIA driver"},
		{"too many", Request{Count: 9}, s, "this host has 8"},
		{"no such index", Request{Indices: []int{3, 8, 9}}, s, "no GPU 8,9 (it has 8)"},
		{"too much memory", Request{Count: 1, Memory: 81 * gb}, s, "8 GPUs, 0 of them with that much memory"},
		{"index too small", Request{Indices: []int{1}, Memory: 81 * gb}, s, "GPU 1 has less memory in all"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Choose(c.snap, a, c.req, nil, time.Minute)
			var ng *NoGPUsError
			if !errors.Is(err, ErrNoGPUs) || !errors.As(err, &ng) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrNoGPUs saying %q", err, c.want)
			}
		})
	}
	var nvmlLess *NoGPUsError
	_, err := Choose(Snapshot{Reason: "no NVIDIA driver"}, nil, Request{Count: 1}, nil, 0)
	if !errors.As(err, &nvmlLess) || nvmlLess.Unavailable != "no NVIDIA driver" {
		t.Errorf("no NVML, no availability: %v", err)
	}
	for _, r := range []Request{{}, {Count: -1}, {Count: 2, Indices: []int{1}}, {Indices: []int{1, 1}}, {Indices: []int{-1}}} {
		if _, err := Choose(s, a, r, nil, 0); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: %v, want ErrBadRequest", r, err)
		}
	}
}

// A device quiet for 20 s of a 1 m free_for is not chosen, and the
// refusal says how long it has been free.
func TestChooseWaitsForFreeFor(t *testing.T) {
	foreign := Process{PID: 900, Device: 1, MemUsed: 20 * gb, UID: 1001, User: "bob", Command: "python eval.py"}
	busy := eight(t0, 10, 0, 10, 10, 10, 10, 10, 10).with(foreign)
	a := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	a.Observe(busy)
	a.Observe(eight(t0.Add(40*time.Second), 10, 0, 10, 10, 10, 10, 10, 10)) // bob's process ended
	now := eight(t0.Add(60*time.Second), 10, 0, 10, 10, 10, 10, 10, 10)
	a.Observe(now)
	if got := a.FreeFor("GPU-1"); got != 20*time.Second {
		t.Fatalf("GPU 1 free for %v, want 20s", got)
	}
	c, err := Choose(now, a, Request{Count: 1}, nil, time.Minute)
	if err != nil || slices.Contains(indices(c), 1) || !slices.Equal(indices(c), []int{0}) {
		t.Errorf("chose %v, %v; want GPU 0, not GPU 1 (free for 20s only)", indices(c), err)
	}
	_, err = Choose(now, a, Request{Indices: []int{1}}, nil, time.Minute)
	var be *BusyError
	if !errors.As(err, &be) || len(be.Devices) != 1 {
		t.Fatalf("GPU 1: %v", err)
	}
	st := be.Devices[0]
	if st.Free || !st.Recent() || st.QuietFor != 20*time.Second || st.FreeFor != time.Minute {
		t.Errorf("state = %+v", st)
	}
	if !strings.Contains(err.Error(), "GPU 1 free for 20s of 1m0s") {
		t.Errorf("error = %v", err)
	}
	// free_for 0: a device is free as soon as it is quiet.
	if c, err := Choose(now, a, Request{Indices: []int{1}}, nil, 0); err != nil || !slices.Equal(indices(c), []int{1}) {
		t.Errorf("free_for 0: %v, %v", indices(c), err)
	}
}

// Among equal choices the topology decides: NVLink, then one PCIe
// switch, then one NUMA node; without one, the lowest indices.
func TestChooseTopology(t *testing.T) {
	s := eight(t0.Add(time.Hour))
	// A PCIe box: pairs behind a switch, 0–3 and 4–7 on two NUMA nodes,
	// NVLink bridges between 5 and 6 only.
	topo := NewTopology()
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			l := Link{Path: PathSystem}
			switch {
			case i/2 == j/2:
				l.Path = PathSwitch
			case i/4 == j/4:
				l.Path = PathNode
			}
			l.NVLink = i == 5 && j == 6
			topo.Set(fmt.Sprintf("GPU-%d", i), fmt.Sprintf("GPU-%d", j), l)
		}
	}
	taken := func(ids ...int) map[string]bool {
		m := map[string]bool{}
		for _, i := range ids {
			m[fmt.Sprintf("GPU-%d", i)] = true
		}
		return m
	}
	for _, c := range []struct {
		name  string
		topo  *Topology
		count int
		taken map[string]bool
		used  []float64
		want  []int
	}{
		{"no topology: lowest indices", nil, 2, taken(0), nil, []int{1, 2}},
		{"NVLink pair", topo, 2, nil, nil, []int{5, 6}},
		{"one switch", topo, 2, taken(5), nil, []int{0, 1}},
		{"one switch beats index order", topo, 2, taken(0, 5), nil, []int{2, 3}},
		{"one NUMA node", topo, 3, taken(0, 5), nil, []int{1, 2, 3}},
		{"one NUMA node for 4", topo, 4, taken(1), nil, []int{4, 5, 6, 7}},
		{"memory first", topo, 2, nil, []float64{0, 0, 0, 0, 0, 5, 5, 0}, []int{0, 1}},
		{"a few MiB do not split a pair", topo, 2, nil, []float64{0, 0, 0, 0, 0, 0.01, 0.02, 0}, []int{5, 6}},
		{"one sure device and its closest", topo, 2, nil, []float64{3, 3, 3, 3, 0, 3, 3, 3}, []int{4, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := eight(s.At, c.used...)
			snap.Topology = c.topo
			got, err := Choose(snap, quietSince(snap, t0), Request{Count: c.count}, c.taken, time.Minute)
			if err != nil || !slices.Equal(indices(got), c.want) {
				t.Errorf("chose %v, %v; want %v", indices(got), err, c.want)
			}
		})
	}
}

// With 16 devices and more, sets are built greedily; still close ones.
func TestChooseTopologyGreedy(t *testing.T) {
	s := Snapshot{At: t0.Add(time.Hour), Available: true, Topology: NewTopology()}
	for i := range 24 {
		s.Devices = append(s.Devices, Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), MemTotal: 80 * gb})
	}
	for i := range 24 {
		for j := i + 1; j < 24; j++ {
			l := Link{Path: PathSystem}
			if i/8 == j/8 {
				l.Path = PathNode
			}
			if i >= 16 && j >= 16 {
				l.NVLink = true
			}
			s.Topology.Set(fmt.Sprintf("GPU-%d", i), fmt.Sprintf("GPU-%d", j), l)
		}
	}
	if binomial(24, 8) <= maxSets {
		t.Fatal("this test wants more sets than maxSets")
	}
	got, err := Choose(s, quietSince(s, t0), Request{Count: 8}, nil, time.Minute)
	if err != nil || !slices.Equal(indices(got), []int{16, 17, 18, 19, 20, 21, 22, 23}) {
		t.Errorf("chose %v, %v; want the NVLink group 16–23", indices(got), err)
	}
}

func TestBusyErrorListsEveryDevice(t *testing.T) {
	s := eight(t0.Add(time.Hour), 1, 1, 1, 1, 1, 1, 1, 1).with(
		Process{PID: 300, Device: 1, MemUsed: 20 * gb, UID: 1001, User: "bob", Command: "python eval.py", Name: "python"},
		Process{PID: 301, Device: 4, MemUsed: 30 * gb, RunID: 12},
	)
	s.Devices[6].Util = 95
	a := quietSince(s, t0)
	_, err := Choose(s, a, Request{Count: 6}, map[string]bool{"GPU-4": true, "GPU-7": true}, time.Minute)
	var be *BusyError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want a BusyError", err)
	}
	if len(be.Devices) != 8 || be.FreeCount() != 4 || be.Request.Count != 6 {
		t.Fatalf("busy error: %d devices, %d free", len(be.Devices), be.FreeCount())
	}
	for i, want := range []string{"", "held by bob's process 300 (python eval.py) with 20.0 GiB", "", "",
		"taken by run #12", "", "busy at 95%", "taken by another trainbot's run"} {
		st := be.Devices[i]
		if st.Device.Index != i || (want == "") != st.Free || (want != "" && !strings.Contains(err.Error(), fmt.Sprintf("GPU %d %s", i, want))) {
			t.Errorf("GPU %d: %+v; want %q in %v", i, st, want, err)
		}
	}
	if h := be.Devices[1].Holders; len(h) != 1 || h[0].User != "bob" {
		t.Errorf("holders of GPU 1 = %+v", h)
	}
	if !strings.HasPrefix(err.Error(), "4 of 8 GPUs free for 6 GPUs: ") {
		t.Errorf("error = %v", err)
	}
}

func TestVisibleEnv(t *testing.T) {
	devs := []Device{{Index: 2, UUID: "GPU-8d1c-aa"}, {Index: 5, UUID: "GPU-77ef-bb"}}
	if got := VisibleEnv(devs, "index"); !slices.Equal(got, []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=2,5"}) {
		t.Errorf("index: %q", got)
	}
	if got := VisibleEnv(devs, "uuid"); !slices.Equal(got, []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=GPU-8d1c-aa,GPU-77ef-bb"}) {
		t.Errorf("uuid: %q", got)
	}
	if got := VisibleEnv([]Device{{Index: 0, UUID: "GPU-x"}, {Index: 1}}, "uuid"); !slices.Equal(got, []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,1"}) {
		t.Errorf("uuid without every UUID: %q", got)
	}
	for _, mode := range []string{"index", "uuid"} {
		if got := VisibleEnv(nil, mode); got != nil {
			t.Errorf("%s, no devices: %q, want nothing (never an empty CUDA_VISIBLE_DEVICES)", mode, got)
		}
	}
}

// busyHost is 8 devices with 50 processes each: 3 devices busy with
// someone else's 40 processes holding 2 GiB, the others with 50 small
// processes (50 MiB each, under busy_memory), every one a different PID.
func busyHost(at time.Time) Snapshot {
	s := eight(at, 10, 0, 10, 0, 10, 0, 0, 0)
	pid := 1000
	for d := range 8 {
		for i := range 50 {
			p := Process{PID: pid, Device: d, MemUsed: 50 << 20, UID: 1000 + d, User: "u", Command: "python train.py", Util: -1}
			if (d == 0 || d == 2 || d == 4) && i < 40 {
				p.MemUsed = 2 * gb
			}
			if d == 6 && i == 0 {
				p.RunID = 9
			}
			s.Processes = append(s.Processes, p)
			pid++
		}
	}
	return s
}

// BenchmarkObserveChoose is what the trainer pays when it chooses from
// the monitor's snapshot, plus the monitor's Observe: 8 GPUs × 50
// processes.
func BenchmarkObserveChoose(b *testing.B) {
	s := busyHost(t0)
	a := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	a.Observe(s)
	s.Topology = NewTopology()
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			s.Topology.Set(fmt.Sprintf("GPU-%d", i), fmt.Sprintf("GPU-%d", j), Link{Path: PathNode, NVLink: true})
		}
	}
	at := t0
	for b.Loop() {
		at = at.Add(2 * time.Second)
		s.At = at.Add(time.Hour)
		a.Observe(s)
		if _, err := Choose(s, a, Request{Count: 2}, nil, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserve is the monitor's part alone, every sample.
func BenchmarkObserve(b *testing.B) {
	s := busyHost(t0)
	a := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	for b.Loop() {
		s.At = s.At.Add(2 * time.Second)
		a.Observe(s)
	}
}

//go:build cgo && !nonvml

package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// openNVML opens the system's NVML library.
func openNVML() (Backend, error) {
	n, err := OpenNVML(nvml.New())
	if err != nil {
		return nil, err
	}
	return n, nil
}

// NVML samples NVIDIA devices through NVML. It exists only after a
// successful nvml.Init: a failed Init is reported by OpenNVML and no other
// NVML call is ever made (after a failed Init, go-nvml calls into symbols
// that were never resolved, which kills the process).
type NVML struct {
	lib    nvml.Interface
	driver string

	mu     sync.Mutex // serialises Sample and Close
	devs   []nvmlDevice
	closed bool
	topo   *Topology // read once at open; nil when NVML could not tell
	procs  int       // processes in the last sample, to size the next one's list

	watchers sync.WaitGroup // WatchEvents calls in progress
	stop     chan struct{}  // closed by Close: watchers return
}

type nvmlDevice struct {
	h     nvml.Device
	index int
	name  string
	uuid  string
	memV2 bool // GetMemoryInfo_v2 is in the library and works on this device
	// procUtil: nvmlDeviceGetProcessUtilization is in the library and
	// this device has not said it does not support it.
	procUtil bool
	// utilSeen is the newest per-process utilisation sample read (NVML's
	// timestamp, µs), so the next call returns only newer ones.
	utilSeen uint64
}

var _ Backend = (*NVML)(nil)
var _ EventWatcher = (*NVML)(nil)

// OpenNVML initialises lib (nvml.New() for the system library, a mock in
// tests) and lists its devices. When Init fails the error is an
// *UnavailableError saying why, and lib is not touched again.
func OpenNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		reason, why := initReason(ret)
		return nil, &UnavailableError{Reason: reason, Why: why}
	}
	// NVML is initialised from here on: every early return shuts it down.
	n := &NVML{lib: lib, stop: make(chan struct{})}
	has := func(symbol string) bool { return lib.Extensions().LookupSymbol(symbol) == nil }
	hasV2 := has("nvmlDeviceGetMemoryInfo_v2")
	hasProcUtil := has("nvmlDeviceGetProcessUtilization")
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		n.driver = v
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, &UnavailableError{Reason: "NVML cannot count the GPUs: " + ret.Error()}
	}
	for i := 0; i < count; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // a GPU the driver lost; the others still count
		}
		d := nvmlDevice{h: h, index: i, memV2: hasV2, procUtil: hasProcUtil}
		if v, ret := h.GetName(); ret == nvml.SUCCESS {
			d.name = v
		}
		if v, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.uuid = v
		}
		n.devs = append(n.devs, d)
	}
	if len(n.devs) == 0 {
		lib.Shutdown()
		return nil, &UnavailableError{Reason: "the NVIDIA driver sees no GPU", Why: WhyNoGPU}
	}
	if has("nvmlDeviceGetTopologyCommonAncestor") && has("nvmlDeviceGetP2PStatus") {
		n.topo = readTopology(n.devs)
	}
	return n, nil
}

// readTopology asks NVML, once, how each pair of devices is connected:
// their closest common ancestor on the buses, and whether they reach each
// other over NVLink. It does not use nvmlDeviceGetNvLinkState: on an
// NVSwitch system (DGX) every link ends at a switch, not at the other GPU,
// while the P2P status with the NVLink index answers for the pair, through
// switches too. A pair NVML cannot tell about is left unknown; nil when
// no pair is known. go-nvml converts the second device of these calls by
// reflection and panics on a handle it cannot convert (and go-nvml's
// mocks panic on a method they do not set): the topology only orders
// equal choices, so a panic leaves it unknown instead of failing the open.
func readTopology(devs []nvmlDevice) (topo *Topology) {
	defer func() {
		if recover() != nil {
			topo = nil
		}
	}()
	t := NewTopology()
	for i := range devs {
		for j := i + 1; j < len(devs); j++ {
			a, b := devs[i], devs[j]
			if a.uuid == "" || b.uuid == "" {
				continue
			}
			var l Link
			if level, ret := a.h.GetTopologyCommonAncestor(b.h); ret == nvml.SUCCESS {
				l.Path = pathLevel(level)
			}
			if st, ret := a.h.GetP2PStatus(b.h, nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
				l.NVLink = true
			}
			t.Set(a.uuid, b.uuid, l)
		}
	}
	if !t.Known() {
		return nil
	}
	return t
}

// pathLevel is NVML's topology level as a PathLevel.
func pathLevel(l nvml.GpuTopologyLevel) PathLevel {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return PathBoard
	case nvml.TOPOLOGY_SINGLE:
		return PathSwitch
	case nvml.TOPOLOGY_MULTIPLE:
		return PathSwitches
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return PathHostBridge
	case nvml.TOPOLOGY_NODE:
		return PathNode
	case nvml.TOPOLOGY_SYSTEM:
		return PathSystem
	}
	return PathUnknown
}

// initReason explains a failed nvml.Init in words, and as a fact.
func initReason(ret nvml.Return) (string, Why) {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "no NVIDIA driver (libnvidia-ml.so.1 not found)", WhyNoDriver
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA driver is not loaded", WhyDriverNotLoad
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to use the NVIDIA driver", WhyNoPermission
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the NVIDIA driver and its library do not match (reboot after a driver update?)", WhyDriverMismatch
	}
	return "NVML init failed: " + ret.Error(), ""
}

// Name is "nvml".
func (n *NVML) Name() string { return "nvml" }

// Driver is the driver version, "" when unknown.
func (n *NVML) Driver() string { return n.driver }

// Sample reads every device and the processes that hold memory on it. A
// device that does not answer is left out and its error returned with the
// others' figures.
func (n *NVML) Sample(ctx context.Context) (Snapshot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Snapshot{}, &UnavailableError{Reason: "NVML is closed"}
	}
	snap := Snapshot{At: time.Now(), Driver: n.driver, Devices: make([]Device, 0, len(n.devs)), Topology: n.topo,
		Processes: make([]Process, 0, n.procs)}
	var errs []error
	for i := range n.devs {
		d := &n.devs[i]
		dev, err := d.sample()
		if err != nil {
			errs = append(errs, fmt.Errorf("gpu %d: %w", d.index, err))
			snap.Unanswered = append(snap.Unanswered, Device{Index: d.index, Name: d.name, UUID: d.uuid, Util: -1, MemUtil: -1, TempC: -1})
			continue
		}
		snap.Devices = append(snap.Devices, dev)
		snap.Processes = d.appendProcesses(snap.Processes, dev.Util)
	}
	n.procs = len(snap.Processes)
	return snap, errors.Join(errs...)
}

// sample reads one device. Memory is required; a figure the device does
// not support is left unknown.
func (d *nvmlDevice) sample() (Device, error) {
	out := Device{Index: d.index, Name: d.name, UUID: d.uuid, Util: -1, MemUtil: -1, TempC: -1}
	if d.memV2 {
		m, ret := d.h.GetMemoryInfo_v2()
		switch ret {
		case nvml.SUCCESS:
			out.MemUsed, out.MemReserved, out.MemTotal = m.Used, m.Reserved, m.Total
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			d.memV2 = false
		default:
			return Device{}, fmt.Errorf("memory: %w", ret)
		}
	}
	if !d.memV2 {
		m, ret := d.h.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return Device{}, fmt.Errorf("memory: %w", ret)
		}
		out.MemUsed, out.MemTotal = m.Used, m.Total
	}
	if u, ret := d.h.GetUtilizationRates(); ret == nvml.SUCCESS {
		out.Util, out.MemUtil = int(u.Gpu), int(u.Memory)
	}
	if t, ret := d.h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		out.TempC = int(t)
	}
	if p, ret := d.h.GetPowerUsage(); ret == nvml.SUCCESS {
		out.PowerMilliW = uint64(p)
	}
	if p, ret := d.h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		out.PowerLimitMilliW = uint64(p)
	}
	return out, nil
}

// notAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long: the
// memory of a process NVML cannot see (Windows WDDM, some containers).
const notAvailable = ^uint64(0)

// appendProcesses appends the compute and graphics processes on the
// device to out, once each, with their utilisation when NVML tells it.
// devUtil is the device's utilisation: a device at 0 % has every process
// at 0 %, whatever the per-process samples say.
func (d *nvmlDevice) appendProcesses(out []Process, devUtil int) []Process {
	start := len(out)
	add := func(list []nvml.ProcessInfo) {
	next:
		for _, p := range list {
			mem := p.UsedGpuMemory
			if mem == notAvailable {
				mem = 0
			}
			for i := start; i < len(out); i++ {
				if out[i].PID == int(p.Pid) {
					out[i].MemUsed = max(out[i].MemUsed, mem)
					continue next
				}
			}
			out = append(out, Process{PID: int(p.Pid), Device: d.index, MemUsed: mem, UID: -1, Util: -1})
		}
	}
	if list, ret := d.h.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
		add(list)
	}
	if list, ret := d.h.GetGraphicsRunningProcesses(); ret == nvml.SUCCESS {
		add(list)
	}
	mine := out[start:]
	if len(mine) == 0 {
		return out // no call for the utilisation of nobody
	}
	if devUtil == 0 {
		for i := range mine {
			mine[i].Util = 0
		}
		return out
	}
	d.processUtil(mine)
	return out
}

// processUtil sets each process's utilisation from NVML's per-process
// samples newer than the last ones read: one call per device and sample.
// NOT_FOUND (no sample since) leaves them unknown; NOT_SUPPORTED does so
// for good, and the device is not asked again.
func (d *nvmlDevice) processUtil(procs []Process) {
	if !d.procUtil {
		return
	}
	samples, ret := d.h.GetProcessUtilization(d.utilSeen)
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_INSUFFICIENT_SIZE:
		// go-nvml returns it, with no samples, when NVML counts none;
		// also when more samples came between its two calls: unknown.
		return
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		d.procUtil = false
		return
	default: // NOT_FOUND: no sample since utilSeen
		return
	}
	newest := make(map[uint32]nvml.ProcessUtilizationSample, len(samples))
	for _, s := range samples {
		d.utilSeen = max(d.utilSeen, s.TimeStamp)
		if prev, ok := newest[s.Pid]; !ok || s.TimeStamp >= prev.TimeStamp {
			newest[s.Pid] = s
		}
	}
	for i := range procs {
		if s, ok := newest[uint32(procs[i].PID)]; ok {
			procs[i].Util = int(min(s.SmUtil, 100))
		}
	}
}

// criticalEvents are the events WatchEvents registers for.
const criticalEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// eventWait is how long one wait for an event blocks in NVML, so that a
// watcher notices its end within this time.
const eventWait = 500 * time.Millisecond

// WatchEvents registers every device for Xid critical errors and double
// bit ECC errors and calls fn for each until ctx ends or the backend is
// closed.
func (n *NVML) WatchEvents(ctx context.Context, fn func(DeviceEvent)) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return &UnavailableError{Reason: "NVML is closed"}
	}
	n.watchers.Add(1)
	devs := n.devs
	n.mu.Unlock()
	defer n.watchers.Done()

	set, ret := n.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml event set: %w", ret)
	}
	defer set.Free()
	registered := 0
	var regErrs []error
	for _, d := range devs {
		supported, ret := d.h.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			regErrs = append(regErrs, fmt.Errorf("gpu %d: supported events: %w", d.index, ret))
			continue
		}
		mask := supported & criticalEvents
		if mask == 0 {
			continue
		}
		if ret := d.h.RegisterEvents(mask, set); ret != nvml.SUCCESS {
			regErrs = append(regErrs, fmt.Errorf("gpu %d: register events: %w", d.index, ret))
			continue
		}
		registered++
	}
	if registered == 0 {
		return fmt.Errorf("no GPU reports Xid events: %w", errors.Join(regErrs...))
	}
	pause := time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.stop:
			return nil
		default:
		}
		data, ret := set.Wait(uint32(eventWait / time.Millisecond))
		switch ret {
		case nvml.SUCCESS:
			pause = time.Second
			ev := DeviceEvent{At: time.Now(), Device: deviceIndex(data.Device)}
			switch {
			case data.EventType&nvml.EventTypeXidCriticalError != 0:
				ev.Kind, ev.Xid = EventXid, data.EventData
			case data.EventType&nvml.EventTypeDoubleBitEccError != 0:
				ev.Kind = EventDoubleBitECC
			default:
				continue
			}
			fn(ev)
		case nvml.ERROR_TIMEOUT:
		default:
			// A lost GPU can make every wait fail at once: do not spin.
			select {
			case <-ctx.Done():
				return nil
			case <-n.stop:
				return nil
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
		}
	}
}

func deviceIndex(h nvml.Device) int {
	if h == nil {
		return -1
	}
	i, ret := h.GetIndex()
	if ret != nvml.SUCCESS {
		return -1
	}
	return i
}

// Close stops the event watchers and shuts NVML down. No NVML call is
// made after it.
func (n *NVML) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	n.watchers.Wait()
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %w", ret)
	}
	return nil
}

// Package gpu samples accelerator and host memory for trainbot: per device
// its name, memory, utilisation, temperature and power, and per process the
// memory it holds, so that memory can be attributed to the run whose process
// group (or process tree) owns the process.
//
// Sampler is the one interface the rest of trainbot uses for devices. The
// NVML backend (nvml.go, built with cgo and without the nonvml tag) wraps
// the few go-nvml calls it needs behind nvml.Interface, so tests drive it
// with go-nvml's mock systems. Where NVML cannot be used (no driver, a
// build without cgo) Open returns a sampler that reports ErrUnavailable
// with the reason, and everything else keeps working on host memory: the
// host's /proc/meminfo and, per run, the resident memory of the run's whole
// process tree from /proc.
//
// Collect takes one snapshot and attributes it to runs; Monitor takes one
// every interval, stores it, raises the runs' peaks and sends alerts
// (memory and temperature thresholds, Xid and double bit ECC events). An
// alert, like a snapshot, is facts: bot/render words both for the chats
// (GPUAlert, GPUTable), so gpu imports nothing of i18n, store or trainer.
package gpu

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
)

// ErrUnavailable is returned by a backend that cannot sample on this host
// (for NVML: no NVIDIA driver). Errors that wrap it are *UnavailableError.
var ErrUnavailable = errors.New("gpu: not available")

// UnavailableError says why there are no device figures on this host.
type UnavailableError struct {
	Reason string // "no NVIDIA driver (libnvidia-ml.so.1 not found)"
	Why    Why    // the same as a fact, for texts in other languages ("" when none fits)
}

// Why is why there are no device figures, as a fact.
type Why string

// The reasons a chat words in its own language (Reason is the English).
const (
	WhyNoDriver       Why = "no_driver"         // libnvidia-ml.so.1 not found
	WhyDriverNotLoad  Why = "driver_not_loaded" // the kernel module is not loaded
	WhyNoPermission   Why = "no_permission"
	WhyDriverMismatch Why = "driver_mismatch" // driver and library versions differ
	WhyNoGPU          Why = "no_gpu"          // the driver sees no GPU
	WhyNoNVML         Why = "no_nvml"         // built without NVML
)

// WhyOf returns the Why of an UnavailableError in err's chain ("" when
// there is none).
func WhyOf(err error) Why {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Why
	}
	return ""
}

func (e *UnavailableError) Error() string { return "no GPU telemetry: " + e.Reason }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Reason returns the reason of an UnavailableError in err's chain, or
// err's text.
func Reason(err error) string {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// Device is one accelerator at one instant.
type Device struct {
	Index            int
	Name             string
	UUID             string
	MemUsed          uint64 // bytes allocated (NVML v2: without the driver's reserve)
	MemReserved      uint64 // bytes the driver reserves (NVML v2; 0 with v1, whose MemUsed counts it)
	MemTotal         uint64 // bytes
	Util             int    // percent, -1 when unknown
	MemUtil          int    // percent, -1 when unknown
	TempC            int    // degrees Celsius, -1 when unknown
	PowerMilliW      uint64 // 0 when unknown
	PowerLimitMilliW uint64 // 0 when unknown
}

// MemPercent is the share of the device's memory that is not free
// (allocated plus reserved), 0..100.
func (d Device) MemPercent() float64 {
	if d.MemTotal == 0 {
		return 0
	}
	return float64(d.MemUsed+d.MemReserved) * 100 / float64(d.MemTotal)
}

// Process is the memory one process holds on one device, and who holds
// it.
type Process struct {
	PID     int
	Device  int
	MemUsed uint64 // bytes
	RunID   int64  // the run whose process group or tree holds the PID, 0 if none
	Name    string // the command name from /proc (comm), "" when unknown
	// UID is the process's real user id (/proc/PID/status), -1 when
	// unknown (the process has ended, or lives in another PID namespace).
	UID int
	// User is UID's user name, or UID as a number when it has none; ""
	// when UID is unknown.
	User string
	// Command is the process's command line (/proc/PID/cmdline, its
	// arguments joined by spaces), at most MaxCommand runes and safe to
	// print on a terminal; "" when unknown (a kernel thread, an ended
	// process, another PID namespace).
	Command string
	// Since is when this trainbot first saw the process on this device (a
	// Monitor keeps it across samples; NVML does not say when a process
	// took a device). Zero when unknown: a one-off Collect.
	Since time.Time
	// Util is the share of the device's time the process had kernels
	// running (NVML's per-process SM utilisation since the last sample),
	// in percent; -1 when unknown.
	Util int
}

// MaxCommand is the most runes of a command line a Process keeps.
const MaxCommand = 120

// RunUsage is what one active run holds at one instant.
type RunUsage struct {
	RunID int64
	PID   int // the run's main process (and process group id)
	// GPUBytes is the device memory held by the run's processes; nil when
	// there are no device figures (no NVML).
	GPUBytes *int64
	// GPUTotal is the capacity of the devices the run's processes use; nil
	// when they use none or there are no device figures.
	GPUTotal *int64
	// Devices are the indexes of the devices the run's processes use.
	Devices []int
	// HostBytes is the resident memory summed over the run's process tree
	// (its process group and every descendant); nil when /proc could not
	// be read.
	HostBytes *int64
	// Processes counts the live processes of the run's tree.
	Processes int
	// HWM is the high-water mark of resident memory (VmHWM) of each live
	// process of the tree, in bytes; nil when /proc could not be read.
	HWM map[procfs.ProcID]int64
	// CgroupPeak is the peak memory of the run's own cgroup (memory.peak),
	// 0 when the run shares its supervisor's cgroup or it cannot be read.
	CgroupPeak int64
}

// Snapshot is one sample of the devices, the host and the active runs.
type Snapshot struct {
	At time.Time
	// Available is true when the devices were sampled (NVML); Reason says
	// why not otherwise.
	Available bool
	Reason    string
	Why       Why    // Reason as a fact, when one fits
	Driver    string // the driver version, when known
	Devices   []Device
	// Unanswered are the devices NVML lists that did not answer this
	// sample (index, name and UUID only): not gone from the host, so a
	// request for them waits (Choose) rather than being refused for good.
	Unanswered []Device
	Processes  []Process
	Host       Host
	Runs       []RunUsage // in run id order; filled by Collect
	// Topology is how the devices are connected (NVLink, PCIe, NUMA), as
	// NVML told when it opened; nil when it could not tell. It never
	// changes and is shared by every snapshot.
	Topology *Topology
}

// Host is the machine's memory.
type Host struct {
	MemTotal     uint64 // bytes
	MemAvailable uint64 // bytes
}

// Used is the memory in use: total minus available.
func (h Host) Used() uint64 {
	if h.MemAvailable > h.MemTotal {
		return 0
	}
	return h.MemTotal - h.MemAvailable
}

// Sampler takes snapshots of the devices.
type Sampler interface {
	// Sample returns the current state of the devices and their processes
	// (Devices, Processes, Driver). A backend that cannot sample on this
	// host returns an error wrapping ErrUnavailable.
	Sample(ctx context.Context) (Snapshot, error)
}

// Backend is a Sampler that holds resources until it is closed.
type Backend interface {
	Sampler
	// Name says where device figures come from: "nvml", or "none".
	Name() string
	// Close releases the backend. No call reaches the library after it.
	Close() error
}

// EventKind is a kind of critical device event.
type EventKind string

// Device event kinds.
const (
	EventXid          EventKind = "xid"
	EventDoubleBitECC EventKind = "ecc_dbe"
)

// DeviceEvent is a critical event reported by a device.
type DeviceEvent struct {
	At     time.Time
	Device int // index, -1 when unknown
	Kind   EventKind
	Xid    uint64 // for EventXid
}

// EventWatcher is implemented by backends that report critical device
// events (NVML: Xid errors and double bit ECC errors).
type EventWatcher interface {
	// WatchEvents calls fn for every critical event until ctx ends. It
	// returns an error at once when no device can report events.
	WatchEvents(ctx context.Context, fn func(DeviceEvent)) error
}

// Open returns the NVML backend when NVML works on this host, and
// otherwise a backend whose Sample reports why (an *UnavailableError); the
// second result is that error, nil with NVML. A failed NVML Init is final:
// no other NVML call is made.
func Open() (Backend, error) {
	b, err := openNVML()
	if err != nil {
		return Unavailable(err), err
	}
	return b, nil
}

// Unavailable returns a backend that samples nothing and reports err
// (wrapped in an *UnavailableError unless it already is one).
func Unavailable(err error) Backend {
	var u *UnavailableError
	if !errors.As(err, &u) {
		u = &UnavailableError{Reason: Reason(err), Why: WhyOf(err)}
	}
	return noDevices{err: u}
}

type noDevices struct{ err *UnavailableError }

func (n noDevices) Sample(context.Context) (Snapshot, error) { return Snapshot{}, n.err }
func (n noDevices) Name() string                             { return "none" }
func (n noDevices) Close() error                             { return nil }

// HostMemory reads the host's memory from /proc/meminfo.
func HostMemory() (Host, error) {
	m, err := procfs.Meminfo()
	return Host{MemTotal: m.Total, MemAvailable: m.Available}, err
}

func parseMeminfo(r io.Reader) (Host, error) {
	m, err := procfs.ParseMeminfo(r)
	return Host{MemTotal: m.Total, MemAvailable: m.Available}, err
}

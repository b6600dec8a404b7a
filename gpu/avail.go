package gpu

import (
	"sync"
	"time"
)

// Defaults of the [gpu] keys that say when a device is busy.
const (
	DefaultBusyMemory = 1 << 30 // busy_memory: 1 GiB
	DefaultBusyUtil   = 10      // busy_util: percent
	DefaultFreeFor    = time.Minute
)

// Availability keeps, per device (by UUID), since when it has been quiet:
// no process that is not a trainbot run's holds more than BusyMemory on
// it, and its utilisation is under BusyUtil unless every process on it is
// a trainbot run's. A Monitor feeds it every snapshot (Observe); Choose
// reads it. A device is quiet from the first snapshot that shows it quiet,
// so after trainbot starts no device has been quiet for longer than
// trainbot has watched it. It is safe for concurrent use.
//
// A trainbot run on a device does not make it busy here: the run holds the
// device's lock, which Choose is told of (taken); this says what NVML
// shows of everyone else.
type Availability struct {
	busyMemory uint64
	busyUtil   int

	mu    sync.Mutex
	at    time.Time            // the last snapshot's time
	quiet map[string]time.Time // uuid -> quiet since; absent: busy, or not seen
}

// NewAvailability returns an Availability that counts a device busy when
// another process holds more than busyMemory bytes on it, or when its
// utilisation is at or above busyUtil percent.
func NewAvailability(busyMemory uint64, busyUtil int) *Availability {
	return &Availability{busyMemory: busyMemory, busyUtil: busyUtil, quiet: map[string]time.Time{}}
}

// BusyMemory is the memory a process that is not a trainbot run's may
// hold on a quiet device, in bytes.
func (a *Availability) BusyMemory() uint64 { return a.busyMemory }

// BusyUtil is the utilisation, in percent, from which a device is busy.
func (a *Availability) BusyUtil() int { return a.busyUtil }

// Observe takes one snapshot. A device busy in it is busy from now; a
// quiet one stays quiet since it was first seen quiet. A device the
// snapshot does not have (it did not answer, NVML went away) is forgotten:
// it must be seen quiet for the whole free_for again. Snapshots older than
// the last one are ignored.
func (a *Availability) Observe(s Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.At.Before(a.at) {
		return
	}
	a.at = s.At
	if !s.Available {
		clear(a.quiet)
		return
	}
	seen := make(map[string]bool, len(s.Devices))
	for _, d := range s.Devices {
		if d.UUID == "" {
			continue
		}
		seen[d.UUID] = true
		if a.busy(d, s.Processes) {
			delete(a.quiet, d.UUID)
		} else if _, ok := a.quiet[d.UUID]; !ok {
			a.quiet[d.UUID] = s.At
		}
	}
	for uuid := range a.quiet {
		if !seen[uuid] {
			delete(a.quiet, uuid)
		}
	}
}

// busy reports whether d is busy in a snapshot with these processes.
func (a *Availability) busy(d Device, procs []Process) bool {
	ours, others := 0, 0
	for _, p := range procs {
		if p.Device != d.Index {
			continue
		}
		if p.RunID != 0 {
			ours++
			continue
		}
		others++
		if p.MemUsed > a.busyMemory {
			return true
		}
	}
	if ours > 0 && others == 0 {
		return false // the utilisation is the runs' own
	}
	return d.Util >= a.busyUtil
}

// FreeFor is how long the device with this UUID has been quiet, up to the
// last snapshot observed; 0 when it is busy or has not been seen.
func (a *Availability) FreeFor(uuid string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	since, ok := a.quiet[uuid]
	if !ok {
		return 0
	}
	return a.at.Sub(since)
}

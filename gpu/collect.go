package gpu

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
)

// Collect takes one snapshot: the devices from s, the host's memory, and
// what each active run holds. runs maps a run's process group id (its main
// process's PID) to the run id. A process is the run's when its process
// group is the run's or one of its ancestors is the run's main process.
//
// When s reports ErrUnavailable the snapshot has Available false and the
// Reason, and the runs still get their host memory; that is not an error.
// Other errors (a device that stopped answering, /proc unreadable) are
// returned with whatever could be read.
//
// Each process gets its user and command from /proc; Since is left zero
// (a Monitor keeps it across samples).
func Collect(ctx context.Context, s Sampler, runs map[int]int64) (Snapshot, error) {
	return collect(ctx, s, runs, newHolderBook())
}

// collect is Collect with the holders' identities cached in book.
func collect(ctx context.Context, s Sampler, runs map[int]int64, book *holderBook) (Snapshot, error) {
	var errs []error
	snap, err := s.Sample(ctx)
	devicesOK := err == nil
	switch {
	case err == nil:
		snap.Available = true
	case errors.Is(err, ErrUnavailable):
		snap = Snapshot{Reason: Reason(err), Why: WhyOf(err)}
	default:
		snap.Available = true
		errs = append(errs, err)
	}
	if snap.At.IsZero() {
		snap.At = time.Now()
	}
	host, err := HostMemory()
	if err != nil {
		errs = append(errs, err)
	}
	snap.Host = host

	// The /proc scan is the costly part (one stat read per process on the
	// host): without an active run there is nothing to attribute it to.
	procs, procsOK := procfs.Empty(), true
	if len(runs) > 0 {
		if procs, err = procfs.ReadProcs(); err != nil {
			errs = append(errs, err)
			procs, procsOK = procfs.Empty(), false
		}
	}
	for i := range snap.Processes {
		pr := &snap.Processes[i]
		pr.RunID = procs.Owner(pr.PID, runs)
	}
	book.identify(snap.Processes)
	snap.Runs = runUsage(snap, procs, runs, devicesOK, procsOK)
	return snap, errors.Join(errs...)
}

// runUsage builds each run's figures. The GPU figures are left nil when
// the devices were not sampled, or not completely (a partial sample would
// draw a false dip in the run's memory chart). All are nil for a run with
// no live process (its main process has exited and the supervisor is
// draining its output): it was not measured, and a zero would show as its
// peak and as a drop at the end of its chart. Each live process's VmHWM
// and the memory.peak of a cgroup of the run's own are read too, for the
// run's true peak (Monitor.hostPeaks).
func runUsage(snap Snapshot, procs *procfs.Procs, runs map[int]int64, complete, procsOK bool) []RunUsage {
	tree := procs.Usage(runs)
	out := make([]RunUsage, 0, len(runs))
	for pgid, id := range runs {
		t := tree[id]
		u := RunUsage{RunID: id, PID: pgid, Processes: t.Procs}
		if procsOK && t.Procs == 0 {
			out = append(out, u)
			continue
		}
		if procsOK {
			rss := t.RSS
			u.HostBytes = &rss
			u.HWM = make(map[procfs.ProcID]int64, len(t.PIDs))
			for _, p := range t.PIDs {
				if hwm, ok := procfs.ReadHWM(p.PID); ok {
					u.HWM[p] = hwm
				}
			}
			if st, ok := procs.Get(pgid); ok {
				u.CgroupPeak, _ = procfs.OwnCgroupPeak(pgid, st.PPID)
			}
		}
		if snap.Available && complete {
			var held int64
			for _, p := range snap.Processes {
				if p.RunID == id {
					held += int64(p.MemUsed)
					if !slices.Contains(u.Devices, p.Device) {
						u.Devices = append(u.Devices, p.Device)
					}
				}
			}
			slices.Sort(u.Devices)
			u.GPUBytes = &held
			if len(u.Devices) > 0 {
				var total int64
				for _, d := range snap.Devices {
					if slices.Contains(u.Devices, d.Index) {
						total += int64(d.MemTotal)
					}
				}
				u.GPUTotal = &total
			}
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b RunUsage) int { return int(a.RunID - b.RunID) })
	return out
}

// DeviceByIndex returns the device with an index.
func (s Snapshot) DeviceByIndex(i int) (Device, bool) {
	for _, d := range s.Devices {
		if d.Index == i {
			return d, true
		}
	}
	return Device{}, false
}

// RunsOnDevice returns the ids of the runs whose processes use a device.
func (s Snapshot) RunsOnDevice(dev int) []int64 {
	var ids []int64
	for _, p := range s.Processes {
		if p.Device == dev && p.RunID != 0 && !slices.Contains(ids, p.RunID) {
			ids = append(ids, p.RunID)
		}
	}
	slices.Sort(ids)
	return ids
}

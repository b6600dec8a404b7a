package gpu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/proctest"
)

// runsFake is a supervisor with fixed runs that records the peaks raised.
type runsFake struct {
	pgids    map[int]int64
	observed []string
	peaks    []hostPeak
}

func (r *runsFake) ActivePGIDs() map[int]int64 { return r.pgids }
func (r *runsFake) ObserveMemory(runID int64, gpuBytes, hostBytes *int64) {
	if gpuBytes != nil || hostBytes != nil {
		r.observed = append(r.observed, "a figure")
	}
}

func (r *runsFake) ObserveHostPeak(runID int64, bytes int64, how string) {
	r.peaks = append(r.peaks, hostPeak{runID, bytes, how})
}

var _ Runs = (*runsFake)(nil)

// recorderFake counts the stored rows.
type recorderFake struct{ runRows int }

func (r *recorderFake) AddDeviceSamples(context.Context, []history.DeviceSample) error { return nil }
func (r *recorderFake) AddRunMemory(_ context.Context, rows []history.RunMemory) error {
	r.runRows += len(rows)
	return nil
}

var _ Recorder = (*recorderFake)(nil)

// A run none of whose processes is alive any more (its main process has
// exited and the supervisor is draining its output) was not measured: it
// holds nothing worth a "peak host memory 0 B", nor a drop to zero at the
// end of its memory chart.
func TestRunWithoutLiveProcessHasNoFigures(t *testing.T) {
	gone := 1 << 22 // above the default pid_max: no such process
	runs := &runsFake{pgids: map[int]int64{gone: 7}}
	rec := &recorderFake{}
	m := NewMonitor(MonitorOptions{Sampler: Unavailable(&UnavailableError{Reason: "test"}), Runs: runs, Recorder: rec})
	if err := m.Sample(context.Background()); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	snap := m.Last()
	if len(snap.Runs) != 1 || snap.Runs[0].HostBytes != nil || snap.Runs[0].GPUBytes != nil || snap.Runs[0].Processes != 0 {
		t.Fatalf("run usage = %+v, want run 7 without figures", snap.Runs)
	}
	if len(runs.observed) != 0 || rec.runRows != 0 {
		t.Errorf("%d peaks raised and %d rows stored, want none", len(runs.observed), rec.runRows)
	}
}

// A peak between two samples is still the run's peak: the monitor reads
// the kernel's high-water mark (VmHWM) of each process of the run, so a
// process that held 64 MiB for an instant and then freed it has a peak of
// at least 64 MiB, where its resident memory at the sample is far lower.
func TestHostPeakIsTheHighWaterMark(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	ready := filepath.Join(t.TempDir(), "ready")
	script := "exec python3 -c 'import time; b = b\"x\" * (64 << 20); del b; open(\"" + ready + "\", \"w\").close(); time.sleep(60)'"
	pid, _ := proctest.StartTree(t, script, 0)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script did not get past its peak in 20s")
		}
		time.Sleep(20 * time.Millisecond) // polling for the script's file
	}
	runs := &runsFake{pgids: map[int]int64{pid: 7}}
	m := NewMonitor(MonitorOptions{Sampler: Unavailable(&UnavailableError{Reason: "test"}), Runs: runs})
	if err := m.Sample(context.Background()); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	snap := m.Last()
	if len(snap.Runs) != 1 || snap.Runs[0].HostBytes == nil {
		t.Fatalf("run usage = %+v, want run 7 measured", snap.Runs)
	}
	if rss := *snap.Runs[0].HostBytes; rss >= 48<<20 {
		t.Fatalf("resident memory after the peak is %d, want it below 48 MiB (the peak was freed)", rss)
	}
	if len(runs.peaks) != 1 {
		t.Fatalf("peaks raised: %+v, want one", runs.peaks)
	}
	p := runs.peaks[0]
	if p.run != 7 || p.bytes < 64<<20 || p.how != history.PeakMain {
		t.Errorf("peak = %+v, want run 7, at least 64 MiB, %q (one process)", p, history.PeakMain)
	}
}

// gpu_util of a run is the mean utilisation of the devices its processes use.
func TestRunUtil(t *testing.T) {
	snap := Snapshot{Devices: []Device{{Index: 0, Util: 90}, {Index: 1, Util: 10}, {Index: 2, Util: -1}}}
	if got, ok := runUtil(snap, RunUsage{Devices: []int{0, 1}}); !ok || got != 50 {
		t.Errorf("devices 0 and 1: %v %v, want 50", got, ok)
	}
	if _, ok := runUtil(snap, RunUsage{Devices: []int{2}}); ok {
		t.Error("a device of unknown utilisation gave one")
	}
	if _, ok := runUtil(snap, RunUsage{}); ok {
		t.Error("a run without devices gave one")
	}
}

// A watched run's process is usually not a process group leader (started
// in someone's shell): its memory is that of its own tree, and no more.
func TestWatchedProcessThatLeadsNoGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(200 * time.Millisecond) // its child starts
	runs := &runsFake{pgids: map[int]int64{cmd.Process.Pid: 9}}
	m := NewMonitor(MonitorOptions{Sampler: Unavailable(&UnavailableError{Reason: "test"}), Runs: runs})
	if err := m.Sample(context.Background()); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	snap := m.Last()
	if len(snap.Runs) != 1 || snap.Runs[0].HostBytes == nil || *snap.Runs[0].HostBytes <= 0 {
		t.Fatalf("run usage = %+v, want run 9 measured", snap.Runs)
	}
	if u := snap.Runs[0]; u.Processes != 2 || *u.HostBytes > 64<<20 {
		t.Errorf("run 9: %d processes, %d bytes; want the shell and its sleep only, not the test's group", u.Processes, *u.HostBytes)
	}
}

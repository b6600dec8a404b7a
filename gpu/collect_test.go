package gpu

import (
	"context"
	"errors"
	"testing"

	"github.com/trainbot/trainbot/store"
)

// runsFake is a supervisor with fixed runs that records the peaks raised.
type runsFake struct {
	pgids    map[int]int64
	observed []string
}

func (r *runsFake) ActivePGIDs() map[int]int64 { return r.pgids }
func (r *runsFake) ObserveMemory(runID int64, gpuBytes, hostBytes *int64) {
	if gpuBytes != nil || hostBytes != nil {
		r.observed = append(r.observed, "a figure")
	}
}

var _ Runs = (*runsFake)(nil)

// recorderFake counts the stored rows.
type recorderFake struct{ runRows int }

func (r *recorderFake) AddDeviceSamples(context.Context, []store.DeviceSample) error { return nil }
func (r *recorderFake) AddRunMemory(_ context.Context, rows []store.RunMemory) error {
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

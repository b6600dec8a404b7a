package trainer_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

func batchJob(fits string, retry int) *trainer.Job {
	one := 1.0
	j := job("fit", childCommand("fitbatch", "{batch_size}", fits))
	j.Params = map[string]trainer.ParamSpec{
		"batch_size": {Type: trainer.ParamInt, Default: "64", HasDefault: true, Min: &one},
		"lr":         {Type: trainer.ParamFloat, Default: "0.1", HasDefault: true},
	}
	j.OnOOM = &trainer.OOMRetry{Retry: retry, Halve: "batch_size"}
	return j
}

// endedEvents collects the ended events until one is not followed by a
// retry (or n of them).
func (h *harness) endedChain(n int) []trainer.Event {
	h.t.Helper()
	var out []trainer.Event
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case e := <-h.events:
			if e.Kind == trainer.EventEnded {
				out = append(out, e)
				if e.Retry == nil || e.Retry.Next == "" {
					return out
				}
			}
		case <-deadline:
			h.t.Fatalf("only %d ended events", len(out))
		}
	}
	return out
}

func TestOnOOMHalvesTheBatchUntilItFits(t *testing.T) {
	h := newHarness(t, batchJob("16", 2))
	first := h.start("fit", map[string]string{"lr": "0.05"})
	chain := h.endedChain(5)
	if len(chain) != 3 {
		t.Fatalf("%d runs ended, want 3 (64 and 32 out of memory, 16 fits)", len(chain))
	}
	wantBS := []string{"64", "32", "16"}
	for i, e := range chain {
		r := e.Run
		if r.Params["batch_size"] != wantBS[i] || r.Params["lr"] != "0.05" {
			t.Errorf("run %d params %v, want batch_size=%s and the same lr", i, r.Params, wantBS[i])
		}
		if e.Retry == nil || e.Retry.Param != "batch_size" || e.Retry.Attempt != i || e.Retry.Limit != 2 || e.Retry.Value != wantBS[i] {
			t.Errorf("run %d retry %+v", i, e.Retry)
		}
		if i > 0 && r.RetryOf != chain[i-1].Run.ID {
			t.Errorf("run %d retries #%d, want #%d", r.ID, r.RetryOf, chain[i-1].Run.ID)
		}
		if i > 0 && !strings.Contains(r.StartedBy, "on_oom") {
			t.Errorf("run %d started by %q", r.ID, r.StartedBy)
		}
	}
	if chain[0].Run.ID != first.ID || chain[0].Run.Outcome != trainer.OutcomeOOM || chain[0].Retry.Next != "32" || chain[0].OOM == nil || chain[0].OOM.TriedBytes != 2<<30 {
		t.Errorf("first end %+v retry %+v oom %+v", chain[0].Run, chain[0].Retry, chain[0].OOM)
	}
	if last := chain[2]; last.Run.Outcome != trainer.OutcomeFinished || last.Retry.Next != "" || last.Retry.Refused != "" {
		t.Errorf("last end %s %+v", last.Run.Outcome, last.Retry)
	}
	// The link is stored.
	stored, err := h.st.Run(context.Background(), chain[2].Run.ID)
	if err != nil || stored.RetryOf != chain[1].Run.ID {
		t.Errorf("stored retry_of %d (%v), want %d", stored.RetryOf, err, chain[1].Run.ID)
	}
	runs, _ := h.st.Runs(context.Background(), history.RunFilter{})
	if len(runs) != 3 {
		t.Errorf("%d runs stored, want 3", len(runs))
	}
}

func TestOnOOMGivesUpAtTheLimit(t *testing.T) {
	h := newHarness(t, batchJob("4", 2))
	h.start("fit", nil)
	chain := h.endedChain(5)
	if len(chain) != 3 {
		t.Fatalf("%d runs, want 3 (the first and 2 retries)", len(chain))
	}
	last := chain[2]
	if last.Run.Outcome != trainer.OutcomeOOM || last.Retry.Next != "" || !strings.Contains(last.Retry.Refused, "gives up after 2 retries") {
		t.Errorf("last %s %+v", last.Run.Outcome, last.Retry)
	}
	if n := len(h.sup.Active()); n != 0 {
		t.Errorf("%d runs still active", n)
	}
}

func TestOnOOMStopsAtTheMinimum(t *testing.T) {
	j := batchJob("0", 5)
	min := 40.0
	spec := j.Params["batch_size"]
	spec.Min = &min
	j.Params["batch_size"] = spec
	h := newHarness(t, j)
	h.start("fit", nil)
	chain := h.endedChain(5)
	if len(chain) != 1 || !strings.Contains(chain[0].Retry.Refused, "half of batch_size=64 is below its minimum 40") {
		t.Errorf("%d runs, retry %+v", len(chain), chain[0].Retry)
	}
}

// A run that ran out of memory and is stopped while it hangs (a rank
// waiting for the others) ended out of memory, not "stopped"; and since
// someone stopped it, on_oom starts nothing.
func TestStopAfterOOMKeepsTheOOM(t *testing.T) {
	j := batchJob("16", 2)
	j.Command = childCommand("oomhang", "{batch_size}")
	h := newHarness(t, j)
	r := h.start("fit", nil)
	if e := h.waitEvent(trainer.EventAlert, r.ID); e.Alert.Kind != trainer.OutcomeOOM {
		t.Fatalf("got a %s alert, want oom", e.Alert.Kind)
	}
	if _, err := h.sup.Stop(r.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeOOM || got.StoppedBy != "alice" || !strings.Contains(got.Detail, "CUDA out of memory") || !strings.Contains(got.Detail, "alice") {
		t.Errorf("got %s by %q (%s), want oom stopped by alice", got.Outcome, got.StoppedBy, got.Detail)
	}
	e := h.waitEvent(trainer.EventEnded, r.ID)
	if e.Retry == nil || e.Retry.Next != "" || !strings.Contains(e.Retry.Refused, "alice") {
		t.Errorf("retry %+v, want none because alice stopped the run", e.Retry)
	}
	if runs, _ := h.st.Runs(context.Background(), history.RunFilter{}); len(runs) != 1 {
		t.Errorf("%d runs, want 1: no retry after a stop", len(runs))
	}
}

func TestOnOOMMustHalveAnIntParameter(t *testing.T) {
	for _, o := range []*trainer.OOMRetry{{Retry: 2, Halve: "lr"}, {Retry: 2, Halve: "nope"}, {Retry: 0, Halve: "batch_size"}, {Retry: 2}} {
		j := batchJob("1", 1)
		j.OnOOM = o
		if err := j.Normalize(); err == nil || !strings.Contains(err.Error(), "on_oom") {
			t.Errorf("on_oom %+v: %v", o, err)
		}
	}
}

// hookRecorder is the store with a hook run when a run is created: Start
// calls it after its own checks and before the run is registered.
type hookRecorder struct {
	*store.Store
	onCreate func(r *trainer.Run)
}

func (h *hookRecorder) CreateRun(ctx context.Context, r *trainer.Run) (int64, error) {
	if h.onCreate != nil {
		h.onCreate(r)
	}
	return h.Store.CreateRun(ctx, r)
}

// waitParked waits until a goroutine running fn is blocked (on a lock, a
// channel or a select) and reports whether one was.
func waitParked(fn string) bool {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, fn) && !strings.Contains(header, "[running]") && !strings.Contains(header, "[runnable]") {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// A shutdown that comes while an on_oom retry is being started must stop
// the retry too, and return; it used to miss the retry and wait for it to
// end by itself (days), even after a second Ctrl-C.
func TestCloseDuringAnOnOOMRetryStopsTheRetry(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{FlushEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &hookRecorder{Store: st}
	one := 1.0
	j := job("fit", childCommand("fitbatch", "{batch_size}", "32", "60000"))
	j.Params = map[string]trainer.ParamSpec{"batch_size": {Type: trainer.ParamInt, Default: "64", HasDefault: true, Min: &one}}
	j.OnOOM = &trainer.OOMRetry{Retry: 2, Halve: "batch_size"}
	sup, err := trainer.New(context.Background(), trainer.Options{Jobs: []*trainer.Job{j}, Recorder: rec, DataDir: dir, DrainTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	rec.onCreate = func(r *trainer.Run) {
		if r.RetryOf == 0 {
			return
		}
		// Shut down while the retry is on its way: past Start's checks,
		// before its run is registered.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			closed <- sup.Close(ctx)
		}()
		if !waitParked("trainer.(*Supervisor).Close(") {
			t.Error("Close never blocked")
		}
	}
	first := (&harness{t: t, sup: sup}).start("fit", nil)
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v, want nil: the retry should have been stopped", err)
		}
	case <-time.After(15 * time.Second):
		for _, a := range sup.Active() {
			syscall.Kill(-a.Run.PID, syscall.SIGKILL)
		}
		<-closed
		t.Fatal("Close did not stop the on_oom retry that started while it ran")
	}
	runs, err := st.Runs(context.Background(), history.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].ID != first.ID {
		t.Fatalf("got %d runs, want the first and its retry", len(runs))
	}
	if r := runs[0]; r.RetryOf != first.ID || r.State != trainer.StateEnded || r.Outcome != trainer.OutcomeStopped || r.StoppedBy != "trainbot shutdown" {
		t.Errorf("retry: %s %s by %q (%s), want ended stopped by trainbot shutdown", r.State, r.Outcome, r.StoppedBy, r.Detail)
	}
}

// A retry that fails allocating the same bytes at the same step is not
// retried again: halving did not touch what fails.
func TestOnOOMStopsWhenHalvingChangesNothing(t *testing.T) {
	j := batchJob("0", 3)
	j.Command = append(j.Command, "0", "fixed")
	h := newHarness(t, j)
	h.start("fit", nil)
	chain := h.endedChain(5)
	if len(chain) != 2 {
		t.Fatalf("%d runs ended, want 2 (64, then 32 failing the same 8 GiB)", len(chain))
	}
	last := chain[1]
	if last.Run.Outcome != trainer.OutcomeOOM || last.Retry.Next != "" ||
		last.Retry.Refused != "halving batch_size did not change the failed allocation (8.00 GiB): not retrying" {
		t.Errorf("last end %s %+v", last.Run.Outcome, last.Retry)
	}
}

// With finished runs of the job behind it, on_oom jumps straight to the
// largest batch the memory fit predicts to fit under the GPU's capacity
// (the CUDA error's total, 7.79 GiB), instead of halving: 64 → 15, not 32.
func TestOnOOMJumpsToTheFittedBatch(t *testing.T) {
	h := newHarness(t, batchJob("16", 2))
	const mib = 1 << 20
	for _, bs := range []int64{4, 8} {
		peak := 1024*mib + bs*400*mib
		_, err := h.st.CreateRun(context.Background(), &trainer.Run{Job: "fit", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished,
			Params: map[string]string{"batch_size": strconv.FormatInt(bs, 10), "lr": "0.1"}, StartedAt: time.Now().Add(-time.Hour),
			EndedAt: time.Now().Add(-time.Hour + time.Minute), PeakGPUMem: &peak})
		if err != nil {
			t.Fatal(err)
		}
	}
	h.start("fit", nil)
	chain := h.endedChain(5)
	if len(chain) != 2 {
		for _, e := range chain {
			t.Logf("run %d batch_size=%s %s retry %+v fit %+v", e.Run.ID, e.Run.Params["batch_size"], e.Run.Outcome, e.Retry, e.Fit)
		}
		t.Fatalf("%d runs ended, want 2 (64 out of memory, then 15 fits)", len(chain))
	}
	first := chain[0]
	// 90 % of 7.79 GiB is 7179 MiB: (7179 − 1024) / 400 = 15.4.
	if first.Retry == nil || first.Retry.Next != "15" || first.Retry.Fit == nil || first.Fit == nil || first.Fit.MaxFit != 15 {
		t.Fatalf("retry %+v, fit %+v: want a jump to batch_size=15 from the fit", first.Retry, first.Fit)
	}
	if got, want := first.Fit.Advice(), "batch_size=15 should fit: predicted 6.9 GiB of 7.8 GiB, from runs #1 #2"; got != want {
		t.Errorf("advice %q, want %q", got, want)
	}
	if last := chain[1]; last.Run.Params["batch_size"] != "15" || last.Run.Outcome != trainer.OutcomeFinished {
		t.Errorf("retry ran batch_size=%s and ended %s", last.Run.Params["batch_size"], last.Run.Outcome)
	}
}

// The OOM alert of a real run names the user's line of the traceback it
// printed before the error (not the library's frames after it).
func TestOOMAlertNamesTheFailingLine(t *testing.T) {
	script := `cat >&2 <<'TB'
Traceback (most recent call last):
  File "/home/me/proj/train.py", line 28, in <module>
    loss = model(x).sum()
  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1532, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.25 GiB is free. Of the allocated memory 20.12 GiB is allocated by PyTorch, and 1.75 GiB is reserved by PyTorch but unallocated.
TB
exit 1`
	h := newHarness(t, job("tb", []string{"sh", "-c", script}))
	r := h.start("tb", nil)
	e := h.waitEvent(trainer.EventAlert, r.ID)
	if e.Alert.Kind != trainer.OutcomeOOM || e.Alert.OOM == nil {
		t.Fatalf("alert %+v, want an OOM", e.Alert)
	}
	if o := e.Alert.OOM; o.Frame != "train.py:28" || o.Allocated < 20<<30 || o.Allocated > 21<<30 {
		t.Errorf("OOM frame %q allocated %d, want train.py:28 and 20.12 GiB", o.Frame, o.Allocated)
	}
	if !strings.Contains(e.Alert.Text, "(at train.py:28)") || !strings.Contains(e.Alert.Text, "20.12 GiB already allocated by PyTorch") {
		t.Errorf("alert text %q", e.Alert.Text)
	}
	h.wait(r.ID)
}

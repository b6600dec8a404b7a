package trainer_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// resumeScript writes ckpt-STEP.pt (and its .done marker) every 20 steps
// and, unless given --resume CKPT, dies (exit 1) at step dieAt; with it, it
// goes on from the checkpoint's step to 100. dieAgain makes a resumed run
// die at dieAt too.
const resumeScript = `import sys, os, time
start, resumed = 1, None
if "--resume" in sys.argv:
    resumed = sys.argv[sys.argv.index("--resume") + 1]
    start = int(os.path.basename(resumed)[5:-3]) + 1
print("resumed from %s" % resumed, flush=True)
die_at, die_again = int(sys.argv[1]), sys.argv[2] == "1"
for step in range(start, 101):
    print("step=%d loss=%.4f" % (step, 1.0 / step), flush=True)
    if step % 20 == 0 and step < die_at:
        open("ckpt-%d.pt" % step, "w").write("weights")
        open("ckpt-%d.pt.done" % step, "w").close()
    if step == die_at and (resumed is None or die_again):
        print("RuntimeError: NCCL timeout", file=sys.stderr, flush=True)
        sys.exit(1)
    time.sleep(float(os.environ.get("PACE", "0.005")))
`

func resumeJob(t *testing.T, dieAt, dieAgain string) *trainer.Job {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 (CI installs it)")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "train.py")
	if err := os.WriteFile(script, []byte(resumeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	j := job("resumable", []string{py, script, dieAt, dieAgain})
	j.Dir, j.Checkpoint, j.Resume = dir, "ckpt-*.pt", []string{"--resume", "{checkpoint}"}
	j.OnFailure = &trainer.FailureRetry{Retry: 3, Backoff: 50 * time.Millisecond}
	return j
}

// nextStarted waits for the next run to start.
func (h *harness) nextStarted() trainer.Event {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-h.events:
			if e.Kind == trainer.EventStarted {
				return e
			}
		case <-deadline:
			h.t.Fatal("no run started")
		}
	}
}

// ended waits for the EventEnded of run id.
func (h *harness) ended(id int64) trainer.Event {
	h.t.Helper()
	return h.waitEvent(trainer.EventEnded, id)
}

// The acceptance of resume: a script that writes a checkpoint every 20
// steps dies at step 50; on_failure starts it again with --resume
// ckpt-40.pt; it finishes at 100; the chain is one curve from 1 to 100.
func TestOnFailureResumesFromTheNewestCheckpoint(t *testing.T) {
	j := resumeJob(t, "50", "0")
	h := newHarness(t, j)
	r1 := h.start("resumable", nil)
	e := h.ended(r1.ID)
	crashed := time.Now()
	if e.Run.Outcome != trainer.OutcomeFailed || trainer.FailureClass(e.Run) != trainer.FailCrashed || e.Run.Steps != 50 {
		t.Fatalf("run #%d ended %s (%q) at step %d, want a crash at 50", r1.ID, e.Run.Outcome, trainer.FailureClass(e.Run), e.Run.Steps)
	}
	rs := e.Resume
	if rs == nil || !rs.Next || filepath.Base(rs.Checkpoint) != "ckpt-40.pt" || rs.Attempt != 0 || rs.Limit != 3 || rs.Class != trainer.FailCrashed {
		t.Fatalf("resume plan %+v, want the next run from ckpt-40.pt", rs)
	}
	st := h.nextStarted()
	r2 := st.Run
	if r2.ResumedFrom != r1.ID || !slices.Contains(r2.Command, filepath.Join(j.Dir, "ckpt-40.pt")) || !strings.HasPrefix(r2.StartedBy, "on_failure, resume 1/3 of run #") {
		t.Fatalf("resumed run: from %d, command %q, by %q", r2.ResumedFrom, r2.Command, r2.StartedBy)
	}
	var firstPoint time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; {
		if s, err := h.sup.Status(r2.ID); err == nil && s.Progress.Step > 0 {
			firstPoint = time.Since(crashed)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed run printed no step in 20 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("the crash's end recorded to the resumed run's first point: %s (backoff 50ms)", firstPoint.Round(time.Millisecond))
	e2 := h.ended(r2.ID)
	if e2.Run.Outcome != trainer.OutcomeFinished || e2.Run.Steps != 100 {
		t.Fatalf("resumed run ended %s at step %d (%s)", e2.Run.Outcome, e2.Run.Steps, e2.Run.Detail)
	}
	if e2.Resume == nil || e2.Resume.Attempt != 1 || e2.Resume.Next {
		t.Errorf("the chain's last report: %+v, want resume 1 of 3 and nothing after", e2.Resume)
	}
	pts, err := h.st.ChainSeries(context.Background(), r2.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 100 {
		t.Fatalf("the chain has %d points, want 100", len(pts))
	}
	for i, p := range pts {
		if p.Step != int64(i+1) {
			t.Fatalf("point %d is step %d: the chain's curve is not continuous", i, p.Step)
		}
	}
	if steps, _, err := h.st.ChainStepValues(context.Background(), r2.ID, "loss", 1, 1<<62); err != nil || len(steps) != 100 || steps[0] != 1 || steps[99] != 100 {
		t.Errorf("the pages' chain: %d steps (%v)", len(steps), err)
	}
	if runs, _ := h.st.Runs(context.Background(), history.RunFilter{Limit: 10}); len(runs) != 2 {
		t.Errorf("%d runs, want the crash and its resume", len(runs))
	}
}

// A resume that dies at the same step without a newer checkpoint ends the
// chain, saying why.
func TestOnFailureStopsWhenAResumeMakesNoProgress(t *testing.T) {
	h := newHarness(t, resumeJob(t, "50", "1"))
	r1 := h.start("resumable", nil)
	if e := h.ended(r1.ID); e.Resume == nil || !e.Resume.Next {
		t.Fatalf("first crash: resume %+v", e.Resume)
	}
	r2 := h.nextStarted().Run
	e := h.ended(r2.ID)
	if e.Resume == nil || e.Resume.Next || !strings.Contains(e.Resume.Refused, "died at step 50 again, with no newer checkpoint than ckpt-40.pt") {
		t.Fatalf("second crash: resume %+v, want the chain ended for no progress", e.Resume)
	}
	select {
	case ev := <-h.events:
		if ev.Kind == trainer.EventStarted {
			t.Fatalf("a third run started: #%d", ev.Run.ID)
		}
	case <-time.After(500 * time.Millisecond):
	}
}

// A reboot (simulated: the run's processes killed with its shim, and the
// boot id file changed) ends the run as host_reboot when the next
// trainbot starts, and on_failure resumes it from its checkpoint.
func TestARunResumesAfterAReboot(t *testing.T) {
	boot := filepath.Join(t.TempDir(), "boot_id")
	os.WriteFile(boot, []byte("11111111-aaaa\n"), 0o600)
	t.Setenv(trainer.EnvBootIDFile, boot)
	j := resumeJob(t, "1000", "0") // it does not die by itself
	j.Env = map[string]string{"PACE": "0.05"}
	h := newHarness(t, j)
	r1 := h.start("resumable", nil)
	h.waitTail(r1.ID, "step=45 ")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sup.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	// The reboot: the shim and the run go, the boot id changes.
	syscall.Kill(r1.Supervisor, syscall.SIGKILL)
	syscall.Kill(-r1.PID, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(-r1.PID, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the run's processes did not die")
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.WriteFile(boot, []byte("22222222-bbbb\n"), 0o600)
	h2 := newHarnessIn(t, h.dir, j)
	e := h2.ended(r1.ID)
	if e.Run.Outcome != trainer.OutcomeHostReboot || e.Run.End == nil || e.Run.End.Reboot == nil || e.Run.End.Reboot.BootIDAtStart != "11111111-aaaa" {
		t.Fatalf("run ended %s (%+v), want host_reboot with both boot ids", e.Run.Outcome, e.Run.End)
	}
	if !strings.Contains(e.Run.Detail, "the host rebooted while the run ran (boot id 11111111 at its start, 22222222 now") {
		t.Errorf("detail %q", e.Run.Detail)
	}
	if e.Resume == nil || !e.Resume.Next || filepath.Base(e.Resume.Checkpoint) != "ckpt-40.pt" {
		t.Fatalf("resume %+v, want one from ckpt-40.pt", e.Resume)
	}
	r2 := h2.nextStarted().Run
	if r2.ResumedFrom != r1.ID {
		t.Fatalf("run #%d resumes %d, want %d", r2.ID, r2.ResumedFrom, r1.ID)
	}
	h2.sup.Stop(r2.ID, "tester")
	h2.ended(r2.ID)
}

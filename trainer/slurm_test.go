package trainer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/slurmtest"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// These tests submit real jobs to ci/slurm-up.sh's single-node cluster (see
// package slurmtest); they skip, saying why, without it.

// slurmWait bounds each wait: jobs of other tests may hold the cluster's CPUs.
const slurmWait = 2 * time.Minute

func slurmJob(name string, argv ...string) *trainer.Job {
	j := job(name, argv)
	j.Runner = trainer.RunnerSlurm
	j.StopGrace = 3 * time.Second
	return j
}

// classicLines prints n classic progress lines, d seconds apart.
func classicLines(n int, d string) string {
	return `for i in $(seq 1 ` + strconv.Itoa(n) + `); do echo "Epoch [1/1], Step [$i/` + strconv.Itoa(n) + `], Loss: 0.$i"; sleep ` + d + `; done`
}

// waitSlurmEnd waits for the run's end and returns its stored record.
func (h *harness) waitSlurmEnd(id int64) *trainer.Run {
	h.t.Helper()
	return h.waitUpTo(id, slurmWait)
}

// waitStatus polls the run's status until ok says so.
func (h *harness) waitStatus(id int64, what string, ok func(trainer.Status) bool) trainer.Status {
	h.t.Helper()
	deadline := time.Now().Add(slurmWait)
	for {
		st, err := h.sup.Status(id)
		if err != nil {
			h.t.Fatalf("status of run %d while waiting for %s: %v", id, what, err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %d: not %s after %v: %+v", id, what, slurmWait, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cancelOnCleanup(t *testing.T, r *trainer.Run) {
	t.Cleanup(func() {
		if r.SlurmJobID != "" {
			_ = slurm.Cancel(context.Background(), r.SlurmJobID, "", false)
		}
	})
}

func TestSlurmRunFinishesWithItsPoints(t *testing.T) {
	slurmtest.Require(t)
	h := newHarness(t, slurmJob("sl", "sh", "-c", classicLines(20, "0.02")))
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	if r.Runner != trainer.RunnerSlurm || r.SlurmJobID == "" {
		t.Fatalf("got runner %q job %q, want a Slurm job", r.Runner, r.SlurmJobID)
	}
	// A second start of the job is refused while the first runs in Slurm.
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "sl"}); !errors.Is(err, trainer.ErrBusy) {
		t.Errorf("second start: got %v, want busy", err)
	}
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeFinished || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("got %s (%s) exit %v, want finished with exit 0", end.Outcome, end.Detail, end.ExitCode)
	}
	if end.Steps != 20 || end.Node == "" {
		t.Errorf("got steps %d node %q, want 20 and the node", end.Steps, end.Node)
	}
	// Classified like a local run's exit, with the job as Slurm told it.
	if f := end.End; f.Why != trainer.WhyExit || f.Slurm == nil || f.Slurm.JobID != r.SlurmJobID || f.Slurm.State != "COMPLETED" || f.Slurm.Node != end.Node {
		t.Errorf("facts %+v (slurm %+v), want exit with job %s COMPLETED on %s", f, f.Slurm, r.SlurmJobID, end.Node)
	}
	pts, err := h.st.Series(context.Background(), r.ID, "loss")
	if err != nil || len(pts) != 20 {
		t.Errorf("got %d loss points (%v), want 20", len(pts), err)
	}
	j, err := slurm.Query(context.Background(), r.SlurmJobID)
	if err != nil || j.State != "COMPLETED" {
		t.Errorf("scontrol: %+v, %v; want COMPLETED", j, err)
	}
	// The lock is free again.
	r2 := h.start("sl", nil)
	cancelOnCleanup(t, r2)
	h.sup.Stop(r2.ID, "tester")
	h.waitSlurmEnd(r2.ID)
}

func TestSlurmStopReachesTheTrainingProcess(t *testing.T) {
	slurmtest.Require(t)
	h := newHarness(t, slurmJob("sl", "sh", "-c", `trap 'echo "got INT"; exit 7' INT; echo ready; while :; do sleep 0.1; done`))
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	h.waitStatus(r.ID, "running", func(st trainer.Status) bool { return st.Run.Node != "" && st.Waiting == "" })
	h.waitTail(r.ID, "ready")
	if _, err := h.sup.Stop(r.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeStopped || end.StoppedBy != "alice" || !strings.Contains(end.Detail, "stopped by alice (exit status 7)") {
		t.Errorf("got %s by %q: %s; want stopped by alice, exit status 7", end.Outcome, end.StoppedBy, end.Detail)
	}
	if data, _ := os.ReadFile(end.LogPath); !strings.Contains(string(data), "got INT") {
		t.Errorf("log %q: want the trap's line", data)
	}
	if out, _ := exec.Command("squeue", "-h", "-j", r.SlurmJobID).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("squeue still lists job %s: %s", r.SlurmJobID, out)
	}
}

// A command that ignores SIGINT is cancelled by Slurm after stop_grace.
func TestSlurmStopCancelsAfterTheGrace(t *testing.T) {
	slurmtest.Require(t)
	j := slurmJob("sl", "sh", "-c", `trap '' INT; echo ready; while :; do sleep 0.1; done`)
	j.StopGrace = time.Second
	h := newHarness(t, j)
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	h.waitTail(r.ID, "ready")
	h.sup.Stop(r.ID, "alice")
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeStopped || end.Detail != "stopped by alice (Slurm job cancelled)" {
		t.Errorf("got %s: %s; want stopped, Slurm job cancelled", end.Outcome, end.Detail)
	}
	if f := end.End; f.Why != trainer.WhyStopped || f.StopHow != trainer.StopSlurmCancel || f.StoppedBy != "alice" || f.Slurm == nil || f.Slurm.State != "CANCELLED" {
		t.Errorf("facts %+v (slurm %+v), want stopped by alice with Slurm's cancel", f, f.Slurm)
	}
}

func TestSlurmExit3Fails(t *testing.T) {
	slurmtest.Require(t)
	h := newHarness(t, slurmJob("sl", "sh", "-c", "echo 'Traceback: boom' >&2; exit 3"))
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeFailed || end.ExitCode == nil || *end.ExitCode != 3 {
		t.Errorf("got %s (%s) exit %v, want failed with exit code 3", end.Outcome, end.Detail, end.ExitCode)
	}
	if f := end.End; f.Why != trainer.WhyExit || derefOr(f.ExitCode, -1) != 3 || f.Slurm == nil || f.Slurm.State != "FAILED" {
		t.Errorf("facts %+v (slurm %+v), want exit 3, Slurm's FAILED", f, f.Slurm)
	}
}

func TestSlurmCancelledOutsideTrainbot(t *testing.T) {
	slurmtest.Require(t)
	h := newHarness(t, slurmJob("sl", "sh", "-c", "echo ready; sleep 600"))
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	h.waitTail(r.ID, "ready")
	if out, err := exec.Command("scancel", r.SlurmJobID).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeStopped || end.Detail != "cancelled outside trainbot" || end.StoppedBy != "" {
		t.Errorf("got %s by %q: %q; want stopped, \"cancelled outside trainbot\"", end.Outcome, end.StoppedBy, end.Detail)
	}
	if f := end.End; f.Why != trainer.WhySlurm || f.Slurm == nil || f.Slurm.JobID != r.SlurmJobID || f.Slurm.State != "CANCELLED" || f.StoppedBy != "" {
		t.Errorf("facts %+v (slurm %+v), want Slurm's state CANCELLED", f, f.Slurm)
	}
}

func TestSlurmPendingRunIsQueued(t *testing.T) {
	slurmtest.Require(t)
	j := slurmJob("sl", "true")
	j.Slurm.ExtraArgs = []string{"--begin=now+1hour"}
	h := newHarness(t, j)
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	st := h.waitStatus(r.ID, "queued", func(st trainer.Status) bool { return st.Waiting != "" })
	want := "queued in Slurm (job " + r.SlurmJobID + ", reason: BeginTime, partition "
	if !strings.HasPrefix(st.Waiting, want) || !strings.HasPrefix(st.Brief(), want) {
		t.Errorf("got %q (brief %q), want %q…", st.Waiting, st.Brief(), want)
	}
	h.sup.Stop(r.ID, "alice")
	end := h.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeStopped || end.StoppedBy != "alice" {
		t.Errorf("got %s by %q (%s), want stopped by alice", end.Outcome, end.StoppedBy, end.Detail)
	}
}

// A trainbot that leaves (Detach) and the next one that re-attaches: every
// point once, the end recorded, the lock taken again.
func TestSlurmRunReattaches(t *testing.T) {
	slurmtest.Require(t)
	dir := t.TempDir()
	j := slurmJob("sl", "sh", "-c", classicLines(40, "0.1"))
	h := newHarnessIn(t, dir, j)
	r := h.start("sl", nil)
	cancelOnCleanup(t, r)
	h.waitTail(r.ID, "Step [5/40]")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sup.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := newHarnessIn(t, dir, slurmJob("sl", "sh", "-c", classicLines(40, "0.1")))
	e := h2.waitEvent(trainer.EventAttached, r.ID)
	if e.Run.SlurmJobID != r.SlurmJobID {
		t.Errorf("attached run has Slurm job %q, want %q", e.Run.SlurmJobID, r.SlurmJobID)
	}
	if _, err := h2.sup.Start(context.Background(), trainer.StartRequest{Job: "sl"}); !errors.Is(err, trainer.ErrBusy) {
		t.Errorf("start during the re-attached run: got %v, want busy", err)
	}
	end := h2.waitSlurmEnd(r.ID)
	if end.Outcome != trainer.OutcomeFinished {
		t.Fatalf("got %s (%s), want finished", end.Outcome, end.Detail)
	}
	pts, err := h2.st.Series(context.Background(), r.ID, "loss")
	if err != nil || len(pts) != 40 {
		t.Errorf("got %d loss points (%v), want 40, each once", len(pts), err)
	}
}

// BenchmarkSlurmFirstMetric is the time from Start of a Slurm run to its
// first metric in trainbot (first-metric-ms/op) and to trainbot knowing it
// RUNNING on its node (running-ms/op), next to the baseline measured in the
// same run: a plain `sbatch --wrap` of the same command, until its first
// line is in its output file (sbatch-first-line-ms/op). bench/slurm.sh runs
// it and prints the ratio.
func BenchmarkSlurmFirstMetric(b *testing.B) {
	slurmtest.Require(b)
	const cmd = `echo "step=1 loss=1.0"; sleep 30`
	var first, running, base time.Duration
	for i := 0; i < b.N; i++ {
		// The baseline: Slurm alone, on an idle cluster as trainbot's.
		waitIdleCluster(b)
		dir := b.TempDir()
		out := filepath.Join(dir, "plain.out")
		t0 := time.Now()
		id, err := exec.Command("sbatch", "--parsable", "--output="+out, "--wrap", cmd).Output()
		if err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(slurmWait); ; {
			if data, _ := os.ReadFile(out); strings.Contains(string(data), "loss") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the plain job never printed")
			}
			time.Sleep(2 * time.Millisecond)
		}
		base += time.Since(t0)
		exec.Command("scancel", strings.TrimSpace(string(id))).Run()

		waitIdleCluster(b)
		h := newBenchHarnessJob(b, b.TempDir(), &trainer.Job{Name: "sl", Command: []string{"sh", "-c", cmd}, Runner: trainer.RunnerSlurm})
		t0 = time.Now()
		r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "sl"})
		if err != nil {
			b.Fatal(err)
		}
		var gotFirst, gotRunning time.Duration
		for deadline := time.Now().Add(slurmWait); gotFirst == 0 || gotRunning == 0; {
			st, err := h.sup.Status(r.ID)
			if err != nil {
				b.Fatal(err)
			}
			if gotFirst == 0 && len(st.Last) > 0 {
				gotFirst = time.Since(t0)
			}
			if gotRunning == 0 && st.Run.Node != "" && st.Waiting == "" {
				gotRunning = time.Since(t0)
			}
			if time.Now().After(deadline) {
				b.Fatalf("run %d: no first metric or not running: %+v", r.ID, st)
			}
			time.Sleep(2 * time.Millisecond)
		}
		first += gotFirst
		running += gotRunning
		h.sup.Stop(r.ID, "bench")
		h.sup.WaitRun(context.Background(), r.ID)
		h.close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Milliseconds())/n, "first-metric-ms/op")
	b.ReportMetric(float64(running.Milliseconds())/n, "running-ms/op")
	b.ReportMetric(float64(base.Milliseconds())/n, "sbatch-first-line-ms/op")
}

// waitIdleCluster waits (up to a minute) until squeue lists no job; the
// benchmark fails then.
func waitIdleCluster(b *testing.B) {
	b.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, err = exec.Command("squeue", "-h").Output(); err == nil && strings.TrimSpace(string(out)) == "" {
			return
		}
	}
	b.Fatalf("the cluster is not idle after a minute: squeue: %v\n%s", err, out)
}

// BenchmarkSlurmWatchCost counts the calls to Slurm's commands that
// watching one running Slurm run makes per minute (calls/min), over 30 s of
// a run that prints a metric line every 100 ms.
func BenchmarkSlurmWatchCost(b *testing.B) {
	slurmtest.Require(b)
	const watch = 30 * time.Second
	var perMin float64
	for i := 0; i < b.N; i++ {
		h := newBenchHarnessJob(b, b.TempDir(), &trainer.Job{Name: "sl", Runner: trainer.RunnerSlurm,
			Command: []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo "step=$i loss=1.0"; sleep 0.1; done`}})
		r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "sl"})
		if err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(slurmWait); ; {
			if st, err := h.sup.Status(r.ID); err == nil && st.Run.Node != "" && st.Waiting == "" {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the run never ran")
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := trainer.SlurmCalls.Load()
		time.Sleep(watch)
		perMin += float64(trainer.SlurmCalls.Load()-before) / watch.Minutes()
		h.sup.Stop(r.ID, "bench")
		h.sup.WaitRun(context.Background(), r.ID)
		h.close()
	}
	b.ReportMetric(perMin/float64(b.N), "calls/min")
}

func derefOr(p *int, or int) int {
	if p == nil {
		return or
	}
	return *p
}

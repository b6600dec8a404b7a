package trainer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A Slurm job that ends PREEMPTED (its recorded scontrol state) is
// preempted, a class on_failure resumes by default: the plan takes the
// newest complete checkpoint, and the resubmitted job's command gets the
// resume arguments (Slurm runs are resubmitted by sbatch, not requeued).
func TestAPreemptedSlurmRunIsResumed(t *testing.T) {
	r := fixtureRunner(t, "scontrol-preempted.txt")
	end, _, _ := r.poll(time.Now())
	if end == nil || end.outcome != OutcomePreempted {
		t.Fatalf("end %+v, want preempted", end)
	}
	dir := t.TempDir()
	for _, f := range []string{"ckpt-20.pt", "ckpt-20.pt.done", "ckpt-40.pt", "ckpt-40.pt.done", "ckpt-60.pt"} { // 60: still being written
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "ckpt-20.pt"), old, old)
	j := &Job{Name: "s", Command: []string{"python3", "train.py"}, Runner: RunnerSlurm, Dir: dir, Checkpoint: "ckpt-*.pt",
		Resume: []string{"--resume", "{checkpoint}"}, OnFailure: &FailureRetry{Retry: 2}}
	if err := j.Normalize(); err != nil {
		t.Fatal(err)
	}
	run := &Run{Job: "s", Outcome: end.outcome, End: end.facts, Steps: 60}
	a := &active{job: j, sup: &Supervisor{}, run: run}
	if c := FailureClass(run); c != FailPreempted {
		t.Fatalf("class %q", c)
	}
	rs := a.resumePlan(run, time.Now())
	if rs == nil || !rs.Next || rs.Checkpoint != filepath.Join(dir, "ckpt-40.pt") || rs.After != DefaultFailureBackoff {
		t.Fatalf("plan %+v, want a resume from ckpt-40.pt (60 is not complete) after the default backoff", rs)
	}
	argv, _ := j.Argv(nil)
	if got := j.withCheckpoint(argv, nil, rs.Checkpoint); !slices.Equal(got, []string{"python3", "train.py", "--resume", filepath.Join(dir, "ckpt-40.pt")}) {
		t.Errorf("resubmitted command %q", got)
	}
	// A start over: no checkpoint, no resume arguments.
	if got := j.withCheckpoint(argv, nil, ""); !slices.Equal(got, []string{"python3", "train.py"}) {
		t.Errorf("started over: %q", got)
	}
	j.OnFailure.RequireCheckpoint = true
	j.Checkpoint = "none-*.pt"
	if rs := a.resumePlan(run, time.Now()); rs == nil || rs.Next || rs.Refused == "" {
		t.Errorf("require_checkpoint without one: %+v", rs)
	}
}

// on_failure's keys are checked, each error naming its key.
func TestOnFailureIsChecked(t *testing.T) {
	for _, c := range []struct {
		j    Job
		want string
	}{
		{Job{OnFailure: &FailureRetry{Retry: 0}, Checkpoint: "c/*", Resume: []string{"{checkpoint}"}}, "on_failure.retry: want 1..100, got 0"},
		{Job{OnFailure: &FailureRetry{Retry: 1, When: []string{"crash"}}}, `on_failure.when: "crash": want some of crashed, preempted`},
		{Job{OnFailure: &FailureRetry{Retry: 1}, Resume: []string{"--resume", "{checkpoint}"}}, "checkpoint: on_failure with resume arguments"},
		{Job{OnFailure: &FailureRetry{Retry: 1}, Checkpoint: "c/*"}, "resume: say how the script is given its checkpoint"},
		{Job{Resume: []string{"x"}}, "resume: resume arguments need on_failure"},
	} {
		c.j.Name, c.j.Command = "j", []string{"python3"}
		err := c.j.Normalize()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.j.OnFailure, err, c.want)
		}
	}
}

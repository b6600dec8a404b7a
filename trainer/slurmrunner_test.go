package trainer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/slurm"
)

// fixtureRunner is a slurmRunner whose scontrol answers with a recorded
// `scontrol show job -o` line (trainer/slurm/testdata): the states a
// single-node cluster without cgroups cannot produce.
func fixtureRunner(t *testing.T, fixture string) *slurmRunner {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("slurm", "testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	j, err := slurm.ParseScontrol(string(data))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &slurmRunner{id: j.ID, runDir: dir, logPath: filepath.Join(dir, "output.log"), grace: time.Second,
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		query: func(context.Context, string) (slurm.Job, error) { return j, nil }}
}

func TestSlurmEndsFromRecordedStates(t *testing.T) {
	for _, c := range []struct {
		fixture string
		outcome Outcome // "": classified like a local run's exit status
		detail  string  // the record's detail, as before there were facts
		exit    int
		state   string
	}{
		{"scontrol-completed.txt", "", "", 0, "COMPLETED"},
		{"scontrol-failed-exit3.txt", "", "", 3, "FAILED"},
		{"scontrol-out-of-memory.txt", OutcomeOOM, "out of memory (Slurm state OUT_OF_MEMORY on vm)", -1, "OUT_OF_MEMORY"},
		{"scontrol-timeout.txt", OutcomeTimeout, "time limit 00:01:00 reached (Slurm state TIMEOUT)", -1, "TIMEOUT"},
		{"scontrol-node-fail.txt", OutcomeNodeFailure, "node failure (Slurm state NODE_FAIL on vm)", -1, "NODE_FAIL"},
		{"scontrol-preempted.txt", OutcomePreempted, "preempted (Slurm state PREEMPTED on vm)", -1, "PREEMPTED"},
		{"scontrol-boot-fail.txt", OutcomeInterrupted, "Slurm state BOOT_FAIL", -1, "BOOT_FAIL"},
		{"scontrol-deadline.txt", OutcomeInterrupted, "Slurm state DEADLINE", -1, "DEADLINE"},
		{"scontrol-cancelled-running.txt", OutcomeStopped, "cancelled outside trainbot", -1, "CANCELLED"},
	} {
		r := fixtureRunner(t, c.fixture)
		end, _, gone := r.poll(time.Now())
		if end == nil || gone {
			t.Errorf("%s: no end (gone %v)", c.fixture, gone)
			continue
		}
		if end.outcome != c.outcome || end.e.exitCode != c.exit {
			t.Errorf("%s: got %q exit %d; want %q exit %d", c.fixture, end.outcome, end.e.exitCode, c.outcome, c.exit)
		}
		if s := end.slurm; s == nil || s.JobID != r.id || s.State != c.state || s.TimeLimit == "" {
			t.Errorf("%s: the job as Slurm told it: %+v, want job %s in %s", c.fixture, s, r.id, c.state)
		}
		if (end.oom != nil) != (c.outcome == OutcomeOOM) {
			t.Errorf("%s: OOM %+v", c.fixture, end.oom)
		}
		if c.outcome == "" {
			if end.facts != nil {
				t.Errorf("%s: the owner decided %+v, want it classified", c.fixture, end.facts)
			}
			if o, _ := classify(end.e); (c.exit == 0) != (o == OutcomeFinished) {
				t.Errorf("%s: classified %s", c.fixture, o)
			}
			continue
		}
		f := end.facts
		if f == nil || f.Why != WhySlurm || f.Slurm != end.slurm {
			t.Fatalf("%s: facts %+v, want Slurm's state with the job", c.fixture, f)
		}
		if got := f.English(); got != c.detail {
			t.Errorf("%s: detail %q, want %q", c.fixture, got, c.detail)
		}
	}
	// FAILED by a signal: no fixture (a single-node cluster without
	// cgroups does not end a job so).
	r := fixtureRunner(t, "scontrol-failed-exit3.txt")
	j, _ := r.query(context.Background(), r.id)
	j.Signal, j.ExitCode = 11, 0
	r.query = func(context.Context, string) (slurm.Job, error) { return j, nil }
	end, _, _ := r.poll(time.Now())
	if end == nil || end.outcome != OutcomeFailed || end.facts == nil || end.facts.Signal != 11 || end.e.signal != 11 ||
		end.facts.English() != "killed by signal 11 (Slurm state FAILED on vm)" {
		t.Errorf("FAILED by signal 11: %+v", end)
	}
}

// A stop trainbot asked that Slurm's cancel ended is the stop's, with the
// job; one Slurm has forgotten is interrupted, saying what Slurm answered.
func TestSlurmStopAndForgottenFacts(t *testing.T) {
	r := fixtureRunner(t, "scontrol-cancelled-running.txt")
	r.stopRec = &slurmStop{By: "alice", Reason: OutcomeStopped, At: time.Now(), Cancelled: true}
	end, _, _ := r.poll(time.Now())
	if end == nil || end.outcome != OutcomeStopped || end.e.stopBy != "alice" {
		t.Fatalf("got %+v, want stopped by alice", end)
	}
	f := end.facts
	if f == nil || f.Why != WhyStopped || f.StopHow != StopSlurmCancel || f.StoppedBy != "alice" || f.Slurm == nil || f.Slurm.State != "CANCELLED" {
		t.Fatalf("facts %+v, want stopped by alice, Slurm's cancel", f)
	}
	if got, want := f.English(), "stopped by alice (Slurm job cancelled)"; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}

	r = fixtureRunner(t, "scontrol-running.txt")
	r.poll(time.Now())
	r.query = func(_ context.Context, id string) (slurm.Job, error) {
		return slurm.Job{}, fmt.Errorf("%w %s: scontrol: invalid job id; sacct: no such job", slurm.ErrUnknownJob, id)
	}
	var gone bool
	for i := 0; i < slurmUnknownPolls && !gone; i++ {
		r.next = time.Time{}
		_, _, gone = r.poll(time.Now())
	}
	if !gone {
		t.Fatal("a job Slurm no longer knows is not gone")
	}
	f, _ = r.gone()
	if f.Why != WhyInterrupted || f.Interrupted != InterruptSlurmForgot || f.Slurm == nil || f.Slurm.JobID != r.id || f.Slurm.State != "RUNNING" || f.Slurm.Error == "" {
		t.Fatalf("facts %+v (slurm %+v), want slurm_forgot with the job as last seen", f, f.Slurm)
	}
	want := "Slurm no longer knows job " + r.id + " (slurm: unknown job " + r.id + ": scontrol: invalid job id; sacct: no such job): it ended while no trainbot watched it, " +
		"longer ago than the cluster's MinJobAge, on a cluster without accounting; how it ended is unknown"
	if got := f.English(); got != want {
		t.Errorf("detail %q\nwant   %q", got, want)
	}
}

// Slurm states that are not an end are shown by their name, never guessed.
func TestSlurmStatesThatAreNotAnEnd(t *testing.T) {
	for _, c := range []struct{ fixture, waiting string }{
		{"scontrol-pending-resources.txt", "queued in Slurm (job "},
		{"scontrol-completing.txt", "in Slurm state COMPLETING"},
		{"scontrol-requeued-after-node-fail.txt", "queued in Slurm (job 12, reason: BeginTime"}, // requeued: pending again
	} {
		r := fixtureRunner(t, c.fixture)
		end, live, gone := r.poll(time.Now())
		if end != nil || gone {
			t.Errorf("%s: got an end %+v (gone %v)", c.fixture, end, gone)
			continue
		}
		if !strings.HasPrefix(live.waiting, c.waiting) {
			t.Errorf("%s: waiting %q, want %q…", c.fixture, live.waiting, c.waiting)
		}
	}
	r := fixtureRunner(t, "scontrol-running.txt")
	j, _ := r.query(context.Background(), r.id)
	j.State = "SUSPENDED"
	r.query = func(context.Context, string) (slurm.Job, error) { return j, nil }
	if end, live, _ := r.poll(time.Now()); end != nil || !strings.HasPrefix(live.waiting, "in Slurm state SUSPENDED (job ") {
		t.Errorf("suspended: end %+v, waiting %q", end, live.waiting)
	}
	r = fixtureRunner(t, "scontrol-pending-resources.txt")
	_, live, _ := r.poll(time.Now())
	if !strings.Contains(live.waiting, "reason: Resources, partition ") {
		t.Errorf("pending: %q, want the reason and the partition", live.waiting)
	}
}

// A job that ran a minute without its output file appearing here writes it
// where trainbot cannot read it: one warning.
func TestSlurmWarnsOnceWhenTheOutputIsNotShared(t *testing.T) {
	r := fixtureRunner(t, "scontrol-running.txt")
	j, _ := r.query(context.Background(), r.id)
	j.Start = time.Now().Add(-2 * time.Minute)
	r.query = func(context.Context, string) (slurm.Job, error) { return j, nil }
	_, live, _ := r.poll(time.Now())
	if !strings.Contains(live.warn, "has not appeared here") || !strings.Contains(live.warn, "share") {
		t.Fatalf("warn %q", live.warn)
	}
	_, live, _ = r.poll(time.Now().Add(time.Minute))
	if live.warn != "" {
		t.Errorf("warned twice: %q", live.warn)
	}
}

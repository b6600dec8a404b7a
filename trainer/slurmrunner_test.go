package trainer

import (
	"context"
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
		detail  string
		exit    int
	}{
		{"scontrol-completed.txt", "", "", 0},
		{"scontrol-failed-exit3.txt", "", "", 3},
		{"scontrol-out-of-memory.txt", OutcomeOOM, "out of memory (Slurm state OUT_OF_MEMORY", -1},
		{"scontrol-timeout.txt", OutcomeFailed, "time limit", -1},
		{"scontrol-node-fail.txt", OutcomeFailed, "node failure (Slurm state NODE_FAIL", -1},
		{"scontrol-preempted.txt", OutcomeInterrupted, "Slurm state PREEMPTED", -1},
		{"scontrol-boot-fail.txt", OutcomeInterrupted, "Slurm state BOOT_FAIL", -1},
		{"scontrol-deadline.txt", OutcomeInterrupted, "Slurm state DEADLINE", -1},
		{"scontrol-cancelled-running.txt", OutcomeStopped, "cancelled outside trainbot", -1},
	} {
		r := fixtureRunner(t, c.fixture)
		end, _, gone := r.poll(time.Now())
		if end == nil || gone {
			t.Errorf("%s: no end (gone %v)", c.fixture, gone)
			continue
		}
		if end.outcome != c.outcome || !strings.Contains(end.detail, c.detail) || end.e.exitCode != c.exit {
			t.Errorf("%s: got %q %q exit %d; want %q %q… exit %d", c.fixture, end.outcome, end.detail, end.e.exitCode, c.outcome, c.detail, c.exit)
		}
		if (end.oom != nil) != (c.outcome == OutcomeOOM) {
			t.Errorf("%s: OOM %+v", c.fixture, end.oom)
		}
		if c.outcome == "" {
			if o, _ := classify(end.e); (c.exit == 0) != (o == OutcomeFinished) {
				t.Errorf("%s: classified %s", c.fixture, o)
			}
		}
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

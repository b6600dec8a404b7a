package trainer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// The database deleted mid-run, trainbot restarted, a second job started:
// the new run gets an id above the first and a directory of its own, the
// first run's log holds only its own lines, and the first run is found
// again (restored from its directory, re-attached) with every point and its
// end.
func TestDatabaseLostMidRunNeitherReusesAnIDNorLosesTheRun(t *testing.T) {
	const n = 120
	first := job("first", childCommand("print", strconv.Itoa(n), "25"))
	h := newHarness(t, first, job("second", childCommand("print", "5", "10")))
	r := h.start("first", nil)
	h.waitTail(r.ID, "Step [20/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sup.Detach(ctx); err != nil { // trainbot goes away
		t.Fatal(err)
	}
	h.st.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(h.dir, store.DBName+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	h2 := newHarnessIn(t, h.dir, job("first", childCommand("print", strconv.Itoa(n), "25")), job("second", childCommand("print", "5", "10")))
	h2.waitEvent(trainer.EventAttached, r.ID)
	r2 := h2.start("second", nil)
	if r2.ID <= r.ID {
		t.Fatalf("the second run got id %d, want above the first's %d", r2.ID, r.ID)
	}
	if got := h2.wait(r2.ID); got.Outcome != trainer.OutcomeFinished {
		t.Fatalf("second run: %s (%s)", got.Outcome, got.Detail)
	}
	got := h2.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != n || got.Job != "first" || got.StartedBy != "tester" {
		t.Fatalf("first run: got %s %s by %q at step %d (%s), want finished at step %d", got.Job, got.Outcome, got.StartedBy, got.Steps, got.Detail, n)
	}
	pts, err := h2.st.Series(context.Background(), r.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, p := range pts {
		seen[p.Step]++
	}
	for i := int64(1); i <= n; i++ {
		if seen[i] != 1 {
			t.Errorf("step %d of the first run stored %d times, want once", i, seen[i])
		}
	}
	log, err := os.ReadFile(filepath.Join(trainer.RunDir(h.dir, r.ID), shimctl.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "of second started") || strings.Count(string(log), "[trainbot] run ") != 1 {
		t.Errorf("the first run's log holds another run's lines:\n%s", log)
	}
}

// A run that ended while the database was lost is restored with its
// recorded end and its points, and announced to nobody.
func TestRestoredEndedRunIsReadAgainQuietly(t *testing.T) {
	h := newHarness(t, job("p", childCommand("print", "30")))
	r := h.start("p", nil)
	want := h.wait(r.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.sup.Close(ctx)
	h.st.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(h.dir, store.DBName+suffix))
	}
	h2 := newHarnessIn(t, h.dir, job("p", childCommand("print", "30")))
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := h2.st.Run(context.Background(), r.ID)
		if err == nil && got.State == trainer.StateEnded {
			if got.Outcome != want.Outcome || got.Detail != want.Detail || !got.EndedAt.Equal(want.EndedAt) || got.Steps != 30 {
				t.Fatalf("restored: %s %q ended %s step %d, want %s %q ended %s step 30", got.Outcome, got.Detail, got.EndedAt, got.Steps, want.Outcome, want.Detail, want.EndedAt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d was not restored: %v %+v", r.ID, err, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pts, _ := h2.st.Series(context.Background(), r.ID, "loss"); len(pts) != 30 {
		t.Errorf("got %d points of the restored run, want 30", len(pts))
	}
	select {
	case e := <-h2.events:
		t.Errorf("a restored run that had ended was announced: %s", e.Kind)
	default:
	}
	if r2 := h2.start("p", nil); r2.ID <= r.ID {
		t.Errorf("next run got id %d, want above %d", r2.ID, r.ID)
	} else {
		h2.wait(r2.ID)
	}
}

// A start whose run directory exists refuses it, and the next start takes
// an id above it.
func TestExistingRunDirectoryIsNeverShared(t *testing.T) {
	h := newHarness(t, job("p", childCommand("print", "3")))
	// Another trainbot, with another database, took run 1's directory
	// after this one started.
	taken := trainer.RunDir(h.dir, 1)
	if err := os.MkdirAll(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "p", By: "tester"})
	var se *trainer.StartError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("got %v, want a refusal of the existing directory", err)
	}
	// The refused run is recorded as failed, with the facts of why.
	failed := h.wait(se.Run.ID)
	if f := failed.End; failed.Outcome != trainer.OutcomeFailed || f == nil || f.Why != trainer.WhyNoStart || f.RunDirTaken != taken ||
		failed.Detail != "could not start: "+se.Err.Error() || f.StartError != se.Err.Error() {
		t.Errorf("recorded %s %q with facts %+v, want failed, no_start, the directory %s", failed.Outcome, failed.Detail, f, taken)
	}
	if entries, _ := os.ReadDir(taken); len(entries) != 0 {
		t.Errorf("the existing directory was written: %v", entries)
	}
	r := h.start("p", nil)
	if r.ID <= 1 {
		t.Fatalf("got id %d, want above the taken 1", r.ID)
	}
	if got := h.wait(r.ID); got.Outcome != trainer.OutcomeFinished {
		t.Fatalf("got %s (%s)", got.Outcome, got.Detail)
	}
}

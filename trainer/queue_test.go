package trainer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// The queue survives a restart: entries queued while a run went on start,
// in order, under the next trainbot; an entry whose job is gone is dropped
// with a notice to its chat.
func TestQueueAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	long := job("q", childCommand("print", "40", "50"))
	h := newHarnessIn(t, dir, long)
	r := h.start("q", nil)
	ctx := context.Background()
	for _, note := range []string{"first", "second"} {
		if _, _, err := h.sup.Enqueue(ctx, trainer.StartRequest{Job: "q", By: "ann", Origin: "telegram:1", Note: note}, "telegram:1"); err != nil {
			t.Fatal(err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.sup.Detach(dctx); err != nil {
		t.Fatal(err)
	}
	// A job the next config no longer has.
	if _, err := h.st.AddQueued(ctx, trainer.QueueEntry{Job: "gone", By: "bob", UserID: "telegram:2", Origin: "telegram:2", At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// The next trainbot: the run it re-attaches to goes first, then the
	// queue in order.
	h2 := newHarnessIn(t, dir, job("q", childCommand("print", "5", "10")))
	var started []string
	var dropped string
	deadline := time.After(60 * time.Second)
	for len(started) < 2 || dropped == "" {
		select {
		case e := <-h2.events:
			switch e.Kind {
			case trainer.EventStarted:
				if e.Queued == nil {
					t.Errorf("run %d started, not from the queue", e.Run.ID)
				}
				started = append(started, e.Run.Note)
			case trainer.EventQueue:
				dropped = e.Queue.Text
				if e.Run.Origin != "telegram:2" {
					t.Errorf("the drop notice goes to %q, want the requester's chat", e.Run.Origin)
				}
			}
		case <-deadline:
			t.Fatalf("started %v, dropped %q", started, dropped)
		}
	}
	if strings.Join(started, ",") != "first,second" {
		t.Errorf("started %v, want first then second", started)
	}
	if !strings.Contains(dropped, "job gone is no longer configured") {
		t.Errorf("drop notice %q", dropped)
	}
	first, err := h2.st.Run(ctx, r.ID)
	if err != nil || first.State != trainer.StateEnded {
		t.Errorf("the re-attached run %+v (%v) should have ended before the queue started", first, err)
	}
	if q, _ := h2.sup.Queued(ctx); len(q) != 0 {
		t.Errorf("queue left %+v", q)
	}
}

func TestQueueIsBounded(t *testing.T) {
	j := job("q", childCommand("print", "40", "50"))
	j.MaxQueue = 2
	h := newHarness(t, j)
	h.start("q", nil)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, pos, err := h.sup.Enqueue(ctx, trainer.StartRequest{Job: "q", By: "ann"}, "u"); err != nil || pos != i+1 {
			t.Fatalf("enqueue %d: position %d, %v", i, pos, err)
		}
	}
	if _, _, err := h.sup.Enqueue(ctx, trainer.StartRequest{Job: "q", By: "ann"}, "u"); err == nil || !strings.Contains(err.Error(), "max_queue 2") {
		t.Errorf("third entry: %v, want the queue full", err)
	}
	if _, err := h.sup.CancelQueued(ctx, 1, "someone else", false); err == nil {
		t.Error("a stranger cancelled an entry")
	}
	if _, err := h.sup.CancelQueued(ctx, 1, "u", false); err != nil {
		t.Errorf("the owner could not cancel: %v", err)
	}
}

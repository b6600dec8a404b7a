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
	// The entry is removed once its run has started, after EventStarted.
	for i := 0; ; i++ {
		q, _ := h2.sup.Queued(ctx)
		if len(q) == 0 {
			break
		}
		if i == 100 {
			t.Errorf("queue left %+v", q)
			break
		}
		time.Sleep(20 * time.Millisecond)
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

// An alert rule "loss no_improvement for 20 steps" fires once on a real
// run whose loss stops improving; a rule on a metric the run never prints
// is told once, at the end.
func TestAlertRulesOnARun(t *testing.T) {
	script := `i=0; while [ $i -lt 60 ]; do i=$((i+1)); if [ $i -le 10 ]; then v=$((100-i*5)); else v=50; fi; echo "step $i loss=0.$v"; sleep 0.005; done`
	j := job("r", []string{"/bin/sh", "-c", script})
	j.Alerts = []trainer.AlertRule{{Metric: "val_acc", When: trainer.RuleBelow, Value: 0.5}}
	h := newHarnessWith(t, t.TempDir(), trainer.Options{Alerts: []trainer.AlertRule{{Metric: "loss", When: trainer.RuleNoImprovement, ForSteps: 20, Message: "loss plateaued"}}}, j)
	r := h.start("r", nil)
	end := h.wait(r.ID)
	var fired []string
	for {
		select {
		case e := <-h.events:
			if e.Kind == trainer.EventAlert && e.Alert.Kind == trainer.OutcomeRule {
				fired = append(fired, e.Alert.Text)
			}
			continue
		default:
		}
		break
	}
	if len(fired) != 1 || !strings.HasPrefix(fired[0], "loss plateaued (rule: loss no_improvement for 20 steps): loss is 0.5000; its best was 0.5000 at step 10") {
		t.Errorf("fired %q, want the plateau once", fired)
	}
	if end.Outcome != trainer.OutcomeFinished || !strings.Contains(end.Detail, `alert rule "val_acc below 0.5" watched val_acc, which the run never printed`) {
		t.Errorf("end %s: %s", end.Outcome, end.Detail)
	}
	if u := end.End.UnseenRules; len(u) != 1 || u[0] != (trainer.UnseenRule{Rule: "val_acc below 0.5", Metric: "val_acc"}) {
		t.Errorf("unseen rules %+v, want val_acc's", u)
	}
}

// A reload replaces the jobs for the next starts; a run in progress keeps
// the definition it started with; an invalid set changes nothing.
func TestReconfigure(t *testing.T) {
	h := newHarness(t, job("a", childCommand("print", "20", "50")))
	r := h.start("a", nil)
	if err := h.sup.Reconfigure([]*trainer.Job{{Name: "a b"}}, nil); err == nil {
		t.Fatal("an invalid job was taken")
	}
	if _, err := h.sup.Job("a"); err != nil {
		t.Fatalf("the invalid reload changed the jobs: %v", err)
	}
	if err := h.sup.Reconfigure([]*trainer.Job{job("b", childCommand("print", "1"))}, []trainer.AlertRule{{Metric: "loss", When: trainer.RuleAbove, Value: 9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.Job("a"); err == nil {
		t.Error("job a is still configured")
	}
	if end := h.wait(r.ID); end.Outcome != trainer.OutcomeFinished || end.Steps != 20 {
		t.Errorf("the run of the removed job: %s at %d", end.Outcome, end.Steps)
	}
	r2 := h.start("b", nil)
	if end := h.wait(r2.ID); end.Outcome != trainer.OutcomeFinished {
		t.Errorf("the new job: %s", end.Outcome)
	}
}

package store

import (
	"context"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

func TestEndedRunsAndOutboxPending(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	now := time.Now()
	for _, r := range []*trainer.Run{
		{Job: "mnist", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: now},
		{Job: "mnist", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: now},
		{Job: "mnist", State: trainer.StateEnded, Outcome: trainer.OutcomeOOM, StartedAt: now},
		{Job: "gpt", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: now},
	} {
		if _, err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.EndedRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []history.OutcomeCount{{Job: "mnist", Outcome: string(trainer.OutcomeFinished), Runs: 2}, {Job: "mnist", Outcome: string(trainer.OutcomeOOM), Runs: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("EndedRuns = %v, want %v (the running run not counted)", got, want)
	}

	for i, key := range []string{"a", "b", "c"} {
		id, _, err := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "telegram", Chat: 1, Key: key, Payload: []byte("{}"), NextAt: now})
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			err = s.MarkOutboxSent(ctx, id, now)
		case 1:
			err = s.MarkOutboxFailed(ctx, id, now, "chat not found")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.OutboxPending(ctx); err != nil || n != 1 {
		t.Errorf("OutboxPending = %d, %v; want 1 (one sent, one refused for good)", n, err)
	}
}

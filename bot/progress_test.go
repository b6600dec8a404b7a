package bot

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// fakeRuns is a supervisor whose active runs the test sets.
type fakeRuns struct {
	mu  sync.Mutex
	sts []trainer.Status
}

func (f *fakeRuns) Active() []trainer.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]trainer.Status(nil), f.sts...)
}

func (f *fakeRuns) set(sts ...trainer.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sts = sts
}

type fakeSubs []store.Subscription

func (f fakeSubs) Subscriptions(context.Context) ([]store.Subscription, error) { return f, nil }

func status(id, step, total int64, loss float64) trainer.Status {
	return trainer.Status{
		Run:         &trainer.Run{ID: id, Job: "demo", Origin: "tg:1", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning},
		Progress:    logparse.Progress{Step: step, TotalSteps: total, Epoch: math.NaN()},
		Last:        []trainer.Metric{{Name: "loss", Value: loss}, {Name: "acc", Value: 0.8}},
		StepsPerSec: 12.5, Elapsed: 90 * time.Second, ETA: 2 * time.Minute,
	}
}

func TestProgressText(t *testing.T) {
	st := status(12, 615, 1500, 0.0686)
	gpu, total, peak := int64(7<<30), int64(80<<30), int64(15<<29)
	st.Run.PeakGPUMem = &peak
	got := ProgressText(st, &store.RunMemory{GPUBytes: &gpu, GPUTotal: &total})
	for _, want := range []string{"run #12 · demo · running for 1m30s", "▓▓▓▓░░░░░░ 41%", "step 615/1500", "loss 0.0686", "12.5 steps/s", "ETA 2m", "GPU 7.00 GiB / 80.00 GiB", "peak 7.50 GiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress text lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "acc") {
		t.Errorf("only the loss belongs in the live progress:\n%s", got)
	}
	empty := status(3, 0, 0, 0)
	empty.Last = nil
	if got := ProgressText(empty, nil); !strings.Contains(got, "waiting for the first metric") {
		t.Errorf("before the first metric:\n%s", got)
	}
	end := trainer.Event{Kind: trainer.EventEnded, At: time.Now(), Run: &trainer.Run{ID: 12, Job: "demo", Outcome: trainer.OutcomeFinished,
		Steps: 1500, Total: 1500, StartedAt: time.Now().Add(-time.Minute), EndedAt: time.Now()}}
	if got := FinalProgressText(end); !strings.Contains(got, "✅ run #12 (demo) finished") || !strings.Contains(got, "▓▓▓▓▓▓▓▓▓▓ 100%") {
		t.Errorf("final:\n%s", got)
	}
}

func TestProgressPublisher(t *testing.T) {
	tg := newFakeTransport("tg")
	tg.inPlace = true
	con := newFakeTransport("con")
	runs := &fakeRuns{}
	runs.set(status(1, 10, 100, 0.9))
	subs := fakeSubs{{Transport: "tg", Chat: 2, Subscribed: true}, {Transport: "tg", Chat: 3, Subscribed: false}, {Transport: "con", Chat: 0, Subscribed: true}}
	p := NewProgressPublisher(ProgressOptions{Trainer: runs, Transports: []Transport{tg, con}, Subscriptions: subs, Interval: 20 * time.Millisecond})
	p.Start()

	// The starter's chat (tg:1, it edits in place) and the subscribed ones.
	tg.await(t, "first progress", func() bool { return len(tg.delivered(1)) == 1 && len(tg.delivered(2)) == 1 })
	con.await(t, "progress on the subscribed console", func() bool { return len(con.delivered(0)) == 1 })
	first := tg.attempts()[0].r
	if first.Kind != KindProgress || first.RunID != 1 || len(first.Buttons) == 0 || !strings.Contains(first.Text, "step 10/100") {
		t.Errorf("first progress: %+v", first)
	}
	// Nothing changed: nothing is sent, however many ticks pass.
	runs.set(status(1, 20, 100, 0.5))
	tg.await(t, "second progress", func() bool { return len(tg.delivered(1)) == 2 })
	if got := tg.delivered(3); len(got) != 0 {
		t.Errorf("a muted chat got progress: %q", got)
	}

	p.OnEvent(trainer.Event{Kind: trainer.EventEnded, At: time.Now(), Run: &trainer.Run{ID: 1, Job: "demo", Origin: "tg:1",
		Outcome: trainer.OutcomeStopped, StoppedBy: "ann", Steps: 20, Total: 100, StartedAt: time.Now().Add(-time.Minute), EndedAt: time.Now()}})
	tg.await(t, "final progress", func() bool { return len(tg.delivered(1)) == 3 && len(tg.delivered(2)) == 3 })
	final := tg.delivered(1)[2]
	if !strings.Contains(final, "stopped by ann") || !strings.Contains(final, "20%") {
		t.Errorf("final: %q", final)
	}
	// The run is still listed as active for a moment: no new message for it.
	runs.set(status(1, 21, 100, 0.4))
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(tg.delivered(1)); n != 3 {
		t.Errorf("after the end: %d progress replies, want 3", n)
	}
	if n := len(con.delivered(0)); n != 2 {
		t.Errorf("the console got %d progress lines, want 2 (no final one: the end report says it)", n)
	}
	for _, s := range tg.attempts() {
		if s.r.Kind != KindProgress {
			t.Errorf("sent a %v reply", s.r.Kind)
		}
	}
}

func TestProgressOriginOnlyOnInPlaceTransports(t *testing.T) {
	con := newFakeTransport("con")
	runs := &fakeRuns{}
	st := status(4, 1, 10, 1)
	st.Run.Origin = "con:0"
	runs.set(st)
	p := NewProgressPublisher(ProgressOptions{Trainer: runs, Transports: []Transport{con}, Interval: 10 * time.Millisecond})
	if got := p.targets(st.Run, nil); len(got) != 0 {
		t.Errorf("a console that did not subscribe would get progress lines: %v", got)
	}
	if got := p.targets(st.Run, fakeSubs{{Transport: "con", Chat: 0, Subscribed: true}}); len(got) != 1 {
		t.Errorf("a subscribed console: %v", got)
	}
}

package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// recorder is a Transport that records what it is asked to send and fails
// the first failN sends.
type recorder struct {
	name  string
	mu    sync.Mutex
	sent  []sent
	failN int
}

type sent struct {
	chat int64
	r    Reply
}

var _ Transport = (*recorder)(nil)

func (f *recorder) Name() string                             { return f.name }
func (f *recorder) Run(ctx context.Context, h Handler) error { <-ctx.Done(); return nil }
func (f *recorder) Send(ctx context.Context, chat int64, r Reply) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failN > 0 {
		f.failN--
		return errors.New("transient")
	}
	f.sent = append(f.sent, sent{chat, r})
	return nil
}

func (f *recorder) got() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.sent...)
}

type subsFunc func() []store.Subscription

func (f subsFunc) Subscriptions(context.Context) ([]store.Subscription, error) { return f(), nil }

func TestNotifierRoutesEvents(t *testing.T) {
	con := &recorder{name: "console"}
	tg := &recorder{name: "telegram", failN: 2}
	subs := subsFunc(func() []store.Subscription {
		return []store.Subscription{{Transport: "telegram", Chat: 5, Subscribed: true}, {Transport: "telegram", Chat: 6, Subscribed: false}}
	})
	n := NewNotifier(NotifierOptions{Transports: []Transport{con, tg}, Always: []ChatKey{{"console", 0}}, Subscriptions: subs, RetryPause: time.Millisecond})
	n.Start()
	run := &trainer.Run{ID: 7, Job: "j", Origin: "telegram:9", StartedAt: time.Now().Add(-time.Minute), Outcome: trainer.OutcomeFinished, Steps: 100, Total: 100}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now(), Status: &trainer.Status{Last: []trainer.Metric{{Name: "loss", Value: 0.25}}}})
	n.Push(Reply{Text: "GPU 0 is hot", Kind: KindAlert})
	n.Push(Reply{Text: "report", Kind: KindProgress})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	chats := func(r *recorder, contains string) []int64 {
		var out []int64
		for _, s := range r.got() {
			if strings.Contains(s.r.Text, contains) {
				out = append(out, s.chat)
			}
		}
		return out
	}
	// Started: not back to the starter (telegram:9), to the console and the subscribed chat only.
	if got := chats(tg, "started"); len(got) != 1 || got[0] != 5 {
		t.Errorf("started went to telegram chats %v, want [5]", got)
	}
	if got := chats(con, "started"); len(got) != 1 {
		t.Errorf("started went to console %d times", len(got))
	}
	// Ended is an alert: starter, subscribed and muted chats.
	if got := chats(tg, "finished after 1m"); len(got) != 3 {
		t.Errorf("ended went to telegram chats %v, want 9, 5, 6", got)
	}
	if got := chats(con, "loss 0.2500"); len(got) != 1 {
		t.Errorf("ended report lacks the final loss: %+v", con.got())
	}
	if got := chats(tg, "GPU 0 is hot"); len(got) != 2 {
		t.Errorf("pushed alert went to %v, want 5 and 6", got)
	}
	if got := chats(tg, "report"); len(got) != 1 || got[0] != 5 {
		t.Errorf("progress went to %v, want only the subscribed chat 5", got)
	}
}

// A notice that a transport stopped goes to every chat but that
// transport's, and to the push channels.
func TestNotifierPushExceptSkipsTheTransport(t *testing.T) {
	con := &recorder{name: "console"}
	tg := &recorder{name: "telegram"}
	hook := &recorder{name: "webhook:ops"}
	subs := subsFunc(func() []store.Subscription {
		return []store.Subscription{{Transport: "telegram", Chat: 5, Subscribed: true}}
	})
	n := NewNotifier(NotifierOptions{Transports: []Transport{con, tg}, Always: []ChatKey{{"console", 0}}, Subscriptions: subs,
		Channels: []PushChannel{{Transport: hook}}, RetryPause: time.Millisecond})
	n.Start()
	n.PushExcept(Reply{Text: "telegram stopped", Kind: KindAlert, Alert: AlertTrainbot}, "telegram")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tg.got(); len(got) != 0 {
		t.Errorf("telegram got %+v, want nothing", got)
	}
	if got := con.got(); len(got) != 1 || got[0].r.Text != "telegram stopped" {
		t.Errorf("console got %+v, want the notice", got)
	}
	if got := hook.got(); len(got) != 1 {
		t.Errorf("push channel got %+v, want the notice", got)
	}
}

func TestEndReportNamesTheOutcome(t *testing.T) {
	peak := int64(3 << 30)
	run := &trainer.Run{ID: 3, Job: "j", StartedAt: time.Now().Add(-90 * time.Second), Outcome: trainer.OutcomeOOM,
		Detail: "CUDA out of memory on GPU 0: tried to allocate 2.00 GiB", PeakGPUMem: &peak}
	got := EndReport(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	for _, want := range []string{"💥 run #3 (j) ran out of memory after 1m30s", "peak GPU memory 3.00 GiB", "tried to allocate 2.00 GiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
}

package inbound_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/inbound"
)

// memKV is a KV in memory.
type memKV struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *memKV) Get(_ context.Context, key string) (string, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok, nil
}

func (k *memKV) Set(_ context.Context, key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[key] = value
	return nil
}

var _ inbound.KV = (*memKV)(nil)

func TestSeenSurvivesARestartAndForgetsTheOldest(t *testing.T) {
	ctx := context.Background()
	kv := &memKV{m: map[string]string{}}
	s := inbound.NewSeen(ctx, "wecom", kv, 3)
	for _, id := range []string{"a", "b", "c", "d"} {
		if !s.First(ctx, id) {
			t.Fatalf("%s: got seen, want new", id)
		}
	}
	if s.First(ctx, "d") {
		t.Error("d: got new, want seen")
	}
	again := inbound.NewSeen(ctx, "wecom", kv, 3) // a restart
	if again.First(ctx, "c") || again.First(ctx, "d") {
		t.Error("after a restart: an id seen before got new")
	}
	if !again.First(ctx, "a") {
		t.Error("a: the oldest id is still remembered past the limit")
	}
	for range 2 {
		if !again.First(ctx, "") {
			t.Error("an empty id must always be new")
		}
	}
}

func TestIDsMapBackAfterARestart(t *testing.T) {
	ctx := context.Background()
	kv := &memKV{m: map[string]string{}}
	ids := inbound.NewIDs("feishu", kv)
	n, err := ids.Number(ctx, "oc_abc")
	if err != nil || n <= 0 {
		t.Fatalf("Number: %d, %v", n, err)
	}
	if m, _ := ids.Number(ctx, "oc_abc"); m != n {
		t.Errorf("the number changed: %d, then %d", n, m)
	}
	if ref, ok := inbound.NewIDs("feishu", kv).Ref(ctx, n); !ok || ref != "oc_abc" {
		t.Errorf("after a restart: Ref(%d) = %q, %v", n, ref, ok)
	}
	if _, ok := inbound.NewIDs("feishu", nil).Ref(ctx, n); ok {
		t.Error("an id never seen has no ref")
	}
}

func TestQueueKeepsOrderPerChat(t *testing.T) {
	q := inbound.NewQueue(nil)
	var mu sync.Mutex
	got := map[int64][]int{}
	for i := range 50 {
		chat := int64(i % 3)
		q.Add(chat, func() {
			mu.Lock()
			got[chat] = append(got[chat], i)
			mu.Unlock()
		})
	}
	q.Add(9, func() { panic("boom") }) // a panic is caught
	q.Wait()
	for chat, list := range got {
		for j := 1; j < len(list); j++ {
			if list[j] < list[j-1] {
				t.Fatalf("chat %d: out of order: %v", chat, list)
			}
		}
	}
}

// press is a chat.Press that records its answers.
type press struct {
	mu   sync.Mutex
	got  []string
	done bool
}

func (p *press) Answer(_ context.Context, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, text)
	if p.done {
		return false
	}
	p.done = true
	return true
}

func (p *press) answers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// TestLoopAnswersAPressOnceHandled: a press the handling did not answer
// is answered with nothing after it; one it answered is left as it was.
func TestLoopAnswersAPressOnceHandled(t *testing.T) {
	quiet, refused := &press{}, &press{}
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan struct{}, 2)
	deliver := func(ctx context.Context, m chat.Message) {
		if m.Text == "refused" {
			m.Press.Answer(ctx, "not allowed")
		}
		handled <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		done <- inbound.Loop{Log: slog.New(slog.DiscardHandler), MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Grace: time.Second}.Run(ctx, deliver,
			func(ctx context.Context, hand func(chat.Message)) error {
				hand(chat.Message{Chat: 1, Text: "状态", Press: quiet})
				hand(chat.Message{Chat: 2, Text: "refused", Press: refused})
				<-ctx.Done()
				return nil
			})
	}()
	for range 2 {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatal("the presses were not handled")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := quiet.answers(); !slices.Equal(got, []string{""}) {
		t.Errorf("the unanswered press got %q, want one empty answer", got)
	}
	if got := refused.answers(); len(got) == 0 || got[0] != "not allowed" {
		t.Errorf("the refused press got %q", got)
	}
}

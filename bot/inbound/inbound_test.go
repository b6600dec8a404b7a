package inbound_test

import (
	"context"
	"errors"
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
			func(ctx context.Context, hand func(chat.Message), _ func()) error {
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

// TestLoopTellsTheLink: a session that fails marks the link down with its
// error; one that says Up marks it up; the backoff cap is the link's.
func TestLoopTellsTheLink(t *testing.T) {
	var link chat.LinkState
	if l := link.Link(); !l.Since.IsZero() || l.Connected {
		t.Fatalf("before Receive: %+v, want the zero Link", l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turn := make(chan func() error)
	done := make(chan error, 1)
	loop := inbound.Loop{Log: slog.New(slog.DiscardHandler), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Grace: time.Second, Link: &link}
	go func() {
		done <- loop.Run(ctx, nil, func(ctx context.Context, _ func(chat.Message), _ func()) error {
			select {
			case f := <-turn:
				return f()
			case <-ctx.Done():
				return nil
			}
		})
	}()
	lost := errors.New("connection reset by peer")
	turn <- func() error { link.Up(); return lost }
	// The second session holds on until the first's failure is read.
	reached, release := make(chan struct{}), make(chan struct{})
	turn <- func() error { close(reached); <-release; return nil }
	<-reached
	l := link.Link()
	if l.Connected || !errors.Is(l.Err, lost) || l.Backoff != 5*time.Millisecond || l.Since.IsZero() {
		t.Errorf("after a lost connection: %+v, want down with %v, backoff 5ms", l, lost)
	}
	close(release)
	reached3, release3 := make(chan struct{}), make(chan struct{})
	turn <- func() error { close(reached3); <-release3; link.Up(); <-ctx.Done(); return nil }
	<-reached3
	if l2 := link.Link(); l2.Connected || !l2.Since.Equal(l.Since) || l2.Err == nil || l2.Err.Error() != "connection closed" {
		t.Errorf("after a second failure, %+v: want down since the first (%s), with the second's error", l2, l.Since)
	}
	close(release3)
	for deadline := time.Now().Add(10 * time.Second); !link.Link().Connected; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the link is not up after a session said so: %+v", link.Link())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

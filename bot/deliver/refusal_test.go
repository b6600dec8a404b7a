package deliver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// pacedSender is a fakeSender with limits.
type pacedSender struct {
	*fakeSender
	perChat []chat.Window
}

func (p pacedSender) Pace(int64) (perChat, perSender []chat.Window) { return p.perChat, nil }

var _ chat.Paced = pacedSender{}

func refusal(to chat.ChatKey, who string) Envelope {
	return Envelope{To: to, Refused: who, Reply: chat.Reply{Text: "no, " + who, Kind: chat.KindRefusal}}
}

func answer(to chat.ChatKey, text string) Envelope {
	return Envelope{To: to, Durable: true, Reply: chat.Reply{Text: text}}
}

// settled closes p, so that everything due is delivered, and returns what
// chat to got.
func settled(p *Pipeline, s *fakeSender, to int64) []string {
	p.Close(context.Background())
	return s.delivered(to)
}

func TestRefusalRuleTellsASenderOncePerChatPerWhile(t *testing.T) {
	s := newFakeSender("telegram")
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := start(t, Options{Senders: []chat.Sender{s}, Now: clock})
	for range 40 {
		p.Post(refusal(tg(-5), "999"))
	}
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(-5)) >= 1 }) {
		t.Fatal("the stranger was not told")
	}
	p.Post(refusal(tg(-5), "998")) // another stranger
	p.Post(refusal(tg(-6), "999")) // the same one in another chat
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(-5)) >= 2 && len(s.delivered(-6)) >= 1 }) {
		t.Fatalf("got %q and %q", s.delivered(-5), s.delivered(-6))
	}
	mu.Lock()
	now = now.Add(9 * time.Minute)
	mu.Unlock()
	p.Post(refusal(tg(-5), "999")) // within 10 minutes: not told
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	p.Post(refusal(tg(-5), "999")) // 10 minutes on: told again
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(-5)) >= 3 }) {
		t.Fatalf("got %q", s.delivered(-5))
	}
	if got, want := strings.Join(settled(p, s, -5), ","), "no, 999,no, 998,no, 999"; got != want {
		t.Errorf("chat -5 got %q, want %q", got, want)
	}
	if got := s.delivered(-6); len(got) != 1 {
		t.Errorf("chat -6 got %q", got)
	}
}

// TestRefusalsDoNotShareTheMembersLane: a refusal whose send hangs holds
// back no member's answer, and a refusal is not sent while a member's
// answer waits (its sender is told at the next attempt instead).
func TestRefusalsDoNotShareTheMembersLane(t *testing.T) {
	s := newFakeSender("telegram")
	release := map[string]chan struct{}{"no, 999": make(chan struct{}), "held answer": make(chan struct{})}
	sending := make(chan string, 10)
	s.setSend(func(ctx context.Context, _ int64, r chat.Reply) error {
		sending <- r.Text
		if ch, ok := release[r.Text]; ok {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}})
	p.Post(refusal(tg(-5), "999")) // hangs
	select {
	case <-sending:
	case <-time.After(5 * time.Second):
		t.Fatal("the refusal was not sent")
	}
	p.Post(answer(tg(-5), "answer 1"))
	if !s.await(t, 5*time.Second, func() bool { return slices.Contains(s.delivered(-5), "answer 1") }) {
		t.Fatalf("the member's answer waited for a refusal in flight: %q", s.delivered(-5))
	}
	close(release["no, 999"])
	if !s.await(t, 5*time.Second, func() bool { return slices.Contains(s.delivered(-5), "no, 999") }) {
		t.Fatalf("the refusal was not sent: %q", s.delivered(-5))
	}

	p.Post(answer(tg(-5), "held answer")) // queued (then in flight) until released
	p.Post(refusal(tg(-5), "998"))        // the members' lane is busy: not sent
	p.mu.Lock()
	members, refusals := p.lanes[tg(-5)], p.refusalLanes[tg(-5)]
	p.mu.Unlock()
	if !s.await(t, 5*time.Second, func() bool { return !refusals.waiting() }) {
		t.Fatal("the refusal lane never settled")
	}
	close(release["held answer"])
	if !s.await(t, 5*time.Second, func() bool { return !members.waiting() }) {
		t.Fatal("the held answer was not sent")
	}
	p.Post(refusal(tg(-5), "998")) // told now: the dropped refusal did not count
	got := settled(p, s, -5)
	if want := []string{"answer 1", "no, 999", "held answer", "no, 998"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRefusalsTakeAtMostHalfThePace: with room for 4 messages an hour in a
// chat, refusals take 2 and the members keep the other 2.
func TestRefusalsTakeAtMostHalfThePace(t *testing.T) {
	s := newFakeSender("telegram")
	p := start(t, Options{Senders: []chat.Sender{pacedSender{s, []chat.Window{{N: 4, Per: time.Hour}}}}})
	for i := range 5 {
		p.Post(refusal(tg(-5), fmt.Sprint("stranger ", i)))
	}
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(-5)) >= 2 }) {
		t.Fatalf("got %q", s.delivered(-5))
	}
	p.Post(answer(tg(-5), "answer 1"))
	p.Post(answer(tg(-5), "answer 2"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(-5)) >= 4 }) {
		t.Fatalf("the members' answers waited for the pace refusals took: %q", s.delivered(-5))
	}
	got := settled(p, s, -5)
	refusals := 0
	for _, text := range got {
		if strings.HasPrefix(text, "no, ") {
			refusals++
		}
	}
	if refusals != 2 || !slices.Contains(got, "answer 1") || !slices.Contains(got, "answer 2") {
		t.Errorf("got %q, want 2 refusals and both answers", got)
	}
}

// press is a chat.Press that records its answer.
type press struct {
	mu     sync.Mutex
	text   []string
	accept bool
}

func (p *press) Answer(_ context.Context, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.text = append(p.text, text)
	return p.accept
}

func TestAnswerSendsARefusedPressToThePresser(t *testing.T) {
	s := newFakeSender("telegram")
	p := start(t, Options{Senders: []chat.Sender{s}})
	refuse := chat.HandlerFunc(func(context.Context, chat.Message) chat.Reply {
		return chat.Reply{Text: "not allowed", Kind: chat.KindRefusal}
	})
	m := chat.Message{Transport: "telegram", Chat: -5, User: chat.User{ID: 999}, Text: "停止 1", Callback: true, Group: true}
	toast := &press{accept: true}
	m.Press = toast
	p.Answer(refuse)(context.Background(), m)
	if got := toast.text; !slices.Equal(got, []string{"not allowed"}) {
		t.Errorf("the press got %q", got)
	}
	// A press that can no longer show it: the chat's refusal, by the rule.
	late := &press{}
	m.Press = late
	p.Answer(refuse)(context.Background(), m)
	p.Answer(refuse)(context.Background(), m)
	if got := settled(p, s, -5); !slices.Equal(got, []string{"not allowed"}) {
		t.Errorf("the chat got %q, want one refusal", got)
	}
}

func TestPacerSpare(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := NewPacer([]chat.Window{{N: 3, Per: 3 * time.Second}, {N: 20, Per: time.Minute}}, func() time.Time { return now }, nil)
	if !p.Spare() {
		t.Fatal("an empty pacer has no room to spare")
	}
	p.Count()
	if p.Spare() {
		t.Error("1 of 3 in 3 s taken: no more to spare (max(3/2, 1) = 1)")
	}
	now = now.Add(3 * time.Second)
	if !p.Spare() {
		t.Error("the 3 s window emptied: room to spare")
	}
	for range 9 {
		p.Count()
		now = now.Add(3 * time.Second)
	}
	if p.Spare() {
		t.Error("10 of 20 in a minute taken: no more to spare")
	}
	if err := p.Wait(context.Background()); err != nil { // a member's send still goes at once
		t.Fatal(err)
	}
}

package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/store"
)

// fakeSender records what it is sent; send decides the outcome of each
// attempt.
type fakeSender struct {
	name    string
	uploads bool // its charts go by the upload path

	mu      sync.Mutex
	send    func(ctx context.Context, chat int64, r chat.Reply) error
	got     []attempt
	changed chan struct{}
}

type attempt struct {
	chat int64
	r    chat.Reply
	at   time.Time
	err  error
}

var (
	_ chat.Sender        = (*fakeSender)(nil)
	_ chat.ChartUploader = (*fakeSender)(nil)
)

func newFakeSender(name string) *fakeSender {
	return &fakeSender{name: name, changed: make(chan struct{})}
}

func (f *fakeSender) Name() string        { return f.name }
func (f *fakeSender) UploadsCharts() bool { return f.uploads }

func (f *fakeSender) Send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	f.mu.Lock()
	send := f.send
	f.mu.Unlock()
	var err error
	if send != nil {
		err = send(ctx, to, r)
	}
	f.mu.Lock()
	f.got = append(f.got, attempt{chat: to, r: r, at: time.Now(), err: err})
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if err != nil {
		return skip, err
	}
	return 1, nil
}

func (f *fakeSender) setSend(fn func(ctx context.Context, chat int64, r chat.Reply) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send = fn
}

// delivered returns the texts delivered to a chat, in order.
func (f *fakeSender) delivered(to int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.got {
		if a.chat == to && a.err == nil {
			out = append(out, a.r.Text)
		}
	}
	return out
}

func (f *fakeSender) attempts() []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// await waits until cond holds, for at most d.
func (f *fakeSender) await(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.After(d)
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			return cond()
		}
	}
}

var testPolicy = Policy{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, EphemeralTries: 3, ChartTries: 2, ChartPause: 50 * time.Millisecond}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func start(t *testing.T, o Options) *Pipeline {
	t.Helper()
	if o.Policy == (Policy{}) {
		o.Policy = testPolicy
	}
	p := New(o)
	p.Start()
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func alert(to chat.ChatKey, key, text string) Envelope {
	return Envelope{To: to, Durable: true, Reply: chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertFailed, Key: key}}
}

var tg = func(id int64) chat.ChatKey { return chat.ChatKey{Transport: "telegram", Chat: id} }

func TestDeliversInOrderOnce(t *testing.T) {
	st := openStore(t, t.TempDir())
	s := newFakeSender("telegram")
	p := start(t, Options{Senders: []chat.Sender{s}, Store: st})
	for i := range 3 {
		p.Post(alert(tg(1), fmt.Sprintf("k%d", i), fmt.Sprintf("alert %d", i)))
	}
	p.Post(alert(tg(1), "k1", "alert 1 again")) // the same key: sent once
	p.Post(Envelope{To: tg(1), Durable: true, Reply: chat.Reply{Text: "answer"}})
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) >= 4 }) {
		t.Fatalf("delivered %q", s.delivered(1))
	}
	p.Close(context.Background())
	if got := strings.Join(s.delivered(1), ","); got != "alert 0,alert 1,alert 2,answer" {
		t.Errorf("delivered %s", got)
	}
	pending, _ := st.PendingOutbox(context.Background(), "")
	if len(pending) != 0 {
		t.Errorf("%d items still pending", len(pending))
	}
}

func TestRetryAfterIsHonouredAndOrderKept(t *testing.T) {
	s := newFakeSender("telegram")
	var mu sync.Mutex
	fails := 1
	s.setSend(func(_ context.Context, _ int64, r chat.Reply) error {
		mu.Lock()
		defer mu.Unlock()
		if r.Text == "first" && fails > 0 {
			fails--
			return chat.RetryAfter(300*time.Millisecond, "Telegram answered 429 to sendMessage", errors.New("too many requests"))
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}})
	p.Post(alert(tg(1), "a", "first"))
	p.Post(alert(tg(1), "b", "second"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 2 }) {
		t.Fatalf("delivered %q", s.delivered(1))
	}
	at := s.attempts()
	if got := strings.Join(s.delivered(1), ","); got != "first,second" {
		t.Errorf("delivered %s, want first,second", got)
	}
	if gap := at[1].at.Sub(at[0].at); gap < 300*time.Millisecond {
		t.Errorf("tried again after %s, want ≥ the 300ms retry_after", gap)
	}
}

func TestAlertSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	down := newFakeSender("wecom:lab")
	down.setSend(func(context.Context, int64, chat.Reply) error { return errors.New("connection refused") })
	p := New(Options{Senders: []chat.Sender{down}, Store: st, Policy: testPolicy})
	p.Start()
	p.Post(alert(chat.ChatKey{Transport: "wecom:lab"}, "run:7:ended", "❌ run #7 failed"))
	down.await(t, 5*time.Second, func() bool { return len(down.attempts()) >= 2 })
	p.Close(context.Background())

	up := newFakeSender("wecom:lab")
	p2 := start(t, Options{Senders: []chat.Sender{up}, Store: st})
	if !up.await(t, 5*time.Second, func() bool { return len(up.delivered(0)) == 1 }) {
		t.Fatal("the stored alert was not delivered after the restart")
	}
	p2.Post(alert(chat.ChatKey{Transport: "wecom:lab"}, "run:7:ended", "❌ run #7 failed")) // the outbox knows it
	p2.Close(context.Background())
	if n := len(up.delivered(0)); n != 1 {
		t.Errorf("delivered %d times, want once", n)
	}
}

// failingMarks is a store whose "mark sent" write always fails, as on a
// full disk.
type failingMarks struct {
	*store.Store
	mu    sync.Mutex
	tries int
}

func (f *failingMarks) MarkOutboxSent(context.Context, int64, time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	return errors.New("mark outbox item sent: database or disk is full (13)")
}

// Acceptance: when the outbox cannot record that an alert was sent, the
// alert is sent at most twice — once, and once more after a restart.
func TestAlertIsSentAtMostTwiceWhenMarkSentFails(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	full := &failingMarks{Store: st}
	s := newFakeSender("telegram")
	p := New(Options{Senders: []chat.Sender{s}, Store: full, Policy: testPolicy, RecordRetry: 20 * time.Millisecond})
	p.Start()
	p.Post(alert(tg(1), "run:3:alert:oom", "💥 run #3 hit out-of-memory"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 1 }) {
		t.Fatal("not delivered")
	}
	// The record is tried again and again; the alert is not.
	tries := func() int {
		full.mu.Lock()
		defer full.mu.Unlock()
		return full.tries
	}
	deadline := time.Now().Add(2 * time.Second)
	for tries() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := tries(); n < 5 {
		t.Errorf("the record was tried %d times, want it tried again every RecordRetry", n)
	}
	p.Close(context.Background())
	if n := len(s.attempts()); n != 1 {
		t.Fatalf("sent %d times while the record failed, want once", n)
	}
	// A restart sends it once more (its delivery was never recorded); with
	// the disk back, that is the last time.
	for range 2 {
		p := New(Options{Senders: []chat.Sender{s}, Store: st, Policy: testPolicy})
		p.Start()
		s.await(t, time.Second, func() bool { return len(s.attempts()) >= 2 })
		p.Close(context.Background())
	}
	if n := len(s.attempts()); n != 2 {
		t.Errorf("sent %d times in all, want at most twice", n)
	}
}

// Acceptance: one of two chats takes 2 minutes per send; the other chat's
// alert arrives in less than a second.
func TestSlowChatDelaysNoOtherChat(t *testing.T) {
	s := newFakeSender("telegram")
	release := make(chan struct{})
	s.setSend(func(ctx context.Context, to int64, _ chat.Reply) error {
		if to == 1 {
			select {
			case <-time.After(2 * time.Minute):
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}, Store: openStore(t, t.TempDir())})
	defer close(release)
	p.Post(alert(tg(1), "a", "slow chat's alert"))
	p.Post(alert(tg(1), "b", "slow chat's second alert"))
	begin := time.Now()
	p.Post(alert(tg(2), "a", "fast chat's alert"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(2)) == 1 }) {
		t.Fatal("the other chat's alert did not arrive")
	}
	if d := time.Since(begin); d >= time.Second {
		t.Errorf("the other chat's alert took %s, want < 1s", d)
	}
}

func TestProgressNewestReplacesTheUnsent(t *testing.T) {
	s := newFakeSender("telegram")
	gate, inFlight := make(chan struct{}), make(chan struct{})
	s.setSend(func(ctx context.Context, _ int64, r chat.Reply) error {
		if r.Text == "step 1" {
			close(inFlight)
			<-gate
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}})
	progress := func(text string) Envelope {
		return Envelope{To: tg(1), Reply: chat.Reply{Text: text, Kind: chat.KindProgress, RunID: 4, Key: "run:4:progress"}, Durable: true}
	}
	p.Post(progress("step 1"))
	<-inFlight
	p.Post(progress("step 2"))
	p.Post(progress("step 3"))
	close(gate)
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 2 }) {
		t.Fatalf("delivered %q", s.delivered(1))
	}
	p.Close(context.Background())
	if got := strings.Join(s.delivered(1), ","); got != "step 1,step 3" {
		t.Errorf("delivered %s, want step 1,step 3", got)
	}
}

func TestHeldEnvelopeHoldsBackNothing(t *testing.T) {
	s := newFakeSender("telegram")
	p := start(t, Options{Senders: []chat.Sender{s}})
	held := alert(tg(1), "held", "held")
	held.NotBefore = time.Now().Add(300 * time.Millisecond)
	p.Post(held)
	p.Post(alert(tg(1), "now", "now"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 2 }) {
		t.Fatalf("delivered %q", s.delivered(1))
	}
	at := s.attempts()
	if got := strings.Join(s.delivered(1), ","); got != "now,held" {
		t.Errorf("delivered %s, want now,held", got)
	}
	if at[1].at.Before(held.NotBefore) {
		t.Errorf("the held envelope went out %s before its time", held.NotBefore.Sub(at[1].at))
	}
}

func TestQuietHoursHoldDropAndLetAnswersThrough(t *testing.T) {
	st := openStore(t, t.TempDir())
	s := newFakeSender("wecom:lab")
	lab := chat.ChatKey{Transport: "wecom:lab"}
	q, err := ParseQuietHours("23:00-08:00", chat.SeverityCritical)
	if err != nil {
		t.Fatal(err)
	}
	q.Location = time.UTC
	night := time.Date(2025, 3, 1, 23, 30, 0, 0, time.UTC)
	p := start(t, Options{Senders: []chat.Sender{s}, Store: st, Quiet: map[chat.ChatKey]QuietHours{lab: q}, Now: func() time.Time { return night }})
	p.Post(Envelope{To: lab, Reply: chat.Reply{Text: "progress", Kind: chat.KindProgress, Key: "run:1:progress"}})
	p.Post(Envelope{To: lab, Durable: true, Reply: chat.Reply{Text: "finished", Kind: chat.KindAlert, Alert: chat.AlertFinished, Key: "fin"}})
	p.Post(Envelope{To: lab, Durable: true, Reply: chat.Reply{Text: "oom", Kind: chat.KindAlert, Alert: chat.AlertOOM, Key: "oom"}})
	p.Post(Envelope{To: lab, Durable: true, Reply: chat.Reply{Text: "answer", Kind: chat.KindReply}})
	s.await(t, 5*time.Second, func() bool { return len(s.delivered(0)) >= 3 })
	p.Close(context.Background())
	got := s.delivered(0)
	if slices.Contains(got, "progress") || !slices.Contains(got, "oom") || !slices.Contains(got, "answer") {
		t.Errorf("delivered %q: want the critical alert and the answer, no progress", got)
	}
	// The held one is stored with the end of the quiet hours.
	items, _ := st.OutboxItems(context.Background(), 10)
	for _, it := range items {
		if it.Key == "fin" && !it.NotBefore.Equal(time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC)) {
			t.Errorf("held until %s, want 08:00 the next day", it.NotBefore)
		}
	}
}

// Acceptance (with the fake Bot API in bot/telegram): charts the service
// refuses become one text that says why and how to get them, and hold back
// no later reply.
func TestRefusedChartsBecomeOneTextAndHoldNothingBack(t *testing.T) {
	s := newFakeSender("telegram")
	s.uploads = true
	s.setSend(func(_ context.Context, _ int64, r chat.Reply) error {
		if len(r.Images) > 0 {
			return &chat.SendError{Reason: "Telegram answered 500 to sendMediaGroup", Err: errors.New("internal server error")}
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}, Store: openStore(t, t.TempDir())})
	begin := time.Now()
	p.Post(Envelope{To: tg(1), Durable: true, Reply: chat.Reply{RunID: 12, Images: []chat.Image{
		{Name: "run-12-loss.png", PNG: []byte("png"), Command: "trainbot plot 12 -o run-12-loss.png"},
		{Name: "run-12-memory.png", PNG: []byte("png"), Command: "trainbot plot 12 --kind memory -o run-12-memory.png"}}}})
	p.Post(Envelope{To: tg(1), Durable: true, Reply: chat.Reply{Text: "run #12 · demo · running"}})
	if !s.await(t, 10*time.Second, func() bool { return len(s.delivered(1)) == 2 }) {
		t.Fatalf("delivered %q", s.delivered(1))
	}
	got := s.delivered(1)
	if got[0] != "run #12 · demo · running" {
		t.Errorf("the status answer came after the charts' fallback: %q", got)
	}
	for _, want := range []string{"2 charts not sent: Telegram answered 500 to sendMediaGroup", "trainbot plot 12 -o run-12-loss.png", "trainbot plot 12 --kind memory -o run-12-memory.png"} {
		if !strings.Contains(got[1], want) {
			t.Errorf("fallback %q lacks %q", got[1], want)
		}
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("the fallback took %s", d)
	}
	if n := len(s.attempts()); n != 4 {
		t.Errorf("%d attempts, want 2 uploads and 2 texts", n)
	}
}

func TestPermanentRefusalHoldsNothingBack(t *testing.T) {
	st := openStore(t, t.TempDir())
	s := newFakeSender("telegram")
	s.setSend(func(_ context.Context, _ int64, r chat.Reply) error {
		if r.Text == "bad" {
			return chat.Permanent("Telegram answered 400 to sendMessage", errors.New("chat not found"))
		}
		return nil
	})
	p := start(t, Options{Senders: []chat.Sender{s}, Store: st})
	p.Post(alert(tg(1), "a", "bad"))
	p.Post(alert(tg(1), "b", "good"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 1 }) {
		t.Fatal("the good alert was held back")
	}
	p.Close(context.Background())
	if n := len(s.attempts()); n != 2 {
		t.Errorf("%d attempts, want 2 (a refusal is not tried again)", n)
	}
	items, _ := st.OutboxItems(context.Background(), 10)
	for _, it := range items {
		if it.Key == "a" && (!it.Failed || it.LastError != "Telegram answered 400 to sendMessage") {
			t.Errorf("refused item: %+v", it)
		}
	}
}

func TestCloseLeavesWhatIsNotDueForTheNextStart(t *testing.T) {
	st := openStore(t, t.TempDir())
	s := newFakeSender("telegram")
	s.setSend(func(context.Context, int64, chat.Reply) error { return errors.New("down") })
	p := New(Options{Senders: []chat.Sender{s}, Store: st, Policy: testPolicy})
	p.Start()
	p.Post(alert(tg(1), "a", "a"))
	s.await(t, time.Second, func() bool { return len(s.attempts()) >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p.Post(alert(tg(1), "late", "late")) // after Close: stored, not sent
	pending, _ := st.PendingOutbox(context.Background(), "telegram")
	if len(pending) != 2 {
		t.Errorf("%d pending, want 2", len(pending))
	}
}

// fullStore cannot write anything, as on a full disk.
type fullStore struct{ *store.Store }

func (fullStore) EnqueueOutbox(context.Context, history.OutboxItem) (int64, bool, error) {
	return 0, false, errors.New("enqueue outbox: database or disk is full (13)")
}

func TestAlertThatCannotBeStoredIsDeliveredFromMemory(t *testing.T) {
	s := newFakeSender("telegram")
	p := start(t, Options{Senders: []chat.Sender{s}, Store: fullStore{openStore(t, t.TempDir())}, Logger: slog.New(slog.DiscardHandler)})
	p.Post(alert(tg(1), "disk", "⚠️ disk full"))
	if !s.await(t, 5*time.Second, func() bool { return len(s.delivered(1)) == 1 }) {
		t.Fatal("not delivered")
	}
}

func TestPolicyAttemptsPerHour(t *testing.T) {
	attempts := func(p Policy, span time.Duration) int {
		n, at := 1, time.Duration(0) // the first attempt at once
		for {
			at += p.Decide(n, true, false, errors.New("down")).Wait
			if at > span {
				return n
			}
			n++
		}
	}
	if got := attempts(DefaultPolicy, time.Hour); got != 19 {
		t.Errorf("%d attempts in the first hour, want 19 (as Policy's comment says)", got)
	}
	if v := DefaultPolicy.Decide(20, true, false, errors.New("down")); v.Wait != 5*time.Minute {
		t.Errorf("wait after many failures %s, want the 5 min cap", v.Wait)
	}
	if v := DefaultPolicy.Decide(1, true, false, chat.RetryAfter(time.Hour, "", nil)); v.Wait != time.Hour {
		t.Errorf("a retry_after of 1h waited %s", v.Wait)
	}
	if v := DefaultPolicy.Decide(3, false, false, errors.New("down")); !v.GiveUp {
		t.Error("progress is tried 3 times")
	}
	if v := DefaultPolicy.Decide(1, true, false, chat.Permanent("no", nil)); !v.GiveUp || !v.Permanent {
		t.Error("a permanent refusal is not tried again")
	}
}

func TestPacerWindows(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := NewPacer([]chat.Window{{N: 100, Per: time.Minute}, {N: 5, Per: time.Second}}, func() time.Time { return now },
		func(ctx context.Context, d time.Duration) error {
			now = now.Add(d)
			return nil
		})
	start := now
	var at []time.Duration
	for range 120 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		at = append(at, now.Sub(start))
	}
	for i := range at {
		if i >= 5 && at[i]-at[i-5] < time.Second {
			t.Fatalf("send %d at %s: 6 sends within a second", i, at[i])
		}
		if i >= 100 && at[i]-at[i-100] < time.Minute {
			t.Fatalf("send %d at %s: 101 sends within a minute", i, at[i])
		}
	}
	if at[4] != 0 || at[5] != time.Second || at[100] != time.Minute {
		t.Errorf("sends at %s %s %s, want 0s 1s 1m0s", at[4], at[5], at[100])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled context = %v", err)
	}
}

func TestReplyPayloadRoundTrip(t *testing.T) {
	r := chat.Reply{Text: "t", Kind: chat.KindAlert, Alert: "oom", RunID: 3, Key: "k", ReplyTo: 9,
		Images:  []chat.Image{{Name: "a.png", PNG: []byte{1, 2}, Caption: "c", Command: "trainbot plot 3"}},
		Buttons: [][]chat.Button{{{Label: "L", Data: "D"}}, {{Label: "网页 Open", URL: "https://x/runs/3?t=a.b.c"}}}}
	b, err := encodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(r) {
		t.Errorf("got %+v, want %+v", got, r)
	}
}

// A reload replaces a channel: what is posted after goes through the new
// sender; a removed one's messages are not sent anywhere.
func TestReconfigureReplacesSenders(t *testing.T) {
	st := openStore(t, t.TempDir())
	old := newFakeSender("ops")
	p := start(t, Options{Senders: []chat.Sender{old}, Store: st})
	p.Post(alert(chat.ChatKey{Transport: "ops"}, "k1", "before"))
	if !old.await(t, 5*time.Second, func() bool { return len(old.delivered(0)) == 1 }) {
		t.Fatalf("old channel got %q", old.delivered(0))
	}
	repl := newFakeSender("ops")
	p.Reconfigure([]string{"ops"}, []chat.Sender{repl}, nil)
	p.Post(alert(chat.ChatKey{Transport: "ops"}, "k2", "after"))
	if !repl.await(t, 5*time.Second, func() bool { return len(repl.delivered(0)) == 1 }) {
		t.Fatalf("new channel got %q", repl.delivered(0))
	}
	p.Reconfigure([]string{"ops"}, nil, nil)
	p.Post(alert(chat.ChatKey{Transport: "ops"}, "k3", "gone"))
	time.Sleep(100 * time.Millisecond)
	if len(old.delivered(0)) != 1 || len(repl.delivered(0)) != 1 {
		t.Errorf("after removal: old %q new %q", old.delivered(0), repl.delivered(0))
	}
}

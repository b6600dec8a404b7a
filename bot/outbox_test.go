package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// fakeTransport records what it is sent; send decides the outcome.
type fakeTransport struct {
	name    string
	inPlace bool

	mu   sync.Mutex
	send func(chat int64, r Reply) error
	got  []sentReply
	seen chan struct{} // closed and replaced on every Send
}

type sentReply struct {
	chat int64
	r    Reply
	at   time.Time
	err  error
}

var (
	_ Transport       = (*fakeTransport)(nil)
	_ InPlaceProgress = (*fakeTransport)(nil)
)

func newFakeTransport(name string) *fakeTransport {
	return &fakeTransport{name: name, seen: make(chan struct{})}
}

func (f *fakeTransport) Name() string                             { return f.name }
func (f *fakeTransport) Run(ctx context.Context, _ Handler) error { <-ctx.Done(); return nil }
func (f *fakeTransport) ProgressInPlace() bool                    { return f.inPlace }

func (f *fakeTransport) Send(ctx context.Context, chat int64, r Reply) error {
	f.mu.Lock()
	send := f.send
	f.mu.Unlock()
	var err error
	if send != nil {
		err = send(chat, r)
	}
	f.mu.Lock()
	f.got = append(f.got, sentReply{chat: chat, r: r, at: time.Now(), err: err})
	close(f.seen)
	f.seen = make(chan struct{})
	f.mu.Unlock()
	return err
}

func (f *fakeTransport) setSend(fn func(chat int64, r Reply) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send = fn
}

// delivered returns the texts delivered (without error) to a chat.
func (f *fakeTransport) delivered(chat int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.got {
		if s.chat == chat && s.err == nil {
			out = append(out, s.r.Text)
		}
	}
	return out
}

func (f *fakeTransport) attempts() []sentReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// await waits until cond holds, re-checking after every Send.
func (f *fakeTransport) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ch := f.seen
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; sent: %+v", what, f.attempts())
		}
	}
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newTestOutbox(st *store.Store, ts ...Transport) *Outbox {
	return NewOutbox(OutboxOptions{Store: st, Transports: ts, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
}

func TestOutboxDeliversOnceInOrder(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	tr := newFakeTransport("tg")
	fails := 2
	tr.setSend(func(chat int64, r Reply) error {
		if chat == 1 && fails > 0 {
			fails--
			return errors.New("network down")
		}
		return nil
	})
	o := newTestOutbox(st, tr)
	o.Start()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if added, err := o.Add(ctx, ChatKey{"tg", 1}, Reply{Text: "alert " + k, Kind: KindAlert, Key: k}); err != nil || !added {
			t.Fatalf("add %s: %v %v", k, added, err)
		}
	}
	if added, err := o.Add(ctx, ChatKey{"tg", 1}, Reply{Text: "alert a again", Kind: KindAlert, Key: "a"}); err != nil || added {
		t.Errorf("a second reply with the same key: added %v, err %v", added, err)
	}
	if _, err := o.Add(ctx, ChatKey{"tg", 2}, Reply{Text: "other chat", Kind: KindAlert, Key: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(ctx, ChatKey{"nope", 2}, Reply{Text: "x"}); err == nil {
		t.Error("a reply for an unknown transport should be refused")
	}
	tr.await(t, "three alerts", func() bool { return len(tr.delivered(1)) == 3 })
	if got := strings.Join(tr.delivered(1), "|"); got != "alert a|alert b|alert c" {
		t.Errorf("chat 1 got %q", got)
	}
	if got := tr.delivered(2); len(got) != 1 {
		t.Errorf("chat 2 got %q", got)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := st.PendingOutbox(ctx, "")
	if err != nil || len(pending) != 0 {
		t.Errorf("pending after delivery: %v %v", pending, err)
	}
	if n := len(tr.attempts()); n != 6 {
		t.Errorf("got %d attempts, want 6 (2 failures, 4 deliveries)", n)
	}
}

type waitErr struct{ d time.Duration }

func (w waitErr) Error() string             { return fmt.Sprintf("flood control: retry after %s", w.d) }
func (w waitErr) RetryAfter() time.Duration { return w.d }

func TestOutboxHonoursRetryAfter(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	tr := newFakeTransport("tg")
	first := true
	tr.setSend(func(int64, Reply) error {
		if first {
			first = false
			return fmt.Errorf("send: %w", waitErr{300 * time.Millisecond})
		}
		return nil
	})
	o := newTestOutbox(st, tr)
	o.Start()
	defer o.Close(context.Background())
	if _, err := o.Add(context.Background(), ChatKey{"tg", 5}, Reply{Text: "oom", Kind: KindAlert, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	tr.await(t, "delivery", func() bool { return len(tr.delivered(5)) == 1 })
	a := tr.attempts()
	if len(a) != 2 {
		t.Fatalf("attempts: %+v", a)
	}
	if gap := a[1].at.Sub(a[0].at); gap < 300*time.Millisecond {
		t.Errorf("tried again after %v, before the 300ms asked for", gap)
	}
}

func TestOutboxSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	down := newFakeTransport("tg")
	down.setSend(func(int64, Reply) error { return errors.New("telegram unreachable") })
	o := newTestOutbox(st, down)
	o.Start()
	ctx := context.Background()
	if _, err := o.Add(ctx, ChatKey{"tg", 7}, Reply{Text: "💥 run #3 hit out-of-memory", Kind: KindAlert, Key: "run:3:alert"}); err != nil {
		t.Fatal(err)
	}
	down.await(t, "a failed attempt", func() bool { return len(down.attempts()) >= 1 })
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openStore(t, dir)
	defer st2.Close()
	up := newFakeTransport("tg")
	o2 := newTestOutbox(st2, up)
	o2.Start()
	defer o2.Close(ctx)
	up.await(t, "delivery after the restart", func() bool { return len(up.delivered(7)) == 1 })
	if got := up.delivered(7)[0]; got != "💥 run #3 hit out-of-memory" {
		t.Errorf("got %q", got)
	}
	// The same alert raised again (same key) is not sent twice.
	if added, _ := o2.Add(ctx, ChatKey{"tg", 7}, Reply{Text: "again", Kind: KindAlert, Key: "run:3:alert"}); added {
		t.Error("a delivered key was stored again")
	}
}

func TestNotifierSendsAlertsThroughTheOutbox(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ctx := context.Background()
	if err := st.SetSubscribed(ctx, "tg", 9, false); err != nil { // muted chats still get alerts
		t.Fatal(err)
	}
	tr := newFakeTransport("tg")
	o := newTestOutbox(st, tr)
	o.Start()
	n := NewNotifier(NotifierOptions{Transports: []Transport{tr}, Subscriptions: st, Outbox: o})
	n.Start()
	n.Push(Reply{Text: "GPU 0 is at 98°C", Kind: KindAlert, Key: "gpu:0:hot"})
	n.Push(Reply{Text: "GPU 0 is at 98°C", Kind: KindAlert, Key: "gpu:0:hot"})
	n.Push(Reply{Text: "weekly report", Kind: KindNotice})
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tr.await(t, "the alert", func() bool { return len(tr.delivered(9)) == 1 })
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	items, err := st.OutboxItems(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Key != "gpu:0:hot" || items[0].SentAt.IsZero() {
		t.Errorf("outbox: %+v", items)
	}
	if got := tr.delivered(9); len(got) != 1 || got[0] != "GPU 0 is at 98°C" {
		t.Errorf("delivered %q (a muted chat gets alerts, not notices)", got)
	}
}

func TestReplyPayloadRoundTrip(t *testing.T) {
	r := Reply{Text: "t", Images: []Image{{Name: "a.png", PNG: []byte{1, 2, 3}, Caption: "c"}},
		Buttons: [][]Button{{{Label: "停止 Stop", Data: "停止"}}}, Kind: KindAlert, RunID: 4, Key: "k"}
	b, err := encodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", r) {
		t.Errorf("got %+v, want %+v", got, r)
	}
}

// TestAlertsQueuedAtAShutdownThatTimesOutReachSubscribers: when Close's
// time runs out while the notifier is busy (drawing an end report's
// charts), the alerts still queued are stored for every chat that should
// get them, the subscribed ones included.
func TestAlertsQueuedAtAShutdownThatTimesOutReachSubscribers(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ctx := context.Background()
	if err := st.SetSubscribed(ctx, "tg", 5, true); err != nil {
		t.Fatal(err)
	}
	tr := newFakeTransport("tg")
	o := newTestOutbox(st, tr) // not started: what is stored stays pending
	drawing := make(chan struct{})
	n := NewNotifier(NotifierOptions{Transports: []Transport{tr}, Subscriptions: st, Outbox: o,
		Charts: func(ctx context.Context, _ *trainer.Run) []Image {
			close(drawing)
			<-ctx.Done() // a chart that takes longer than the shutdown allows
			return nil
		}})
	n.Start()
	run := &trainer.Run{ID: 8, Job: "j", Outcome: trainer.OutcomeFailed, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	<-drawing
	n.Push(Reply{Text: "GPU 0 is at 98°C", Kind: KindAlert, Key: "gpu:0:hot"})
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := n.Close(cctx); err == nil {
		t.Error("Close should say its time ran out")
	}
	pending, err := st.PendingOutbox(ctx, "tg")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range pending {
		keys = append(keys, fmt.Sprintf("%d:%s", it.Chat, it.Key))
	}
	if got, want := strings.Join(keys, " "), "5:run:8:ended 5:gpu:0:hot"; got != want {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// TestAlertAfterCloseIsStored: an alert raised after the notifier closed
// (a run that ends late in a shutdown) is stored in the outbox for the
// next start, for its chats and push channels, instead of waiting in a
// queue nobody reads; a notice is dropped with a warning.
func TestAlertAfterCloseIsStored(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ctx := context.Background()
	if err := st.SetSubscribed(ctx, "tg", 5, false); err != nil { // muted: alerts still come
		t.Fatal(err)
	}
	tr, wecom := newFakeTransport("tg"), newFakeTransport("wecom:lab")
	o := newTestOutbox(st, tr, wecom)
	n := NewNotifier(NotifierOptions{Transports: []Transport{tr}, Subscriptions: st, Outbox: o, Always: []ChatKey{{"tg", 1}},
		Channels: []PushChannel{{Transport: wecom, Alerts: []string{AlertFailed}}}})
	n.Start()
	closeNotifier(t, n)
	run := &trainer.Run{ID: 9, Job: "j", Outcome: trainer.OutcomeFailed, StartedAt: time.Now(), Origin: "tg:7"}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	n.Push(Reply{Text: "GPU 0 is at 98°C", Kind: KindAlert, Alert: AlertGPU, Key: "gpu:0:hot"})
	pending, err := st.PendingOutbox(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range pending {
		keys = append(keys, fmt.Sprintf("%s:%d:%s", it.Transport, it.Chat, it.Key))
	}
	want := "tg:1:run:9:ended tg:7:run:9:ended tg:5:run:9:ended wecom:lab:0:run:9:ended tg:1:gpu:0:hot tg:5:gpu:0:hot"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("stored %q, want %q", got, want)
	}
	if got := tr.attempts(); len(got) != 0 {
		t.Errorf("sent %d replies after Close", len(got))
	}
}

// markFailingStore fails MarkOutboxSent while fail is set, as a full disk.
type markFailingStore struct {
	*store.Store
	mu    sync.Mutex
	fail  bool
	tries int
}

func (m *markFailingStore) MarkOutboxSent(ctx context.Context, id int64, at time.Time) error {
	m.mu.Lock()
	m.tries++
	fail := m.fail
	m.mu.Unlock()
	if fail {
		return errors.New("database or disk is full")
	}
	return m.Store.MarkOutboxSent(ctx, id, at)
}

func (m *markFailingStore) set(fail bool) (tries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = fail
	return m.tries
}

// An alert delivered whose delivery cannot be recorded (the disk is full)
// is not sent again and again: it is held back until the record is
// written, and the chat's other alerts wait behind it.
func TestOutboxSendsOnceWhenTheDeliveryCannotBeRecorded(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ms := &markFailingStore{Store: st, fail: true}
	tr := newFakeTransport("tg")
	o := NewOutbox(OutboxOptions{Store: ms, Transports: []Transport{tr}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	o.Start()
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		if _, err := o.Add(ctx, ChatKey{"tg", 1}, Reply{Text: "alert " + k, Kind: KindAlert, Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	tr.await(t, "the first alert", func() bool { return len(tr.delivered(1)) >= 1 })
	deadline := time.Now().Add(10 * time.Second)
	for ms.set(true) < 5 { // the record is tried again, and again
		if time.Now().After(deadline) {
			t.Fatal("the record was not tried again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := tr.delivered(1); len(got) != 1 {
		t.Fatalf("sent %q while the delivery could not be recorded, want alert a once", got)
	}
	ms.set(false)
	tr.await(t, "the second alert", func() bool { return len(tr.delivered(1)) == 2 })
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tr.delivered(1), "|"); got != "alert a|alert b" {
		t.Errorf("chat got %q, want each alert once, in order", got)
	}
	if pending, err := st.PendingOutbox(ctx, ""); err != nil || len(pending) != 0 {
		t.Errorf("pending after delivery: %v %v", pending, err)
	}
}

// fullStore fails every outbox insert, as a full disk does.
type fullStore struct{ *store.Store }

func (fullStore) EnqueueOutbox(context.Context, store.OutboxItem) (int64, bool, error) {
	return 0, false, errors.New("enqueue outbox: database or disk is full (13)")
}

// An alert the outbox cannot store (the notice that the disk is full)
// still reaches the chats and the push channels, sent from memory.
func TestAlertThatCannotBeStoredIsSentDirectly(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	con := newFakeTransport("console")
	hook := newFakeTransport("webhook:ops")
	o := NewOutbox(OutboxOptions{Store: fullStore{st}, Transports: []Transport{con, hook}, MinBackoff: 5 * time.Millisecond})
	o.Start()
	n := NewNotifier(NotifierOptions{Transports: []Transport{con}, Always: []ChatKey{{"console", 0}}, Outbox: o,
		Channels: []PushChannel{{Transport: hook}}, RetryPause: time.Millisecond})
	n.Start()
	n.Push(Reply{Text: "⚠️ disk full on /data: history is not being saved", Kind: KindAlert, Alert: AlertTrainbot, Key: "store:failing:1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := con.delivered(0); len(got) != 1 || !strings.HasPrefix(got[0], "⚠️ disk full") {
		t.Errorf("console got %q, want the notice once", got)
	}
	if got := hook.delivered(0); len(got) != 1 {
		t.Errorf("push channel got %q, want the notice once", got)
	}
}

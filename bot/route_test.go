package bot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// funcTransport is a Transport whose Send is a function; it records the
// texts it was asked to send.
type funcTransport struct {
	name string
	send func(ctx context.Context, r Reply) error

	mu    sync.Mutex
	calls []string
}

var _ Transport = (*funcTransport)(nil)

func (f *funcTransport) Name() string                             { return f.name }
func (f *funcTransport) Run(ctx context.Context, h Handler) error { <-ctx.Done(); return nil }
func (f *funcTransport) Send(ctx context.Context, chat int64, r Reply) error {
	f.mu.Lock()
	f.calls = append(f.calls, r.Text)
	f.mu.Unlock()
	return f.send(ctx, r)
}

func (f *funcTransport) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// pushErr is an error of a push channel.
type pushErr struct {
	retry bool
	after time.Duration
}

func (e pushErr) Error() string             { return "push failed" }
func (e pushErr) Retryable() bool           { return e.retry }
func (e pushErr) RetryAfter() time.Duration { return e.after }
func texts(r *recorder) (out []string) {
	for _, s := range r.got() {
		out = append(out, s.r.Text)
	}
	return out
}

func closeNotifier(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestChannelsGetAlertsByKindOnce(t *testing.T) {
	oomOnly := &recorder{name: "wecom:oom"}
	all := &recorder{name: "feishu:all"}
	prog := &recorder{name: "webhook:progress"}
	n := NewNotifier(NotifierOptions{RetryPause: time.Millisecond, Channels: []PushChannel{
		{Transport: oomOnly, Alerts: []string{AlertOOM}},
		{Transport: all},
		{Transport: prog, Alerts: []string{}, Progress: true},
	}})
	n.Start()
	n.Push(Reply{Text: "oom", Kind: KindAlert, Alert: AlertOOM, Key: "a1"})
	n.Push(Reply{Text: "oom", Kind: KindAlert, Alert: AlertOOM, Key: "a1"}) // the same alert again
	n.Push(Reply{Text: "gpu hot", Kind: KindAlert, Alert: AlertGPU, Key: "a2"})
	n.Push(Reply{Text: "report", Kind: KindProgress})
	n.Push(Reply{Text: "answer", Kind: KindReply})
	run := &trainer.Run{ID: 4, Job: "j", Outcome: trainer.OutcomeFinished, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	closeNotifier(t, n)
	if got := texts(oomOnly); strings.Join(got, "|") != "oom" {
		t.Errorf("oom channel got %q", got)
	}
	got := texts(all)
	if len(got) != 3 || got[0] != "oom" || got[1] != "gpu hot" || !strings.Contains(got[2], "run #4 (j) finished") {
		t.Errorf("all-alerts channel got %q, want oom, gpu hot, the end", got)
	}
	got = texts(prog)
	if len(got) != 2 || got[0] != "report" || !strings.Contains(got[1], "run #4 started") {
		t.Errorf("progress channel got %q, want the report and the started notice", got)
	}
}

func TestChannelRetries(t *testing.T) {
	fails := 3
	flaky := &funcTransport{name: "wecom:flaky", send: func(ctx context.Context, r Reply) error {
		if r.Kind == KindAlert && fails > 0 {
			fails--
			return pushErr{retry: true}
		}
		if r.Kind == KindProgress {
			return errors.New("down") // no Retryable: taken as temporary
		}
		return nil
	}}
	refused := &funcTransport{name: "dingtalk:badkey", send: func(ctx context.Context, r Reply) error { return pushErr{retry: false} }}
	n := NewNotifier(NotifierOptions{RetryPause: time.Millisecond, MaxRetryPause: 4 * time.Millisecond,
		Channels: []PushChannel{{Transport: flaky, Progress: true}, {Transport: refused}}})
	n.Start()
	n.Push(Reply{Text: "alert", Kind: KindAlert, Alert: AlertFailed, Key: "x"})
	n.Push(Reply{Text: "progress", Kind: KindProgress})
	closeNotifier(t, n)
	calls := flaky.got()
	if c := strings.Count(strings.Join(calls, ","), "alert"); c != 4 {
		t.Errorf("the alert was tried %d times, want 4 (3 failures, then delivered)", c)
	}
	if c := strings.Count(strings.Join(calls, ","), "progress"); c != 3 {
		t.Errorf("progress was tried %d times, want 3", c)
	}
	if c := len(refused.got()); c != 1 {
		t.Errorf("a permanent refusal was tried %d times, want 1", c)
	}
}

func TestStuckChannelBlocksNoOne(t *testing.T) {
	release := make(chan struct{})
	stuck := &funcTransport{name: "wecom:stuck", send: func(ctx context.Context, r Reply) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	other := &recorder{name: "feishu:ok"}
	con := &recorder{name: "console"}
	n := NewNotifier(NotifierOptions{Transports: []Transport{con}, Always: []ChatKey{{"console", 0}}, RetryPause: time.Millisecond,
		Channels: []PushChannel{{Transport: stuck}, {Transport: other}}})
	n.Start()
	for i := 0; i < 3; i++ {
		n.Push(Reply{Text: "alert", Kind: KindAlert, Alert: AlertNaN})
	}
	waitFor(t, "the other channel and the console to get every alert while one channel hangs", func() bool {
		return len(other.got()) == 3 && len(con.got()) == 3
	})
	if len(stuck.got()) != 1 {
		t.Errorf("the stuck channel was called %d times while its first send hangs", len(stuck.got()))
	}
	close(release)
	closeNotifier(t, n)
	if len(stuck.got()) != 3 {
		t.Errorf("the stuck channel got %d alerts after it came back, want 3", len(stuck.got()))
	}
}

func TestQuietHoursHoldAndDrop(t *testing.T) {
	// A clock that runs from 07:59:58.5 local time: quiet hours end 1.5 s in.
	base := time.Date(2030, 3, 9, 7, 59, 58, 500_000_000, time.Local)
	start := time.Now()
	now := func() time.Time { return base.Add(time.Since(start)) }
	q, err := ParseQuietHours("23:00-08:00", SeverityCritical)
	if err != nil {
		t.Fatal(err)
	}
	ch := &recorder{name: "wecom:lab"}
	con := &recorder{name: "console"}
	n := NewNotifier(NotifierOptions{Transports: []Transport{con}, Always: []ChatKey{{"console", 0}}, Now: now, RetryPause: time.Millisecond,
		Quiet:    map[ChatKey]QuietHours{{"console", 0}: q},
		Channels: []PushChannel{{Transport: ch, Progress: true, Quiet: q}}})
	n.Start()
	n.Push(Reply{Text: "finished", Kind: KindAlert, Alert: AlertFinished, Key: "f"})
	n.Push(Reply{Text: "progress", Kind: KindProgress})
	n.Push(Reply{Text: "oom", Kind: KindAlert, Alert: AlertOOM, Key: "o"})
	for _, r := range []*recorder{ch, con} {
		waitFor(t, r.name+" to get the held alert when the quiet hours end", func() bool { return len(r.got()) == 2 })
	}
	closeNotifier(t, n)
	for _, r := range []*recorder{ch, con} {
		if got := texts(r); strings.Join(got, ",") != "oom,finished" {
			t.Errorf("%s got %q, want oom at once, finished after 08:00, no progress", r.name, got)
		}
	}
	if !now().After(time.Date(2030, 3, 9, 8, 0, 0, 0, time.Local)) {
		t.Error("the held alert came before the quiet hours ended")
	}
}

func TestEndReportIsOneMessageWithChartsAndBest(t *testing.T) {
	con := &recorder{name: "console"}
	var asked *trainer.Run
	n := NewNotifier(NotifierOptions{Transports: []Transport{con}, Always: []ChatKey{{"console", 0}},
		Extremes: func(ctx context.Context, runID int64) (map[string]store.Extremes, error) {
			return map[string]store.Extremes{
				"val_loss": {Min: 0.0498, MinStep: 1200, Max: 2.3, MaxStep: 1},
				"val_acc":  {Min: 0.1, MinStep: 1, Max: 0.9912, MaxStep: 1300},
				"lr":       {Min: 1e-5, Max: 1e-3},
			}, nil
		},
		Charts: func(ctx context.Context, run *trainer.Run) []Image {
			asked = run
			return []Image{{Name: "loss.png", PNG: []byte("png")}, {Name: "memory.png", PNG: []byte("png")}}
		}})
	n.Start()
	peak, host := int64(7<<30), int64(2<<30)
	run := &trainer.Run{ID: 12, Job: "mnist", Outcome: trainer.OutcomeFinished, StartedAt: time.Now().Add(-30 * time.Minute), Steps: 1500, Total: 1500,
		PeakGPUMem: &peak, PeakHostMem: &host}
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now(),
		Status: &trainer.Status{Last: []trainer.Metric{{Name: "loss", Value: 0.0172}, {Name: "val_loss", Value: 0.0512}}}})
	closeNotifier(t, n)
	got := con.got()
	if len(got) != 1 {
		t.Fatalf("%d messages, want 1", len(got))
	}
	r := got[0].r
	for _, want := range []string{"✅ run #12 (mnist) finished after 30m", "step 1500/1500", "loss 0.0172 · val_loss 0.0512",
		"best val_loss 0.0498 (step 1200) · val_acc 0.9912 (step 1300)", "peak GPU memory 7.00 GiB · peak host memory 2.00 GiB"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("report lacks %q:\n%s", want, r.Text)
		}
	}
	if strings.Contains(r.Text, "lr") {
		t.Errorf("the report ranks lr:\n%s", r.Text)
	}
	if len(r.Images) != 2 || asked == nil || asked.ID != 12 || r.Alert != AlertFinished {
		t.Errorf("images %d, charts asked for %+v, alert %q", len(r.Images), asked, r.Alert)
	}
}

func TestMetricGoal(t *testing.T) {
	cases := map[string]int{
		"loss": -1, "val_loss": -1, "train/loss": -1, "ppl": -1, "val_wer": -1, "error_rate": -1,
		"acc": 1, "val_acc": 1, "accuracy": 1, "top1": 1, "eval/f1": 1, "mAP": 1, "rouge_l": 1, "acc@1": 1,
		"lr": 0, "epoch": 0, "grad_norm": 0, "throughput": 0, "step_time": 0,
	}
	for name, want := range cases {
		if got := MetricGoal(name); got != want {
			t.Errorf("MetricGoal(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestSlowChatHoldsUpNoAlert: a chat whose transport hangs on a notice
// (Telegram unreachable, a long flood wait) delays neither the alerts of
// the push channels nor the other chats.
func TestSlowChatHoldsUpNoAlert(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	release := make(chan struct{})
	slow := newFakeTransport("tg")
	slow.setSend(func(chat int64, r Reply) error {
		if r.Kind == KindNotice {
			<-release
		}
		return nil
	})
	con, wecom := newFakeTransport("console"), newFakeTransport("wecom:lab")
	o := newTestOutbox(st, slow, con, wecom)
	o.Start()
	n := NewNotifier(NotifierOptions{Transports: []Transport{slow, con}, Always: []ChatKey{{"tg", 1}, {"console", 0}}, Outbox: o,
		Channels: []PushChannel{{Transport: wecom}}})
	n.Start()
	run := &trainer.Run{ID: 3, Job: "j", StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.Push(Reply{Text: "💥 run #3 hit out-of-memory", Kind: KindAlert, Alert: AlertOOM, RunID: 3, Key: "run:3:alert:oom"})
	wecom.await(t, "the alert on the push channel", func() bool { return len(wecom.delivered(0)) == 1 })
	con.await(t, "the notice and the alert on the console", func() bool { return len(con.delivered(0)) == 2 })
	close(release)
	closeNotifier(t, n)
	slow.await(t, "the notice and the alert in the slow chat", func() bool { return len(slow.delivered(1)) == 2 })
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Each chat got them in order.
	for _, got := range [][]string{con.delivered(0), slow.delivered(1)} {
		if len(got) != 2 || !strings.Contains(got[0], "run #3 started") || !strings.Contains(got[1], "out-of-memory") {
			t.Errorf("got %q, want the notice, then the alert", got)
		}
	}
}

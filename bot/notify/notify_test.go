package notify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// posts records the envelopes a notifier posts, in order.
type posts struct {
	mu  sync.Mutex
	got []deliver.Envelope
}

func (p *posts) post(e deliver.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, e)
}

func (p *posts) all() []deliver.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// to returns the texts posted to one destination, in order.
func (p *posts) to(k chat.ChatKey) []string {
	var out []string
	for _, e := range p.all() {
		if e.To == k {
			out = append(out, e.Reply.Text)
		}
	}
	return out
}

// chats returns the destinations of the posts whose text contains s.
func (p *posts) chats(s string) []chat.ChatKey {
	var out []chat.ChatKey
	for _, e := range p.all() {
		if strings.Contains(e.Reply.Text, s) {
			out = append(out, e.To)
		}
	}
	return out
}

type subsFunc func() []history.Subscription

func (f subsFunc) Subscriptions(context.Context) ([]history.Subscription, error) { return f(), nil }

var (
	console = chat.ChatKey{Transport: "console", Chat: 0}
	tg      = func(id int64) chat.ChatKey { return chat.ChatKey{Transport: "telegram", Chat: id} }
)

func closeNotifier(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRoutesEvents(t *testing.T) {
	p := &posts{}
	subs := subsFunc(func() []history.Subscription {
		return []history.Subscription{{Transport: "telegram", Chat: 5, Subscribed: true}, {Transport: "telegram", Chat: 6, Subscribed: false}}
	})
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, Subscriptions: subs})
	n.Start()
	run := &trainer.Run{ID: 7, Job: "j", Origin: "telegram:9", StartedAt: time.Now().Add(-time.Minute), Outcome: trainer.OutcomeFinished, Steps: 100, Total: 100}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now(), Status: &trainer.Status{Last: []trainer.Metric{{Name: "loss", Value: 0.25}}}})
	n.Push(chat.Reply{Text: "GPU 0 is hot", Kind: chat.KindAlert})
	n.Push(chat.Reply{Text: "report", Kind: chat.KindProgress})
	closeNotifier(t, n)
	// Started: not back to the starter (telegram:9), to the console and the subscribed chat only.
	if got := p.chats("started"); !slices.Equal(got, []chat.ChatKey{console, tg(5)}) {
		t.Errorf("started went to %v, want the console and telegram:5", got)
	}
	// Ended is an alert: the console, the starter, subscribed and muted chats.
	if got := p.chats("finished after 1m"); !slices.Equal(got, []chat.ChatKey{console, tg(9), tg(5), tg(6)}) {
		t.Errorf("ended went to %v", got)
	}
	if got := p.to(console); len(got) < 2 || !strings.Contains(got[1], "loss 0.2500") {
		t.Errorf("the end report lacks the final loss: %q", got)
	}
	if got := p.chats("GPU 0 is hot"); !slices.Equal(got, []chat.ChatKey{console, tg(5), tg(6)}) {
		t.Errorf("pushed alert went to %v", got)
	}
	if got := p.chats("report"); !slices.Equal(got, []chat.ChatKey{console, tg(5)}) {
		t.Errorf("progress went to %v, want the console and the subscribed chat", got)
	}
	for _, e := range p.all() {
		if e.Durable == (e.Reply.Kind == chat.KindProgress) {
			t.Errorf("%q: durable %v; all but progress are durable", e.Reply.Text, e.Durable)
		}
	}
}

// A notice that a transport stopped goes to every chat but that
// transport's, and to the push channels.
func TestPushExceptSkipsTheTransport(t *testing.T) {
	p := &posts{}
	subs := subsFunc(func() []history.Subscription {
		return []history.Subscription{{Transport: "telegram", Chat: 5, Subscribed: true}}
	})
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, Subscriptions: subs, Channels: []Channel{{Name: "webhook:ops"}}})
	n.Start()
	n.PushExcept(chat.Reply{Text: "telegram stopped", Kind: chat.KindAlert, Alert: chat.AlertTrainbot}, "telegram")
	closeNotifier(t, n)
	if got := p.chats("telegram stopped"); !slices.Equal(got, []chat.ChatKey{console, {Transport: "webhook:ops"}}) {
		t.Errorf("the notice went to %v", got)
	}
}

func TestChannelsGetAlertsByKind(t *testing.T) {
	p := &posts{}
	oom, all, prog := chat.ChatKey{Transport: "wecom:oom"}, chat.ChatKey{Transport: "feishu:all"}, chat.ChatKey{Transport: "webhook:progress"}
	var counted []string // OnAlert runs on the notifier's goroutine; read after Close
	n := New(Options{Post: p.post, Channels: []Channel{
		{Name: oom.Transport, Alerts: []string{chat.AlertOOM}},
		{Name: all.Transport},
		{Name: prog.Transport, Alerts: []string{}, Progress: true},
	}, OnAlert: func(kind string) { counted = append(counted, kind) }})
	n.Start()
	n.Push(chat.Reply{Text: "oom", Kind: chat.KindAlert, Alert: chat.AlertOOM, Key: "a1"})
	n.Push(chat.Reply{Text: "gpu hot", Kind: chat.KindAlert, Alert: chat.AlertGPU, Key: "a2"})
	n.Push(chat.Reply{Text: "report", Kind: chat.KindProgress})
	n.Push(chat.Reply{Text: "answer", Kind: chat.KindReply})
	run := &trainer.Run{ID: 4, Job: "j", Outcome: trainer.OutcomeFinished, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventStarted, Run: run})
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	closeNotifier(t, n)
	if got := p.to(oom); strings.Join(got, "|") != "oom" {
		t.Errorf("oom channel got %q", got)
	}
	if got := p.to(all); len(got) != 3 || got[0] != "oom" || got[1] != "gpu hot" || !strings.Contains(got[2], "run #4 (j) finished") {
		t.Errorf("all-alerts channel got %q, want oom, gpu hot, the end", got)
	}
	if got := p.to(prog); len(got) != 2 || got[0] != "report" || !strings.Contains(got[1], "run #4 started") {
		t.Errorf("progress channel got %q, want the report and the started notice", got)
	}
	// Each alert counted once (for /metrics), whatever the channels it went to.
	if want := []string{"oom", "gpu", "finished"}; !slices.Equal(counted, want) {
		t.Errorf("OnAlert heard %q, want %q", counted, want)
	}
}

func TestEndReportIsOneMessageWithChartsAndBest(t *testing.T) {
	p := &posts{}
	var asked *trainer.Run
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console},
		Extremes: func(ctx context.Context, runID int64) (map[string]history.Extremes, error) {
			return map[string]history.Extremes{
				"val_loss": {Min: 0.0498, MinStep: 1200, Max: 2.3, MaxStep: 1},
				"val_acc":  {Min: 0.1, MinStep: 1, Max: 0.9912, MaxStep: 1300},
				"lr":       {Min: 1e-5, Max: 1e-3},
			}, nil
		},
		Charts: func(ctx context.Context, _ i18n.Lang, run *trainer.Run) []chat.Image {
			asked = run
			return []chat.Image{{Name: "loss.png", PNG: []byte("png")}, {Name: "memory.png", PNG: []byte("png")}}
		}})
	n.Start()
	peak, host := int64(7<<30), int64(2<<30)
	run := &trainer.Run{ID: 12, Job: "mnist", Outcome: trainer.OutcomeFinished, StartedAt: time.Now().Add(-30 * time.Minute), Steps: 1500, Total: 1500,
		PeakGPUMem: &peak, PeakHostMem: &host}
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now(),
		Status: &trainer.Status{Last: []trainer.Metric{{Name: "loss", Value: 0.0172}, {Name: "val_loss", Value: 0.0512}}}})
	closeNotifier(t, n)
	got := p.all()
	if len(got) != 1 {
		t.Fatalf("%d envelopes, want 1", len(got))
	}
	r := got[0].Reply
	for _, want := range []string{"✅ run #12 (mnist) finished after 30m", "step 1500/1500", "loss 0.0172 · val_loss 0.0512",
		"best val_loss 0.0498 (step 1200) · val_acc 0.9912 (step 1300)", "peak GPU memory 7.00 GiB · peak host memory 2.00 GiB"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("report lacks %q:\n%s", want, r.Text)
		}
	}
	if strings.Contains(r.Text, "lr") {
		t.Errorf("the report ranks lr:\n%s", r.Text)
	}
	if len(r.Images) != 2 || asked == nil || asked.ID != 12 || r.Alert != chat.AlertFinished || !got[0].Durable || r.Key != "run:12:ended" {
		t.Errorf("images %d, charts asked for %+v, alert %q, envelope %+v", len(r.Images), asked, r.Alert, got[0])
	}
}

// oomJob is a job whose batch can be halved, with on_oom.
func oomJob() *trainer.Job {
	one := 1.0
	return &trainer.Job{Name: "fit", Params: map[string]trainer.ParamSpec{"bs": {Type: trainer.ParamInt, Default: "64", HasDefault: true, Min: &one}},
		OnOOM: &trainer.OOMRetry{Retry: 2, Halve: "bs"}}
}

// The OOM-retry scenario in the order the supervisor publishes it: each
// run that dies of its OOM gets one message, its end report, posted before
// the start of its retry, which names the run it retries; what to try is
// said once for the chain.
func TestOOMRetryIsCausalWithTheAdviceOnce(t *testing.T) {
	p := &posts{}
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, OOMGrace: time.Minute})
	n.Start()
	job := oomJob()
	oom, _ := trainer.DetectOOM("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.00 GiB is free.")
	now := time.Now()
	run := func(id, retryOf int64, bs string, outcome trainer.Outcome) *trainer.Run {
		r := &trainer.Run{ID: id, Job: "fit", Params: map[string]string{"bs": bs}, Origin: "console:0", StartedAt: now, Outcome: outcome, RetryOf: retryOf}
		if retryOf != 0 {
			r.StartedBy = fmt.Sprintf("on_oom, retry %d/2 of run #%d", id-1, retryOf)
		}
		if outcome == trainer.OutcomeOOM {
			r.Detail = oom.Summary()
		}
		return r
	}
	alert := func(r *trainer.Run) trainer.Event {
		return trainer.Event{Kind: trainer.EventAlert, Run: r, Job: job, At: now, Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: oom.Summary(), OOM: oom}}
	}
	r1, r2, r3 := run(1, 0, "64", trainer.OutcomeOOM), run(2, 1, "32", trainer.OutcomeOOM), run(3, 2, "16", trainer.OutcomeFinished)
	for _, e := range []trainer.Event{
		alert(r1),
		{Kind: trainer.EventEnded, Run: r1, Job: job, At: now, OOM: oom, Retry: &trainer.Retry{Param: "bs", Value: "64", Limit: 2, Next: "32"}},
		{Kind: trainer.EventStarted, Run: r2, Job: job, At: now},
		alert(r2),
		{Kind: trainer.EventEnded, Run: r2, Job: job, At: now, OOM: oom, Retry: &trainer.Retry{Param: "bs", Value: "32", Attempt: 1, Limit: 2, Next: "16"}},
		{Kind: trainer.EventStarted, Run: r3, Job: job, At: now},
		{Kind: trainer.EventEnded, Run: r3, Job: job, At: now, Retry: &trainer.Retry{Param: "bs", Value: "16", Attempt: 2, Limit: 2}},
	} {
		n.OnEvent(e)
	}
	closeNotifier(t, n)
	got := p.to(console)
	want := []string{
		"💥 run #1 (fit) ran out of memory",
		"run #2 started: fit bs=32 (by on_oom, retry 1/2 of run #1)",
		"💥 run #2 (fit) ran out of memory",
		"run #3 started: fit bs=16 (by on_oom, retry 2/2 of run #2)",
		"✅ run #3 (fit) finished",
	}
	if len(got) != len(want) {
		t.Fatalf("posted %d messages, want %d:\n%s", len(got), len(want), strings.Join(got, "\n---\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("message %d is %q, want %q", i, got[i], w)
		}
	}
	if !strings.Contains(got[0], "↻ on_oom: starting it again with bs=32 (retry 1 of 2)") || strings.Count(strings.Join(got, "\n"), "What to try") != 1 || !strings.Contains(got[0], "What to try") {
		t.Errorf("what to try should come once, with the first OOM:\n%s", strings.Join(got, "\n---\n"))
	}
}

// A run that goes on after its OOM line (the script caught it) gets the
// alert, with what to try, once the grace is over; its end report then
// does not say it again.
func TestOOMAlertOfARunThatGoesOn(t *testing.T) {
	p := &posts{}
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, OOMGrace: 50 * time.Millisecond})
	n.Start()
	job := oomJob()
	job.OnOOM = nil
	oom, _ := trainer.DetectOOM("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity; 1.23 GiB free)")
	run := &trainer.Run{ID: 3, Job: "fit", Params: map[string]string{"bs": "64"}, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventAlert, Run: run, Job: job, Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: oom.Summary(), OOM: oom}})
	awaitPosts(t, "the alert", func() bool { return len(p.to(console)) > 0 })
	ended := *run
	ended.Outcome = trainer.OutcomeOOM
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: &ended, Job: job, At: time.Now(), OOM: oom})
	closeNotifier(t, n)
	got := p.to(console)
	if len(got) != 2 || !strings.Contains(got[0], "hit out-of-memory") || !strings.Contains(got[1], "ran out of memory") {
		t.Fatalf("got %q, want the alert, then the end report", got)
	}
	if strings.Count(strings.Join(got, "\n"), "What to try") != 1 || !strings.Contains(got[0], "What to try") {
		t.Errorf("what to try should come once, with the alert:\n%s", strings.Join(got, "\n---\n"))
	}
}

// What comes after Close (a run that ended late in a shutdown) is posted
// by its caller: delivery stores it for the next start.
func TestEventsAfterCloseArePosted(t *testing.T) {
	p := &posts{}
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console},
		Charts: func(context.Context, i18n.Lang, *trainer.Run) []chat.Image {
			t.Error("no chart is drawn after Close")
			return nil
		}})
	n.Start()
	closeNotifier(t, n)
	run := &trainer.Run{ID: 8, Job: "j", Outcome: trainer.OutcomeFailed, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	if got := p.to(console); len(got) != 1 || !strings.Contains(got[0], "run #8 (j) failed") {
		t.Errorf("got %q", got)
	}
}

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

type fakeSubs []history.Subscription

func (f fakeSubs) Subscriptions(context.Context) ([]history.Subscription, error) { return f, nil }

func status(id, step, total int64, loss float64) trainer.Status {
	return trainer.Status{
		Run:         &trainer.Run{ID: id, Job: "demo", Origin: "tg:1", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning},
		Progress:    logparse.Progress{Step: step, TotalSteps: total, Epoch: math.NaN()},
		Last:        []trainer.Metric{{Name: "loss", Value: loss}, {Name: "acc", Value: 0.8}},
		StepsPerSec: 12.5, Elapsed: 90 * time.Second, ETA: 2 * time.Minute,
	}
}

func awaitPosts(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProgressPublisher(t *testing.T) {
	p := &posts{}
	runs := &fakeRuns{}
	runs.set(status(1, 10, 100, 0.9))
	subs := fakeSubs{{Transport: "tg", Chat: 2, Subscribed: true}, {Transport: "tg", Chat: 3, Subscribed: false}, {Transport: "con", Chat: 0, Subscribed: true}}
	pub := NewProgressPublisher(ProgressOptions{Trainer: runs, Post: p.post, InPlace: func(t string) bool { return t == "tg" }, Subscriptions: subs, Interval: 20 * time.Millisecond})
	pub.Start()
	tg1, tg2, tg3, con := chat.ChatKey{Transport: "tg", Chat: 1}, chat.ChatKey{Transport: "tg", Chat: 2}, chat.ChatKey{Transport: "tg", Chat: 3}, chat.ChatKey{Transport: "con"}

	// The starter's chat (tg:1, it edits in place) and the subscribed ones.
	awaitPosts(t, "first progress", func() bool { return len(p.to(tg1)) == 1 && len(p.to(tg2)) == 1 && len(p.to(con)) == 1 })
	first := p.all()[0]
	if r := first.Reply; r.Kind != chat.KindProgress || first.Durable || r.RunID != 1 || r.Key != "run:1:progress" || len(r.Buttons) == 0 || !strings.Contains(r.Text, "step 10/100") {
		t.Errorf("first progress: %+v", first)
	}
	runs.set(status(1, 20, 100, 0.5))
	awaitPosts(t, "second progress", func() bool { return len(p.to(tg1)) == 2 })
	if got := p.to(tg3); len(got) != 0 {
		t.Errorf("a muted chat got progress: %q", got)
	}
	pub.OnEvent(trainer.Event{Kind: trainer.EventEnded, At: time.Now(), Run: &trainer.Run{ID: 1, Job: "demo", Origin: "tg:1",
		Outcome: trainer.OutcomeStopped, StoppedBy: "ann", Steps: 20, Total: 100, StartedAt: time.Now().Add(-time.Minute), EndedAt: time.Now()}})
	awaitPosts(t, "final progress", func() bool { return len(p.to(tg1)) == 3 && len(p.to(tg2)) == 3 })
	if final := p.to(tg1)[2]; !strings.Contains(final, "stopped by ann") || !strings.Contains(final, "20%") {
		t.Errorf("final: %q", final)
	}
	// The run is still listed as active for a moment: no new message for it.
	runs.set(status(1, 21, 100, 0.4))
	if err := pub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(p.to(tg1)); n != 3 {
		t.Errorf("after the end: %d progress replies, want 3", n)
	}
	if n := len(p.to(con)); n != 2 {
		t.Errorf("the console got %d progress lines, want 2 (no final one: the end report says it)", n)
	}
}

func TestProgressOriginOnlyOnInPlaceTransports(t *testing.T) {
	st := status(4, 1, 10, 1)
	st.Run.Origin = "con:0"
	pub := NewProgressPublisher(ProgressOptions{Trainer: &fakeRuns{}, Interval: 10 * time.Millisecond})
	if got := pub.targets(st.Run, nil); len(got) != 0 {
		t.Errorf("a console that did not subscribe would get progress lines: %v", got)
	}
	if got := pub.targets(st.Run, fakeSubs{{Transport: "con", Chat: 0, Subscribed: true}}); len(got) != 1 {
		t.Errorf("a subscribed console: %v", got)
	}
}

func TestRunMessagesOpenTheRunsPage(t *testing.T) {
	// With a page address (public_url), the live progress message and the
	// end report carry a [网页 Open] URL button to the run's page.
	pageURL := func(id int64) string { return fmt.Sprintf("https://gpu.example.org/runs/%d?t=tok", id) }
	hasPage := func(r chat.Reply, id int64) bool {
		for _, row := range r.Buttons {
			for _, b := range row {
				if b.Label == "网页 Open" && b.URL == pageURL(id) {
					return true
				}
			}
		}
		return false
	}
	p := &posts{}
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, PageURL: pageURL})
	n.Start()
	run := &trainer.Run{ID: 12, Job: "mnist", Outcome: trainer.OutcomeFinished, StartedAt: time.Now().Add(-time.Minute), Steps: 10}
	n.OnEvent(trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()})
	closeNotifier(t, n)
	if got := p.all(); len(got) != 1 || !hasPage(got[0].Reply, 12) {
		t.Errorf("end report: %+v, want a [网页 Open] button to run 12's page", got)
	}

	p = &posts{}
	runs := &fakeRuns{}
	runs.set(status(3, 10, 100, 0.9))
	pub := NewProgressPublisher(ProgressOptions{Trainer: runs, Post: p.post, Subscriptions: fakeSubs{{Transport: "con", Chat: 0, Subscribed: true}},
		Interval: 20 * time.Millisecond, PageURL: pageURL})
	pub.Start()
	awaitPosts(t, "progress", func() bool { return len(p.all()) > 0 })
	if err := pub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := p.all()[0].Reply; !hasPage(r, 3) || len(r.Buttons) != 2 {
		t.Errorf("progress buttons %+v, want 停止 状态 画图 and then [网页 Open] to run 3's page", r.Buttons)
	}
}

// A GPU alert is worded per chat, and push channels choose Xid errors
// apart from the thresholds crossed.
func TestGPUAlerts(t *testing.T) {
	p := &posts{}
	xids, all := chat.ChatKey{Transport: "wecom:xid"}, chat.ChatKey{Transport: "webhook:all"}
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console},
		Channels:  []Channel{{Name: xids.Transport, Alerts: []string{chat.AlertXid}}, {Name: all.Transport}},
		Languages: i18n.Languages{Default: i18n.ZhEn, ByTransport: map[string]i18n.Lang{"webhook:all": i18n.En}}})
	n.Start()
	h100 := gpu.Device{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 << 30, MemUsed: 77 << 30, TempC: 60}
	n.GPUAlert(gpu.Alert{Kind: gpu.AlertMemory, Device: 0, RunID: 3, Key: "gpu:memory:run3:dev0:1", Sampled: h100, Held: 10 << 30,
		Thresholds: gpu.Thresholds{MemoryPercent: 95}})
	n.GPUAlert(gpu.Alert{Kind: gpu.AlertXid, Device: 0, RunID: 3, Key: "gpu:xid:dev0:1", Sampled: h100, Runs: []int64{3}, Xid: 79})
	closeNotifier(t, n)
	byKey := map[chat.ChatKey]map[string]chat.Reply{}
	for _, e := range p.all() {
		if byKey[e.To] == nil {
			byKey[e.To] = map[string]chat.Reply{}
		}
		byKey[e.To][e.Reply.Key] = e.Reply
		if !e.Durable {
			t.Errorf("%s to %v is not durable: an alert is stored before it is sent", e.Reply.Key, e.To)
		}
	}
	if r := byKey[console]["gpu:memory:run3:dev0:1"]; r.Kind != chat.KindAlert || r.Alert != chat.AlertGPU || r.RunID != 3 || r.Text != render.GPUAlert(i18n.ZhEn, gpu.Alert{Kind: gpu.AlertMemory, Device: 0, RunID: 3, Sampled: h100, Held: 10 << 30, Thresholds: gpu.Thresholds{MemoryPercent: 95}}) {
		t.Errorf("the memory alert to the console: %+v", r)
	}
	if r := byKey[console]["gpu:xid:dev0:1"]; r.Alert != chat.AlertXid || !strings.Contains(r.Text, "Xid 79") {
		t.Errorf("the Xid alert to the console: %+v", r)
	}
	if got := byKey[xids]; len(got) != 1 || got["gpu:xid:dev0:1"].Alert != chat.AlertXid {
		t.Errorf("the channel of Xid alerts got %+v, want the Xid alert only", got)
	}
	if got := byKey[all]; len(got) != 2 || got["gpu:xid:dev0:1"].Text != render.GPUAlert(i18n.En, gpu.Alert{Kind: gpu.AlertXid, Device: 0, RunID: 3, Sampled: h100, Runs: []int64{3}, Xid: 79}) {
		t.Errorf("the English channel got %+v, want both alerts in English", got)
	}
}

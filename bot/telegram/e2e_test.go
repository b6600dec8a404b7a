package telegram_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/chattest"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// The end-to-end tests run the real router, supervisor, store, notifier,
// delivery pipeline and progress publisher behind the Telegram transport,
// against the fake Bot API. The training is the built-in demo, run as a
// child process: this test binary, re-executed (chattest.Main).
func TestMain(m *testing.M) { chattest.Main(m) }

func demoJob(steps int, pace time.Duration) *trainer.Job { return chattest.DemoJob(steps, pace) }

// stack is trainbot as `trainbot serve` wires it, with the Telegram
// transport only.
type stack struct {
	fake     *telegramtest.Server
	st       *store.Store
	sup      *trainer.Supervisor
	tr       *telegram.Transport
	pipeline *deliver.Pipeline
	notifier *notify.Notifier
	progress *notify.ProgressPublisher
	logs     *logBuffer
	stopRun  func() error
	closed   bool
}

type stackOptions struct {
	access   command.Access
	job      *trainer.Job
	interval time.Duration // live progress
	opts     func(*telegram.Options)
}

func newStack(t testing.TB, fake *telegramtest.Server, dir string, so stackOptions) *stack {
	t.Helper()
	s := &stack{fake: fake, logs: &logBuffer{}}
	logger := newLogger(s.logs)
	var err error
	if s.st, err = store.Open(dir, store.Options{Logger: logger}); err != nil {
		t.Fatal(err)
	}
	var jobs []*trainer.Job
	if so.job != nil {
		jobs = append(jobs, so.job)
	}
	if s.sup, err = trainer.New(context.Background(), trainer.Options{Jobs: jobs, Recorder: s.st, DataDir: dir, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	opts := optionsFor(fake.Token, fake.URL, s.logs)
	opts.State = s.st
	if so.opts != nil {
		so.opts(&opts)
	}
	if s.tr, err = telegram.New(opts); err != nil {
		t.Fatal(err)
	}
	s.pipeline = deliver.New(deliver.Options{Senders: []chat.Sender{s.tr}, Store: s.st, Logger: logger,
		Policy: deliver.Policy{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, EphemeralTries: 3, ChartTries: 2, ChartPause: 50 * time.Millisecond}})
	s.pipeline.Start()
	s.notifier = notify.New(notify.Options{Post: s.pipeline.Post, Subscriptions: s.st, Logger: logger})
	s.sup.Subscribe(s.notifier.OnEvent)
	s.notifier.Start()
	if so.interval == 0 {
		so.interval = 100 * time.Millisecond
	}
	s.progress = notify.NewProgressPublisher(notify.ProgressOptions{Trainer: s.sup, Post: s.pipeline.Post, Subscriptions: s.st,
		InPlace: func(t string) bool { return t == telegram.Name }, Interval: so.interval, Logger: logger})
	s.sup.Subscribe(s.progress.OnEvent)
	s.progress.Start()
	router := &command.Router{Trainer: s.sup, History: s.st, Logger: logger, Access: so.access, ConfirmStop: map[string]bool{telegram.Name: true}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.tr.Receive(ctx, s.pipeline.Answer(router)) }()
	s.stopRun = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(wait):
			return errors.New("Receive did not return")
		}
	}
	t.Cleanup(func() { s.close(t) })
	return s
}

// close shuts down in runBot's order.
func (s *stack) close(t testing.TB) {
	if s.closed {
		return
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.stopRun(); err != nil {
		t.Errorf("transport: %v", err)
	}
	if err := s.sup.Close(ctx); err != nil {
		t.Errorf("supervisor: %v", err)
	}
	s.progress.Close(ctx)
	s.notifier.Close(ctx)
	s.pipeline.Close(ctx)
	if err := s.st.Close(); err != nil {
		t.Errorf("store: %v", err)
	}
	if strings.Contains(s.logs.String(), strings.SplitN(token, ":", 2)[1]) {
		t.Error("the token is in the log")
	}
}

// awaitMessage waits for a message in chat whose text contains want, after
// the first from messages (those before the action waited for:
// len(fake.Messages(chat)) before it); live progress messages (silent
// ones) do not count.
func awaitMessage(t *testing.T, fake *telegramtest.Server, chat int64, from int, want string) telegramtest.Message {
	t.Helper()
	var found telegramtest.Message
	ok := fake.Await(wait, func() bool {
		for _, m := range fake.Messages(chat)[from:] {
			if !m.Silent && strings.Contains(telegramtest.Plain(m.Text), want) {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		var texts []string
		for _, m := range fake.Messages(chat)[from:] {
			texts = append(texts, telegramtest.Plain(m.Text))
		}
		t.Fatalf("chat %d: no message with %q after message %d; got:\n%s", chat, want, from, strings.Join(texts, "\n---\n"))
	}
	return found
}

func count(fake *telegramtest.Server, chat int64, want string) int {
	n := 0
	for _, m := range fake.Messages(chat) {
		if strings.Contains(telegramtest.Plain(m.Text), want) {
			n++
		}
	}
	return n
}

const (
	operator = 111
	viewer   = 222
	stranger = 999
)

func TestOperatorStartsWatchesAndStopsARun(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	s := newStack(t, fake, t.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}, Viewers: []int64{viewer}}, job: demoJob(200_000, 10*time.Millisecond)})

	fake.UserSays(operator, "开始")
	started := awaitMessage(t, fake, operator, 0, "run #1 started: demo")
	if got, want := started.Buttons(), []string{"停止 1", "状态 1", "画图 1"}; !slices.Equal(got, want) {
		t.Fatalf("buttons: got %q, want %q", got, want)
	}
	if label := started.Markup.InlineKeyboard[0][0].Text; label != "停止 Stop" {
		t.Errorf("first button label %q", label)
	}
	// Wait until the demo has printed metrics.
	if !fake.Await(wait, func() bool { st, err := s.sup.Status(1); return err == nil && st.Progress.Step >= 20 }) {
		t.Fatal("the demo printed no metric")
	}

	from := len(fake.Messages(operator))
	q := fake.Press(operator, started, "状态 1")
	status := awaitMessage(t, fake, operator, from, "run #1 · demo · running")
	if !strings.Contains(telegramtest.Plain(status.Text), "step ") {
		t.Errorf("status: %q", status.Text)
	}
	if !fake.Await(wait, func() bool { return fake.Answered(q) }) {
		t.Error("状态: the callback was not answered")
	}

	from = len(fake.Messages(operator))
	q = fake.Press(operator, started, "画图 1")
	var photo telegramtest.Message
	if !fake.Await(wait, func() bool {
		for _, m := range fake.Messages(operator)[from:] {
			if m.Method == "sendPhoto" {
				photo = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("画图 sent no photo")
	}
	img, err := png.Decode(bytes.NewReader(photo.Photo))
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if img.Bounds().Dx() < 400 || !strings.Contains(photo.Text, "run #1 demo") {
		t.Errorf("chart %v with caption %q", img.Bounds(), photo.Text)
	}
	if !fake.Await(wait, func() bool { return fake.Answered(q) }) {
		t.Error("画图: the callback was not answered")
	}

	// The live progress: one silent message, edited in place.
	var prog telegramtest.Message
	if !fake.Await(wait, func() bool {
		for _, m := range fake.Messages(operator) {
			if m.Silent && len(m.Edits) >= 2 {
				prog = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("no live progress message edited in place")
	}
	if plain := telegramtest.Plain(prog.Text); !strings.Contains(plain, "step ") || !strings.Contains(plain, "loss ") || !strings.Contains(plain, "%") {
		t.Errorf("progress text:\n%s", plain)
	}

	// 停止 asks first.
	from = len(fake.Messages(operator))
	fake.Press(operator, started, "停止 1")
	confirm := awaitMessage(t, fake, operator, from, "Stop run #1 (demo)?")
	if got, want := confirm.Buttons(), []string{"/stop 1 confirm", "/stop cancel"}; !slices.Equal(got, want) {
		t.Fatalf("confirmation buttons: got %q, want %q", got, want)
	}
	if labels := confirm.Markup.InlineKeyboard[0]; labels[0].Text != "确认 Yes" || labels[1].Text != "取消 No" {
		t.Errorf("confirmation labels %q %q", labels[0].Text, labels[1].Text)
	}
	if len(s.sup.Active()) != 1 {
		t.Fatal("the run stopped before it was confirmed")
	}
	from = len(fake.Messages(operator))
	fake.Press(operator, confirm, "/stop 1 confirm")
	awaitMessage(t, fake, operator, from, "stopping run #1")
	// The end report is durable: it goes through the outbox.
	awaitMessage(t, fake, operator, from, "run #1 (demo) stopped by user111 (telegram 111)")
	// The progress message's last edit is the outcome, without buttons.
	if !fake.Await(wait, func() bool {
		for _, m := range fake.Messages(operator) {
			if m.ID == prog.ID {
				prog = m
			}
		}
		return strings.Contains(prog.Text, "stopped") && prog.Markup == nil
	}) {
		t.Errorf("final progress edit: %q", prog.Text)
	}

	// A button of the old message, now that the run has ended.
	from = len(fake.Messages(operator))
	fake.Press(operator, started, "停止 1")
	awaitMessage(t, fake, operator, from, "Run #1 already ended: stopped.")

	ctx := context.Background()
	var items []history.OutboxItem
	if !fake.Await(wait, func() bool {
		items, _ = s.st.OutboxItems(ctx, 100)
		for _, it := range items {
			if it.Key == "run:1:ended" && !it.SentAt.IsZero() {
				return true
			}
		}
		return false
	}) {
		t.Errorf("outbox: %+v", items)
	}
	audit, err := s.st.AuditLog(ctx, history.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, e := range audit {
		if !e.Allowed || e.User != operator || e.Transport != "telegram" || e.Run != 1 {
			t.Errorf("audit: %+v", e)
		}
		cmds = append([]string{e.Command}, cmds...)
	}
	if got := strings.Join(cmds, " "); got != "train status plot stop stop stop" {
		t.Errorf("audited commands: %q", got)
	}
	// A handful of messages, not a flood: started, status, chart, progress,
	// confirm, stopping, ended, already ended.
	if msgs := fake.Messages(operator); len(msgs) > 10 {
		var texts []string
		for _, m := range msgs {
			texts = append(texts, telegramtest.Plain(m.Text))
		}
		t.Errorf("%d messages for one short run:\n%s", len(msgs), strings.Join(texts, "\n---\n"))
	}
}

func TestStrangersAndViewersAreRefused(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	s := newStack(t, fake, t.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}, Viewers: []int64{viewer}}, job: demoJob(200_000, 10*time.Millisecond)})

	fake.UserSays(stranger, "开始")
	refusal := awaitMessage(t, fake, stranger, 0, "not allowed")
	if !strings.Contains(refusal.Text, "999") || refusal.Markup != nil {
		t.Errorf("the refusal should give the user id and nothing else: %q", refusal.Text)
	}
	// A stranger pressing a forwarded button is refused too: as the
	// press's toast, not in the chat.
	q := fake.Press(stranger, refusal, "停止 1")
	var toast string
	if !fake.Await(wait, func() bool { var ok bool; toast, ok = fake.Toast(q); return ok }) {
		t.Fatal("the button press of a stranger was not answered")
	}
	if !strings.Contains(toast, "not allowed") || !strings.Contains(toast, "999") {
		t.Errorf("the press's toast %q is not the refusal", toast)
	}
	fake.UserSays(viewer, "开始")
	awaitMessage(t, fake, viewer, 0, "Viewers can look but not start a run")
	from := len(fake.Messages(viewer))
	fake.UserSays(viewer, "状态")
	awaitMessage(t, fake, viewer, from, "No run yet")

	ctx := context.Background()
	if runs, err := s.st.Runs(ctx, history.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("runs after refusals: %v %v", runs, err)
	}
	if n := len(s.sup.Active()); n != 0 {
		t.Errorf("%d runs active", n)
	}
	audit, err := s.st.AuditLog(ctx, history.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range audit {
		if !e.Allowed {
			refused++
		}
	}
	if len(audit) != 4 || refused != 3 {
		t.Errorf("audit: %+v", audit)
	}
	if n := len(fake.Messages(stranger)); n != 1 {
		t.Errorf("the stranger got %d messages, want the one refusal (the press's was a toast)", n)
	}
}

func TestGroupCommandsAndUnknownWords(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	const group = -100200
	newStack(t, fake, t.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}, Chats: []int64{group}}})
	fake.GroupSays(group, operator, "/status@TrainTestBot")
	awaitMessage(t, fake, group, 0, "No run yet")
	from := len(fake.Messages(group))
	fake.GroupSays(group, operator, "/frobnicate@TrainTestBot")
	awaitMessage(t, fake, group, from, "I don't know \"frobnicate\"")
	// Outside the allowed chats even an operator is refused.
	fake.UserSays(operator, "状态")
	awaitMessage(t, fake, operator, 0, "not allowed")
}

func Test429StormDelaysButLosesNoAlert(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	s := newStack(t, fake, t.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}}})
	ctx := context.Background()
	if err := s.st.SetSubscribed(ctx, telegram.Name, operator, false); err != nil { // muted: alerts still come
		t.Fatal(err)
	}
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.TooManyRequests, RetryAfter: 1, Times: 5})
	for i := range 5 {
		s.notifier.Push(chat.Reply{Text: fmt.Sprintf("alert %d: GPU 0 out of memory", i), Kind: chat.KindAlert, Key: fmt.Sprintf("storm:%d", i)})
	}
	// The same alert raised twice is delivered once.
	s.notifier.Push(chat.Reply{Text: "alert 0: GPU 0 out of memory", Kind: chat.KindAlert, Key: "storm:0"})
	if !fake.Await(30*time.Second, func() bool { return len(fake.Messages(operator)) >= 5 }) {
		t.Fatalf("got %d of 5 alerts", len(fake.Messages(operator)))
	}
	var texts []string
	for _, m := range fake.Messages(operator) {
		texts = append(texts, m.Text)
	}
	want := []string{"alert 0: GPU 0 out of memory", "alert 1: GPU 0 out of memory", "alert 2: GPU 0 out of memory", "alert 3: GPU 0 out of memory", "alert 4: GPU 0 out of memory"}
	if !slices.Equal(texts, want) {
		t.Errorf("got %q, want each alert once, in order", texts)
	}
	reqs := fake.Requests("sendMessage")
	storm := 0
	for i, r := range reqs {
		if r.Status != 429 {
			continue
		}
		storm++
		if i+1 < len(reqs) && reqs[i+1].At.Sub(r.At) < time.Second {
			t.Errorf("request %d came %v after a 429 with retry_after 1", i+1, reqs[i+1].At.Sub(r.At))
		}
	}
	if storm != 5 {
		t.Errorf("%d answers were 429, want 5", storm)
	}
	if !fake.Await(wait, func() bool { p, err := s.st.PendingOutbox(ctx, ""); return err == nil && len(p) == 0 }) {
		t.Error("alerts still pending in the outbox")
	}
}

func TestAlertSurvivesARestart(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	dir := t.TempDir()
	access := command.Access{Operators: []int64{operator}}
	s := newStack(t, fake, dir, stackOptions{access: access})
	ctx := context.Background()
	if err := s.st.SetSubscribed(ctx, telegram.Name, operator, true); err != nil {
		t.Fatal(err)
	}
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.ServerError, Times: -1})
	s.notifier.Push(chat.Reply{Text: "💥 run #7 hit out-of-memory", Kind: chat.KindAlert, Key: "run:7:alert:oom"})
	if !fake.Await(wait, func() bool { return len(fake.Requests("sendMessage")) >= 2 }) {
		t.Fatal("the alert was not tried")
	}
	s.close(t)
	if n := len(fake.Messages(operator)); n != 0 {
		t.Fatalf("delivered %d while the API was failing", n)
	}
	fake.ClearFaults()
	newStack(t, fake, dir, stackOptions{access: access})
	awaitMessage(t, fake, operator, 0, "run #7 hit out-of-memory")
	if n := count(fake, operator, "out-of-memory"); n != 1 {
		t.Errorf("delivered %d times", n)
	}
}

// TestScheduledReportIsAMessageWithCharts: a scheduled report during a run
// is a message of its own with the charts, not an edit of the run's live
// progress message (which has no room for charts).
func TestScheduledReportIsAMessageWithCharts(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	s := newStack(t, fake, t.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}}, job: demoJob(200_000, 10*time.Millisecond)})
	fake.UserSays(operator, "订阅")
	awaitMessage(t, fake, operator, 0, "Subscribed")
	from := len(fake.Messages(operator))
	fake.UserSays(operator, "开始")
	awaitMessage(t, fake, operator, from, "run #1 started: demo")
	var prog telegramtest.Message
	if !fake.Await(wait, func() bool {
		for _, m := range fake.Messages(operator) {
			if m.Silent {
				prog = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("no live progress message")
	}
	chart := pngBytes(t, color.White)
	charts := func(context.Context, i18n.Lang, *trainer.Run) []chat.Image {
		return []chat.Image{{Name: "loss.png", PNG: chart, Caption: "run #1 loss"}}
	}
	from = len(fake.Messages(operator))
	s.notifier.PushIn(notify.ReportReply(context.Background(), s.sup, s.st, charts, "morning", time.Now()))
	report := awaitMessage(t, fake, operator, from, "⏰ morning report")
	if report.ID == prog.ID {
		t.Error("the report replaced the live progress message")
	}
	if !fake.Await(wait, func() bool {
		for _, m := range fake.Messages(operator) {
			if m.Method == "sendPhoto" && bytes.Equal(m.Photo, chart) {
				return true
			}
		}
		return false
	}) {
		t.Error("the report's chart was not sent")
	}
}

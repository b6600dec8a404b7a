package telegram_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/store"
)

const token = "123456789:AAE-TestToken_secretValue0123456789"

// wait bounds every wait for the bot; generous, because a chart takes
// seconds to draw under the race detector on a busy machine.
const wait = 60 * time.Second

// logBuffer collects log output from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fast pacing and short pauses keep the tests quick.
func testOptions(fake *telegramtest.Server, logs *logBuffer) telegram.Options {
	return optionsFor(fake.Token, fake.URL, logs)
}

func optionsFor(token, endpoint string, logs *logBuffer) telegram.Options {
	fast := []chat.Window{{N: 1000, Per: time.Millisecond}}
	return telegram.Options{
		Token: token, APIEndpoint: endpoint, PollTimeout: time.Second, Logger: newLogger(logs),
		PrivatePace: fast, GroupPace: fast, GlobalPace: fast,
		RetryPause: 20 * time.Millisecond, MaxPollBackoff: 200 * time.Millisecond, HandleGrace: 2 * time.Second,
	}
}

// fastRetries keeps the tests quick; the chart path keeps its real shape.
var fastRetries = deliver.Policy{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, EphemeralTries: 3, ChartTries: 2, ChartPause: 50 * time.Millisecond}

// start runs a transport, its answers delivered by a pipeline, until the
// test ends.
func start(t *testing.T, opts telegram.Options, h chat.Handler) *telegram.Transport {
	t.Helper()
	tr, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, tr, h)
	t.Cleanup(func() { stop() })
	return tr
}

// run starts tr.Receive, answering with h through a pipeline of its own,
// and returns a func that stops both and returns Receive's error.
func run(t testing.TB, tr *telegram.Transport, h chat.Handler) func() error {
	t.Helper()
	return runWith(t, tr, h, deliver.Options{Policy: fastRetries})
}

func runWith(t testing.TB, tr *telegram.Transport, h chat.Handler, o deliver.Options) func() error {
	t.Helper()
	o.Senders = []chat.Sender{tr}
	p := deliver.New(o)
	p.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Receive(ctx, p.Answer(h)) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(wait):
				err = errors.New("Receive did not return")
			}
			p.Close(context.Background())
		})
		return err
	}
}

// sendAll makes one attempt at the whole reply.
func sendAll(tr *telegram.Transport, to int64, r chat.Reply) error {
	_, err := tr.Send(context.Background(), to, r, 0)
	return err
}

// recorder is a handler that remembers what it got and answers with reply.
type recorder struct {
	mu    sync.Mutex
	got   []chat.Message
	reply func(chat.Message) chat.Reply
}

func (r *recorder) Handle(_ context.Context, m chat.Message) chat.Reply {
	r.mu.Lock()
	r.got = append(r.got, m)
	f := r.reply
	r.mu.Unlock()
	if f == nil {
		return chat.Reply{Text: "echo: " + m.Text}
	}
	return f(m)
}

func (r *recorder) messages() []chat.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Message(nil), r.got...)
}

func awaitMessages(t *testing.T, fake *telegramtest.Server, chat int64, n int) []telegramtest.Message {
	t.Helper()
	var msgs []telegramtest.Message
	if !fake.Await(wait, func() bool { msgs = fake.Messages(chat); return len(msgs) >= n }) {
		t.Fatalf("chat %d: got %d messages, want %d: %+v", chat, len(msgs), n, msgs)
	}
	return msgs
}

func pngBytes(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := range 8 {
		for y := range 8 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestConnectRegistersCommands(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr := start(t, testOptions(fake, &logs), &recorder{})
	if !fake.Await(wait, func() bool { return len(fake.Commands()) > 0 }) {
		t.Fatal("setMyCommands was not called")
	}
	cmds := fake.Commands()
	if len(cmds) != len(chat.Commands) {
		t.Errorf("got %d commands, want %d", len(cmds), len(chat.Commands))
	}
	for _, c := range cmds {
		if c.Command == "train" && (!strings.Contains(c.Description, "开始训练") || !strings.Contains(c.Description, "开始")) {
			t.Errorf("train's description %q should be Chinese and give the word 开始", c.Description)
		}
		if c.Command == "start" {
			t.Error("/start must not be in the menu")
		}
	}
	if got := tr.Self().UserName; got != "TrainTestBot" {
		t.Errorf("Self: got %q", got)
	}
}

// With language = "en" the menu is in English.
func TestCommandMenuInEnglish(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	opts := testOptions(fake, &logs)
	opts.Lang = i18n.En
	start(t, opts, &recorder{})
	if !fake.Await(wait, func() bool { return len(fake.Commands()) > 0 }) {
		t.Fatal("setMyCommands was not called")
	}
	for _, c := range fake.Commands() {
		if c.Command == "train" && c.Description != "start a run" {
			t.Errorf("train's description %q, want start a run", c.Description)
		}
	}
}

func TestReplyButtonsAndEscaping(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{reply: func(m chat.Message) chat.Reply {
		return chat.Reply{Text: "loss < 0.5 & <b>bold?</b>", RunID: 7, Buttons: [][]chat.Button{{{Label: "停止 Stop", Data: "停止"}, {Label: "状态 Status", Data: "状态"}}}}
	}}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(111, "状态")
	msgs := awaitMessages(t, fake, 111, 1)
	m := msgs[0]
	if m.ParseMode != "HTML" || m.Text != "loss &lt; 0.5 &amp; &lt;b&gt;bold?&lt;/b&gt;" {
		t.Errorf("got %q in %q mode", m.Text, m.ParseMode)
	}
	if got := strings.Join(m.Buttons(), "|"); got != "停止 7|状态 7" {
		t.Errorf("buttons: got %q, want the run id added", got)
	}
	got := rec.messages()
	if len(got) != 1 || got[0].Text != "状态" || got[0].User.ID != 111 || got[0].Chat != 111 || got[0].Transport != "telegram" || got[0].Group {
		t.Errorf("handler got %+v", got)
	}
}

func TestPageButtonOpensTheURL(t *testing.T) {
	// [网页 Open] is a URL button: Telegram opens the page, nothing comes
	// back to the bot, and the run id is not added to it.
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	const page = "https://gpu.example.org/trainbot/runs/7?t=r7.1900000000.abc"
	rec := &recorder{reply: func(m chat.Message) chat.Reply {
		return chat.Reply{Text: "run 7", RunID: 7, Buttons: [][]chat.Button{{{Label: "状态 Status", Data: "状态"}}, {{Label: "网页 Open", URL: page}}}}
	}}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(111, "状态")
	m := awaitMessages(t, fake, 111, 1)[0]
	if m.Markup == nil || len(m.Markup.InlineKeyboard) != 2 {
		t.Fatalf("got markup %+v, want two rows", m.Markup)
	}
	b := m.Markup.InlineKeyboard[1][0]
	if b.Text != "网页 Open" || b.URL == nil || *b.URL != page || b.CallbackData != nil {
		t.Errorf("got button %+v, want a URL button to %s", b, page)
	}
}

func TestLongTextIsSplit(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	long := strings.Repeat("step 100 loss 0.1234 <x>\n", 400) // 10,000 characters
	rec := &recorder{reply: func(chat.Message) chat.Reply {
		return chat.Reply{Text: long, Buttons: [][]chat.Button{{{Label: "帮助", Data: "帮助"}}}}
	}}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(5, "日志 400")
	msgs := awaitMessages(t, fake, 5, 3)
	var joined strings.Builder
	for i, m := range msgs {
		plain := telegramtest.Plain(m.Text)
		if n := len([]rune(plain)); n > 4096 {
			t.Errorf("part %d: %d characters", i, n)
		}
		if (m.Markup != nil) != (i == len(msgs)-1) {
			t.Errorf("part %d: buttons belong under the last part only", i)
		}
		joined.WriteString(plain + "\n")
	}
	if joined.String() != long {
		t.Error("the parts do not add up to the text")
	}
}

// failNth fails the nth call of a method, once, as if the connection broke
// before the request reached Telegram.
type failNth struct {
	method string
	n      int32
	calls  atomic.Int32
}

func (f *failNth) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/"+f.method) && f.calls.Add(1) == f.n {
		return nil, errors.New("connection reset by peer")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRetriedLongReplyResumes: when a long reply fails after its first part
// went out, Send says how far it got, and the next attempt (the lane's)
// sends the rest, not the first part twice.
func TestRetriedLongReplyResumes(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	opts := testOptions(fake, &logs)
	opts.HTTPClient = &http.Client{Transport: &failNth{method: "sendMessage", n: 2}}
	tr, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("step 100 loss 0.1234 <x>\n", 400) // 10,000 characters: 3 parts
	r := chat.Reply{Text: long, Kind: chat.KindAlert, Key: "run:7:ended", Buttons: [][]chat.Button{{{Label: "帮助", Data: "帮助"}}}}
	ctx := context.Background()
	done, err := tr.Send(ctx, 5, r, 0)
	if err == nil || done != 1 || chat.IsPermanent(err) {
		t.Fatalf("the second part failed: got %d sent and %v, want 1 and a temporary error", done, err)
	}
	if n, err := tr.Send(ctx, 5, r, done); err != nil || n != 3 {
		t.Fatalf("second attempt: %d %v", n, err)
	}
	msgs := fake.Messages(5)
	var joined strings.Builder
	for _, m := range msgs {
		joined.WriteString(telegramtest.Plain(m.Text) + "\n")
	}
	if len(msgs) != 3 || joined.String() != long {
		t.Errorf("got %d messages, want the 3 parts once each", len(msgs))
	}
	if len(msgs) == 3 && (msgs[2].Markup == nil || msgs[0].Markup != nil) {
		t.Error("the buttons belong under the last part")
	}
	if sendAll(tr, 5, r) != nil || len(fake.Messages(5)) != 6 {
		t.Errorf("a reply sent from its first part again: %d messages, want 6", len(fake.Messages(5)))
	}
}

func TestGroupAddressing(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{}
	start(t, testOptions(fake, &logs), rec)
	const group = -1001
	fake.GroupSays(group, 7, "/status@OtherBot")
	fake.GroupSays(group, 7, "hello everyone, the model looks fine")
	fake.GroupSays(group, 7, "/status@TrainTestBot")
	fake.GroupSays(group, 7, "状态")
	fake.GroupSays(group, 7, "@TrainTestBot 画图")
	msgs := awaitMessages(t, fake, group, 3)
	got := rec.messages()
	var texts []string
	for _, m := range got {
		texts = append(texts, m.Text)
		if !m.Group || m.Chat != group {
			t.Errorf("message %+v should be a group message of chat %d", m, group)
		}
	}
	if want := "/status@TrainTestBot|状态|画图"; strings.Join(texts, "|") != want {
		t.Errorf("handled %q, want %q", strings.Join(texts, "|"), want)
	}
	for _, m := range msgs {
		if m.ReplyTo == 0 {
			t.Errorf("a reply in a group should quote the command: %+v", m)
		}
	}
}

// TestIgnoredUpdatesNeverCrash: what has no text or no sender is not
// handed on; an edit and a channel post are, marked as such (the router
// audits them and carries neither out).
func TestIgnoredUpdatesNeverCrash(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{reply: func(m chat.Message) chat.Reply {
		if m.Edited || m.Channel {
			return chat.Reply{}
		}
		return chat.Reply{Text: "ok"}
	}}
	start(t, testOptions(fake, &logs), rec)
	from := telegramtest.User(9)
	dm := &tgbotapi.Chat{ID: 9, Type: "private"}
	fake.Push(tgbotapi.Update{Message: &tgbotapi.Message{MessageID: 1, From: from, Chat: dm, Sticker: &tgbotapi.Sticker{FileID: "s"}}})
	fake.Push(tgbotapi.Update{Message: &tgbotapi.Message{MessageID: 2, From: from, Chat: dm, Photo: []tgbotapi.PhotoSize{{FileID: "p"}}, Caption: "开始"}})
	fake.Push(tgbotapi.Update{EditedMessage: &tgbotapi.Message{MessageID: 3, From: from, Chat: dm, Text: "开始"}})
	fake.Push(tgbotapi.Update{Message: &tgbotapi.Message{MessageID: 4, Chat: dm, Text: "no sender"}})
	fake.Push(tgbotapi.Update{ChannelPost: &tgbotapi.Message{MessageID: 5, Chat: &tgbotapi.Chat{ID: -5, Type: "channel"}, Text: "开始"}})
	fake.Push(tgbotapi.Update{})
	fake.UserSays(9, strings.Repeat("长", 10000))
	fake.UserSays(9, "帮助")
	awaitMessages(t, fake, 9, 2)
	var got []chat.Message
	if !fake.Await(wait, func() bool { got = rec.messages(); return len(got) >= 4 }) {
		t.Fatalf("handler got %d messages, want 4", len(got))
	}
	var edits, posts, texts int
	var last string // of chat 9, the other (the channel) is handled beside it
	for _, m := range got {
		switch {
		case m.Edited && m.Chat == 9 && m.Text == "开始":
			edits++
		case m.Channel && m.Chat == -5 && m.User.ID == 0 && m.Text == "开始":
			posts++
		case !m.Edited && !m.Channel && m.Chat == 9:
			texts++
		}
		if m.Chat == 9 {
			last = m.Text
		}
	}
	if len(got) != 4 || edits != 1 || posts != 1 || texts != 2 || last != "帮助" {
		t.Fatalf("handler got %d messages (%d edits, %d channel posts, %d texts, the last %.20q), want the edit, the channel post and the two text messages",
			len(got), edits, posts, texts, last)
	}
	if n := len(fake.Messages(9)); n != 2 {
		t.Errorf("got %d replies, want 2", n)
	}
}

func TestUnreadableUpdateIsSkipped(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{}
	start(t, testOptions(fake, &logs), rec)
	fake.PushRaw(`{"message": {"message_id": "not a number", "chat": {"id": 4, "type": "private"}, "text": "开始"}}`)
	fake.UserSays(4, "帮助")
	awaitMessages(t, fake, 4, 1)
	if got := rec.messages(); len(got) != 1 || got[0].Text != "帮助" {
		t.Errorf("handled %+v", got)
	}
	if !strings.Contains(logs.String(), "update skipped") {
		t.Error("the skipped update should be logged")
	}
}

func TestOldOffsetIsNotUsed(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A week without updates: Telegram may number the next one below the
	// stored offset.
	old := time.Now().Add(-7 * 24 * time.Hour).Unix()
	if err := st.Set(context.Background(), "telegram.offset.4242", fmt.Sprintf("999999 %d", old)); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts := testOptions(fake, &logs)
	opts.State = st
	start(t, opts, &recorder{})
	fake.UserSays(8, "状态")
	awaitMessages(t, fake, 8, 1)
}

func TestHandlerPanicDoesNotStopTheBot(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{reply: func(m chat.Message) chat.Reply {
		if m.Text == "boom" {
			panic("handler bug")
		}
		return chat.Reply{Text: "fine"}
	}}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(3, "boom")
	fake.UserSays(3, "again")
	msgs := awaitMessages(t, fake, 3, 1)
	if msgs[0].Text != "fine" {
		t.Errorf("got %q", msgs[0].Text)
	}
	if !strings.Contains(logs.String(), "handler bug") {
		t.Error("the panic should be logged")
	}
}

func TestCallbackIsAnswered(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	rec := &recorder{}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(11, "开始")
	msgs := awaitMessages(t, fake, 11, 1)
	q := fake.Press(11, msgs[0], "状态 3")
	awaitMessages(t, fake, 11, 2)
	// Answered once the press was handled, with nothing to show.
	if !fake.Await(wait, func() bool { return fake.Answered(q) }) {
		t.Error("the callback query was not answered")
	}
	if toast, _ := fake.Toast(q); toast != "" {
		t.Errorf("a member's press was answered with %q", toast)
	}
	got := rec.messages()
	if len(got) != 2 || !got[1].Callback || got[1].Text != "状态 3" || got[1].Chat != 11 {
		t.Errorf("handler got %+v", got)
	}
}

// TestCallsWithoutAChatAreTriedOnce: answerCallbackQuery and setMyCommands
// send nothing to a chat; like every call, each is one attempt, and a 429
// on them holds back nothing.
func TestCallsWithoutAChatAreTriedOnce(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	fake.Inject(telegramtest.Fault{Method: "setMyCommands", Kind: telegramtest.TooManyRequests, RetryAfter: 1})
	fake.Inject(telegramtest.Fault{Method: "answerCallbackQuery", Kind: telegramtest.TooManyRequests, RetryAfter: 1})
	start(t, testOptions(fake, &logs), &recorder{})
	fake.UserSays(11, "开始")
	msgs := awaitMessages(t, fake, 11, 1)
	fake.Press(11, msgs[0], "状态 3")
	awaitMessages(t, fake, 11, 2)
	for _, method := range []string{"setMyCommands", "answerCallbackQuery"} {
		// The menu is registered beside the polls: it may come a moment
		// after the answers.
		fake.Await(5*time.Second, func() bool { return len(fake.Requests(method)) > 0 })
		if reqs := fake.Requests(method); len(reqs) != 1 || reqs[0].Status != 429 {
			t.Errorf("%s: got %d calls: %+v, want the one refused", method, len(reqs), reqs)
		}
	}
	// The menu is registered beside the polls: its log line may come a
	// moment after the refusal.
	if !fake.Await(wait, func() bool { return strings.Contains(logs.String(), "command menu not registered") }) {
		t.Error("the menu's failure should be logged")
	}
}

func TestPhotoAndAlbum(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loss, mem := pngBytes(t, color.RGBA{R: 200, A: 255}), pngBytes(t, color.RGBA{B: 200, A: 255})
	if n, err := tr.Send(ctx, 21, chat.Reply{Images: []chat.Image{{Name: "run-1-loss.png", PNG: loss, Caption: "run #1 loss <raw & smoothed>"}}}, 0); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if n, err := tr.Send(ctx, 21, chat.Reply{Images: []chat.Image{{Name: "loss.png", PNG: loss, Caption: "loss"}, {Name: "memory.png", PNG: mem, Caption: "GPU memory"}}}, 0); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if n := len(fake.Requests("sendPhoto")); n != 1 {
		t.Errorf("sendPhoto calls: got %d, want 1", n)
	}
	if n := len(fake.Requests("sendMediaGroup")); n != 1 {
		t.Errorf("sendMediaGroup calls: got %d, want 1 for two charts", n)
	}
	msgs := fake.Messages(21)
	if len(msgs) != 3 {
		t.Fatalf("got %d messages, want 3", len(msgs))
	}
	wantCaptions := []string{"run #1 loss &lt;raw &amp; smoothed&gt;", "loss", "GPU memory"}
	for i, m := range msgs {
		img, err := png.Decode(bytes.NewReader(m.Photo))
		if err != nil {
			t.Errorf("message %d: photo is not a PNG: %v", i, err)
			continue
		}
		if img.Bounds().Dx() != 8 {
			t.Errorf("message %d: got a %v image", i, img.Bounds())
		}
		if m.Text != wantCaptions[i] {
			t.Errorf("message %d: caption %q, want %q", i, m.Text, wantCaptions[i])
		}
	}
	if !bytes.Equal(msgs[2].Photo, mem) || msgs[1].Method != "sendMediaGroup" {
		t.Error("the album's second photo should be the memory chart")
	}
}

// TestDeliveryKeepsTelegramsPace: the limits Telegram's Pace gives are kept
// by the pipeline: three at once in a chat, then no more than three in any
// 3 s; another chat is not held up.
func TestDeliveryKeepsTelegramsPace(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	opts := testOptions(fake, &logs)
	opts.PrivatePace, opts.GroupPace, opts.GlobalPace = telegram.DefaultPrivatePace, telegram.DefaultGroupPace, telegram.DefaultGlobalPace
	tr, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := deliver.New(deliver.Options{Senders: []chat.Sender{tr}, Policy: fastRetries})
	p.Start()
	defer p.Close(context.Background())
	for i := range 5 {
		p.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: 77}, Reply: chat.Reply{Text: fmt.Sprint("alert ", i)}, Durable: true})
	}
	p.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: 78}, Reply: chat.Reply{Text: "other chat"}, Durable: true})
	msgs := awaitMessages(t, fake, 77, 5)
	other := awaitMessages(t, fake, 78, 1)
	if other[0].Sent.Sub(msgs[0].Sent) > time.Second {
		t.Errorf("the other chat waited %s for the first one's pace", other[0].Sent.Sub(msgs[0].Sent))
	}
	for i := 3; i < len(msgs); i++ {
		if gap := msgs[i].Sent.Sub(msgs[i-3].Sent); gap < 3*time.Second-50*time.Millisecond {
			t.Errorf("messages %d and %d went %s apart: 4 within 3 s", i-3, i, gap)
		}
	}
}

func TestUpload429HonoursRetryAfter(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	// The library reports an upload's 429 with Code 0: only RetryAfter says it.
	fake.Inject(telegramtest.Fault{Method: "sendPhoto", Kind: telegramtest.TooManyRequests, RetryAfter: 1})
	_, err = tr.Send(context.Background(), 31, chat.Reply{Images: []chat.Image{{PNG: pngBytes(t, color.Black), Caption: "c"}}}, 0)
	if permanent, after := chat.Classify(err); permanent || after != time.Second {
		t.Fatalf("got %v (permanent %v, after %s), want a retry after 1s", err, permanent, after)
	}
	// Through the pipeline: the chart goes once the retry_after passed.
	p := deliver.New(deliver.Options{Senders: []chat.Sender{tr}, Policy: fastRetries})
	p.Start()
	defer p.Close(context.Background())
	fake.Inject(telegramtest.Fault{Method: "sendPhoto", Kind: telegramtest.TooManyRequests, RetryAfter: 1})
	p.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: 31}, Reply: chat.Reply{Images: []chat.Image{{PNG: pngBytes(t, color.Black), Caption: "c"}}}, Durable: true})
	awaitMessages(t, fake, 31, 1)
	// The fake shows the message before it records the request.
	fake.Await(5*time.Second, func() bool { return len(fake.Requests("sendPhoto")) >= 3 })
	reqs := fake.Requests("sendPhoto")
	if len(reqs) != 3 || reqs[1].Status != 429 || reqs[2].Status != 200 {
		t.Fatalf("got %d sendPhoto calls: %+v", len(reqs), reqs)
	}
	if gap := reqs[2].At.Sub(reqs[1].At); gap < time.Second {
		t.Errorf("tried again after %v, before the 1 s retry_after", gap)
	}
}

func TestServerErrorsAndDroppedConnectionsAreRetried(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	p := deliver.New(deliver.Options{Senders: []chat.Sender{tr}, Policy: fastRetries})
	p.Start()
	defer p.Close(context.Background())
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.ServerError})
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.Drop})
	p.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: 41}, Reply: chat.Reply{Text: "hello"}, Durable: true})
	awaitMessages(t, fake, 41, 1)
	// The fake shows the message before it records the request.
	fake.Await(5*time.Second, func() bool { return len(fake.Requests("sendMessage")) >= 3 })
	reqs := fake.Requests("sendMessage")
	if len(reqs) != 3 || reqs[0].Fault != telegramtest.ServerError || reqs[1].Fault != telegramtest.Drop {
		t.Errorf("calls: %+v", reqs)
	}
	if msgs := fake.Messages(41); len(msgs) != 1 || msgs[0].Text != "hello" {
		t.Errorf("delivered %+v", msgs)
	}
	// A refusal is permanent, with the reason.
	err = sendAll(tr, 0, chat.Reply{Text: "to nowhere"})
	var te *telegram.Error
	if !errors.As(err, &te) || te.Code != 400 || !chat.IsPermanent(err) || chat.ReasonOf(err) != "Telegram answered 400 to sendMessage" {
		t.Errorf("got %v, want a permanent 400 telegram.Error", err)
	}
	if strings.Contains(logs.String(), token) || strings.Contains(err.Error(), token) {
		t.Error("the token leaked")
	}
}

func TestSlowAnswerIsCancelled(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.Slow, Delay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = tr.Send(ctx, 51, chat.Reply{Text: "late"}, 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("token in %q", err)
	}
	// A slow but finite answer is waited for.
	fake.Inject(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.Slow, Delay: 200 * time.Millisecond})
	if err := sendAll(tr, 51, chat.Reply{Text: "slow"}); err != nil {
		t.Fatal(err)
	}
}

// pollFailure is the log line of a failed getUpdates.
var pollFailure = regexp.MustCompile(`level=WARN msg="(connection lost; reconnecting|still cannot connect; retrying)".*getUpdates`)

func TestPollSurvivesFaults(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	fake.Inject(telegramtest.Fault{Method: "getMe", Kind: telegramtest.ServerError})
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.ServerError})
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.Drop})
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.TooManyRequests, RetryAfter: 1})
	rec := &recorder{}
	start(t, testOptions(fake, &logs), rec)
	fake.UserSays(61, "状态")
	awaitMessages(t, fake, 61, 1)
	polls := fake.Requests("getUpdates")
	var after429 time.Time
	for i, r := range polls {
		if r.Fault == telegramtest.TooManyRequests && i+1 < len(polls) {
			after429 = polls[i+1].At
			if gap := after429.Sub(r.At); gap < time.Second {
				t.Errorf("polled again %v after a 429 with retry_after 1", gap)
			}
		}
	}
	if after429.IsZero() {
		t.Error("no poll after the 429")
	}
	if strings.Contains(logs.String(), token) {
		t.Error("the token is in the log")
	}
	if n := len(pollFailure.FindAllString(logs.String(), -1)); n < 3 {
		t.Errorf("%d poll failures logged as warnings, want each of the 3:\n%s", n, logs.String())
	}
}

func TestTokenNeverLogged(t *testing.T) {
	// Nothing listens here: every call fails to connect.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	var logs logBuffer
	opts := optionsFor(token, endpoint, &logs)
	tr, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, tr, &recorder{})
	deadline := time.Now().Add(wait)
	for strings.Count(logs.String(), "cannot reach Telegram") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the log with a deadline
	}
	runErr := stop()
	sendErr := sendAll(tr, 1, chat.Reply{Text: "hi"})
	out := logs.String()
	if strings.Count(out, "cannot reach Telegram") < 3 {
		t.Fatalf("expected connection failures in the log:\n%s", out)
	}
	if sendErr == nil {
		t.Fatal("Send to an unreachable API should fail")
	}
	secret := strings.SplitN(token, ":", 2)[1]
	for name, s := range map[string]string{"log": out, "Receive error": errString(runErr), "Send error": sendErr.Error()} {
		if strings.Contains(s, secret) {
			t.Errorf("the token is in the %s:\n%s", name, s)
		}
	}
	if !strings.Contains(out, "<token>") {
		t.Errorf("the failing URL should show <token> instead of the token:\n%s", out)
	}

	// A refused token ends Run with an error that does not contain it.
	real := telegramtest.NewServer("999:other-token-value")
	defer real.Close()
	bad := testOptions(real, &logs)
	bad.Token = token
	tr2, err := telegram.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	err = tr2.Receive(context.Background(), func(context.Context, chat.Message) {})
	if err == nil || !strings.Contains(err.Error(), "token refused") || strings.Contains(err.Error(), secret) || !chat.IsPermanent(err) {
		t.Errorf("Receive with a wrong token: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestOffsetSurvivesRestart(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs logBuffer
	rec := &recorder{}
	opts := testOptions(fake, &logs)
	opts.State = st
	tr, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, tr, rec)
	fake.UserSays(71, "开始")
	awaitMessages(t, fake, 71, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The confirmations are lost, as when trainbot is killed before its
	// next poll: Telegram would send the update again.
	fake.Unconfirm()
	tr2, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := run(t, tr2, rec)
	defer stop2()
	fake.UserSays(71, "状态")
	awaitMessages(t, fake, 71, 2)
	var texts []string
	for _, m := range rec.messages() {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, "|"); got != "开始|状态" {
		t.Errorf("handled %q: 开始 must not be handled twice", got)
	}
}

func TestProgressIsEditedInPlace(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	buttons := [][]chat.Button{{{Label: "停止 Stop", Data: "停止"}}}
	for i, text := range []string{"▶️ run #5 · step 10/100", "▶️ run #5 · step 20/100", "▶️ run #5 · step 30/100", "▶️ run #5 · step 30/100"} {
		if _, err := tr.Send(ctx, 81, chat.Reply{Kind: chat.KindProgress, RunID: 5, Text: text, Buttons: buttons}, 0); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if _, err := tr.Send(ctx, 81, chat.Reply{Kind: chat.KindProgress, RunID: 5, Text: "✅ run #5 finished"}, 0); err != nil {
		t.Fatal(err)
	}
	// Another run gets its own message.
	if _, err := tr.Send(ctx, 81, chat.Reply{Kind: chat.KindProgress, RunID: 6, Text: "▶️ run #6"}, 0); err != nil {
		t.Fatal(err)
	}
	msgs := fake.Messages(81)
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want one per run: %+v", len(msgs), msgs)
	}
	m := msgs[0]
	if n := len(m.Edits); n != 3 {
		t.Errorf("got %d edits, want 3 (an unchanged text is not an error)", n)
	}
	if m.Text != "<b>✅ run #5 finished</b>" || m.Markup != nil {
		t.Errorf("final: %q with buttons %v", m.Text, m.Buttons())
	}
	if !m.Silent {
		t.Error("a progress message should not ring")
	}
	if n := len(fake.Requests("sendMessage")); n != 2 {
		t.Errorf("sendMessage calls: %d, want 2", n)
	}
}

// TestRefusedChartIsAnsweredAndHoldsNothingBack is the acceptance
// test: against a Bot API that answers 500 to every upload, 画图 gets a
// text answer with the reason and the host command within 10 s, and a 状态
// sent right after is answered before that. The pipeline has trainbot's
// own retry policy.
func TestRefusedChartIsAnsweredAndHoldsNothingBack(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	fake.Inject(telegramtest.Fault{Method: "sendMediaGroup", Kind: telegramtest.ServerError, Times: -1})
	fake.Inject(telegramtest.Fault{Method: "sendPhoto", Kind: telegramtest.ServerError, Times: -1})
	rec := &recorder{reply: func(m chat.Message) chat.Reply {
		if m.Text == "画图" {
			return chat.Reply{RunID: 12, Images: []chat.Image{
				{Name: "run-12-loss.png", PNG: pngBytes(t, color.White), Command: "trainbot plot 12 -o run-12-loss.png"},
				{Name: "run-12-memory.png", PNG: pngBytes(t, color.Black), Command: "trainbot plot 12 --kind memory -o run-12-memory.png"}}}
		}
		return chat.Reply{Text: "run #12 · demo · running for 4m10s"}
	}}
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	stop := runWith(t, tr, rec, deliver.Options{Store: openStore(t)}) // deliver.DefaultPolicy
	defer stop()
	asked := time.Now()
	fake.UserSays(91, "画图")
	fake.UserSays(91, "状态")
	msgs := awaitMessages(t, fake, 91, 2)
	answered := time.Since(asked)
	if !strings.Contains(msgs[0].Text, "running for") {
		t.Errorf("the first answer is %q: 状态 should not wait for the chart", msgs[0].Text)
	}
	plain := telegramtest.Plain(msgs[1].Text)
	for _, want := range []string{"2 charts not sent: Telegram answered 500 to sendMediaGroup", "trainbot plot 12 -o run-12-loss.png", "trainbot plot 12 --kind memory -o run-12-memory.png"} {
		if !strings.Contains(plain, want) {
			t.Errorf("the chart's answer %q lacks %q", plain, want)
		}
	}
	if answered > 10*time.Second {
		t.Errorf("画图 was answered after %s, want within 10 s", answered)
	}
	if n := len(fake.Requests("sendMediaGroup")); n != deliver.DefaultPolicy.ChartTries {
		t.Errorf("%d uploads, want %d", n, deliver.DefaultPolicy.ChartTries)
	}
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A token revoked while the bot runs (getUpdates answers 401) ends Receive
// with a permanent error: trying again cannot help.
func TestRevokedTokenEndsReceiveWithAPermanentError(t *testing.T) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	var logs logBuffer
	tr, err := telegram.New(testOptions(fake, &logs))
	if err != nil {
		t.Fatal(err)
	}
	p := deliver.New(deliver.Options{Senders: []chat.Sender{tr}, Policy: fastRetries})
	p.Start()
	defer p.Close(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Receive(context.Background(), p.Answer(&recorder{})) }()
	fake.UserSays(111, "状态")
	if !fake.Await(wait, func() bool { return len(fake.Requests("sendMessage")) > 0 }) {
		t.Fatal("the message was not answered")
	}
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.Unauthorized, Times: -1})
	select {
	case err = <-done:
	case <-time.After(wait):
		t.Fatal("Receive did not return after 401")
	}
	var te *telegram.Error
	if !errors.As(err, &te) || te.Code != 401 || !chat.IsPermanent(err) {
		t.Errorf("got %v, want a permanent error wrapping a 401 *telegram.Error", err)
	}
}

package dingtalk_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/chattest"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/dingtalk"
	"github.com/trainbot/trainbot/bot/inbound"
)

func TestMain(m *testing.M) { chattest.Main(m) }

const (
	operator = "manager4220"
	stranger = "staff999"
)

var access = command.Access{Members: map[string]map[string]command.Role{dingtalk.Name: {operator: command.RoleOperator}}}

func options(f *fake, kv inbound.KV, log *slog.Logger) dingtalk.Options {
	return dingtalk.Options{ClientID: f.clientID, ClientSecret: f.clientSecret, APIURL: f.URL, OAPIURL: f.URL, State: kv, Logger: log,
		PingInterval: time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		ThrottlePause: 300 * time.Millisecond, Pace: []chat.Window{{N: 1000, Per: time.Second}}}
}

func newStack(t *testing.T, f *fake, o chattest.Options) *chattest.Stack {
	t.Helper()
	o.Secrets = append(o.Secrets, f.clientSecret, accessToken, "tk-1")
	s := chattest.NewStack(t, o, func(kv inbound.KV, log *slog.Logger) chattest.Transport {
		tr, err := dingtalk.New(options(f, kv, log))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
	if !chattest.Await(f.connected) {
		t.Fatalf("the transport did not connect; log:\n%s", s.Logs.String())
	}
	return s
}

// await waits for a message to to that contains want, sent after the
// first from messages (those before the action waited for), and returns it.
func await(t *testing.T, f *fake, to string, from int, want string) sent {
	t.Helper()
	var found sent
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(to)[from:] {
			if strings.Contains(m.Text, want) {
				found = m
				return true
			}
		}
		return false
	}) {
		var texts []string
		for _, m := range f.Sent(to)[from:] {
			texts = append(texts, m.Path+" "+m.Key+": "+m.Text)
		}
		t.Fatalf("%s: nothing with %q after message %d; got:\n%s", to, want, from, strings.Join(texts, "\n---\n"))
	}
	return found
}

// count counts the messages to to after the first from that contain want.
func count(f *fake, to string, from int, want string) int {
	n := 0
	for _, m := range f.Sent(to)[from:] {
		if strings.Contains(m.Text, want) {
			n++
		}
	}
	return n
}

// buttons are the commands of the dtmd:// links in a markdown text.
func buttons(text string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`dtmd://dingtalkclient/sendMessage\?content=([^)]*)`).FindAllStringSubmatch(text, -1) {
		s, _ := url.QueryUnescape(m[1])
		out = append(out, s)
	}
	return out
}

func TestStrangerIsRefusedWithTheirID(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	f.Say(stranger, "", "m1", "开始")
	got := await(t, f, stranger, 0, "not allowed")
	if got.Path != "/robot/sendBySession" {
		t.Errorf("the answer went to %s, want the session webhook", got.Path)
	}
	if !strings.Contains(got.Text, stranger) || !strings.Contains(got.Text, "dingtalk_operators") {
		t.Errorf("the refusal lacks the id or the key: %q", got.Text)
	}
	if f.Acks("frame-m1") != 1 {
		t.Errorf("the message was acked %d times", f.Acks("frame-m1"))
	}
}

func TestOperatorStartsPlotsAndStopsWithButtons(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(200_000, 5*time.Millisecond), ConfirmStop: true})
	f.Say(operator, "", "m1", "开始")
	started := await(t, f, operator, 0, "run #1 started: demo")
	if got := buttons(started.Text); strings.Join(got, ",") != "停止 1,状态 1,画图 1" {
		t.Fatalf("buttons: got %q", got)
	}
	if !chattest.Await(func() bool { st, err := s.Sup.Status(1); return err == nil && st.Progress.Step >= 20 }) {
		t.Fatal("the demo printed no metric")
	}
	from := len(f.Sent(operator))
	f.Say(operator, "", "m2", "画图")
	var photo string
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(operator)[from:] {
			if m.Key == "sampleImageMsg" {
				photo = m.Photo
				return true
			}
		}
		return false
	}) {
		t.Fatal("画图 sent no image")
	}
	if _, err := png.Decode(bytes.NewReader(f.Media(photo))); err != nil {
		t.Errorf("the uploaded chart %q is not a PNG: %v", photo, err)
	}
	// A tap on a link sends its text as a message.
	from = len(f.Sent(operator))
	f.Say(operator, "", "m3", "停止 1")
	confirm := await(t, f, operator, from, "Stop run #1")
	var yes string
	for _, b := range buttons(confirm.Text) {
		if strings.Contains(b, "confirm") {
			yes = b
		}
	}
	if yes == "" {
		t.Fatalf("no confirmation link in %q", confirm.Text)
	}
	from = len(f.Sent(operator))
	f.Say(operator, "", "m4", yes)
	await(t, f, operator, from, "stopping run #1")
	if !chattest.Await(func() bool { _, err := s.Sup.Status(1); return err != nil }) {
		t.Fatal("the run did not stop")
	}
}

// The restart leaves run #1 running, as serve does: a repeat handled
// again after it would be answered that the run is already running, and
// one handled while no run is active would start run #2; both are counted.
func TestRedeliveredMessageIsHandledOnceEvenAfterARestart(t *testing.T) {
	f := newFake(t)
	dir := t.TempDir()
	o := chattest.Options{Access: access, Job: chattest.DemoJob(100_000, 5*time.Millisecond), Dir: dir}
	s := newStack(t, f, o)
	f.Say(operator, "", "dup", "开始")
	f.Say(operator, "", "dup", "开始")
	f.Say(operator, "", "later", "帮助")
	await(t, f, operator, 0, "run #1 started")
	await(t, f, operator, 0, "状态")
	if n := count(f, operator, 0, "started: demo") + count(f, operator, 0, "already running"); n != 1 {
		t.Errorf("the start was answered %d times", n)
	}
	if f.Acks("frame-dup") != 2 {
		t.Errorf("each push is acked, the repeat too: %d acks", f.Acks("frame-dup"))
	}
	s.Close(t)
	s2 := newStack(t, f, o)
	if _, err := s2.Sup.Status(1); err != nil {
		t.Fatalf("run #1 is not running after the restart: %v", err)
	}
	from := len(f.Sent(operator))
	f.Say(operator, "", "dup", "开始")
	f.Say(operator, "", "after", "历史")
	await(t, f, operator, from, "Recent runs") // 历史, answered after the repeat
	if n := count(f, operator, from, "started: demo") + count(f, operator, from, "already running"); n != 0 {
		t.Errorf("after the restart the repeat was answered (%d start answers)", n)
	}
	if _, err := s2.Sup.Stop(1, "test"); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func TestDroppedConnectionIsReestablishedAndTheEndReportArrives(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(300, 5*time.Millisecond)})
	f.Say(operator, "", "m1", "开始")
	await(t, f, operator, 0, "run #1 started")
	from := len(f.Sent(operator))
	dropped := time.Now()
	f.Drop()
	if !chattest.Await(func() bool { return f.Opened() >= 2 && f.connected() }) {
		t.Fatalf("no reconnect; log:\n%s", s.Logs.String())
	}
	t.Logf("reconnected %s after the drop", time.Since(dropped).Round(time.Millisecond))
	await(t, f, operator, from, "finished")
	if !f.Ping("p1") || !chattest.Await(func() bool { return f.Acks("p1") == 1 }) {
		t.Error("a SYSTEM ping on the new connection was not answered")
	}
}

func TestThrottlingIsWaitedOut(t *testing.T) {
	f := newFake(t)
	f.throttle["/robot/sendBySession"] = 1
	s := newStack(t, f, chattest.Options{Access: access})
	f.Say(operator, "", "m1", "帮助")
	await(t, f, operator, 0, "开始")
	if logs := s.Logs.String(); !strings.Contains(logs, "errcode 130101") || !strings.Contains(logs, "retry_in=300ms") {
		t.Errorf("the throttling was not waited out as asked:\n%s", logs)
	}
}

func TestGatewayRefusalsAreRetriedOrFinal(t *testing.T) {
	f := newFake(t)
	f.refuse = []int{500, 429}
	s := newStack(t, f, chattest.Options{Access: access})
	if n := strings.Count(s.Logs.String(), "connection lost; reconnecting"); n != 1 {
		t.Errorf("the failure was told %d times, want once", n)
	}
	f.Say(operator, "", "m1", "帮助")
	await(t, f, operator, 0, "开始")

	f2 := newFake(t)
	o := options(f2, nil, nil)
	o.ClientSecret = "wrong-secret"
	tr, err := dingtalk.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), chattest.Wait)
	defer cancel()
	err = tr.Receive(ctx, func(context.Context, chat.Message) {})
	if !chat.IsPermanent(err) || !strings.Contains(err.Error(), "client_secret") {
		t.Fatalf("Receive: %v, want a permanent error that names client_secret", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Error("the secret is in the error")
	}
}

// A push (no session webhook: an alert to a group after a restart) goes
// through the OpenAPI with an access token; a 429 there is a retry-after.
func TestPushGoesThroughTheOpenAPI(t *testing.T) {
	f := newFake(t)
	tr, err := dingtalk.New(options(f, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan chat.Message, 1)
	done := make(chan error, 1)
	go func() { done <- tr.Receive(ctx, func(_ context.Context, m chat.Message) { got <- m }) }()
	defer func() { cancel(); <-done }()
	if !chattest.Await(f.connected) {
		t.Fatal("no connection")
	}
	f.Say(operator, "grp-1", "g1", "订阅")
	m := <-got
	if !m.Group || m.User.Ref != operator {
		t.Fatalf("message %+v", m)
	}
	f.mu.Lock()
	f.throttle["/v1.0/robot/groupMessages/send"] = 1
	f.mu.Unlock()
	// A chart always goes through the upload and the OpenAPI.
	r := chat.Reply{Text: "⚠️ run #3 ran out of memory", Kind: chat.KindAlert,
		Images: []chat.Image{{Name: "loss.png", PNG: []byte("\x89PNG fake")}}}
	n, err := tr.Send(ctx, m.Chat, r, 1) // the text went out before
	if perm, after := chat.Classify(err); err == nil || perm || after != 300*time.Millisecond {
		t.Fatalf("Send: %d, %v; want a throttling retry-after of 300ms", n, err)
	}
	if n, err = tr.Send(ctx, m.Chat, r, n); err != nil || n != 2 {
		t.Fatalf("Send again: %d, %v", n, err)
	}
	s := f.Sent("grp-1")
	if len(s) != 1 || s[0].Key != "sampleImageMsg" || string(f.Media(s[0].Photo)) != "\x89PNG fake" {
		t.Fatalf("sent %+v", s)
	}
	f.mu.Lock()
	asks := f.tokenAsks
	f.mu.Unlock()
	if asks != 1 {
		t.Errorf("%d access tokens asked for, want 1 (cached)", asks)
	}
}

func TestLatency(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	p50, p99 := chattest.Latency(t, 40, func(i int) { f.Say(operator, "", fmt.Sprintf("lat%d", i), "帮助") }, func(i int) bool { return count(f, operator, 0, "开始") >= i+1 })
	t.Logf("message to reply: p50 %s, p99 %s (40 messages)", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
}

package feishu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/chattest"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/feishu"
	"github.com/trainbot/trainbot/bot/inbound"
)

func TestMain(m *testing.M) { chattest.Main(m) }

const (
	operator = "ou_operator1"
	stranger = "ou_stranger9"
	opChat   = "oc_p2p_operator"
)

var access = command.Access{Members: map[string]map[string]command.Role{feishu.Name: {operator: command.RoleOperator}}}

func options(f *fake, kv inbound.KV, log *slog.Logger) feishu.Options {
	return feishu.Options{AppID: f.appID, AppSecret: f.appSecret, Domain: f.URL, State: kv, Logger: log,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ThrottlePause: 300 * time.Millisecond,
		ChatPace: []chat.Window{{N: 1000, Per: time.Second}}, AppPace: []chat.Window{{N: 1000, Per: time.Second}}}
}

func newStack(t *testing.T, f *fake, o chattest.Options) *chattest.Stack {
	t.Helper()
	o.Secrets = append(o.Secrets, f.appSecret, "t-tenant-token", "tk-secret")
	s := chattest.NewStack(t, o, func(kv inbound.KV, log *slog.Logger) chattest.Transport {
		tr, err := feishu.New(options(f, kv, log))
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

// view is a sent message as the chat shows it: its text, its buttons'
// commands.
func view(s sent) (text string, buttons []string) {
	switch s.Type {
	case "text":
		var c struct{ Text string }
		_ = json.Unmarshal([]byte(s.Content), &c)
		return c.Text, nil
	case "interactive":
		var c struct {
			Elements []struct {
				Tag     string
				Content string
				Actions []struct {
					Value map[string]string
				}
			}
		}
		_ = json.Unmarshal([]byte(s.Content), &c)
		for _, e := range c.Elements {
			text += e.Content
			for _, a := range e.Actions {
				buttons = append(buttons, a.Value["cmd"])
			}
		}
	}
	return text, buttons
}

func await(t *testing.T, f *fake, chatID, want string) sent {
	t.Helper()
	var found sent
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(chatID) {
			if text, _ := view(m); strings.Contains(text, want) {
				found = m
				return true
			}
		}
		return false
	}) {
		var texts []string
		for _, m := range f.Sent(chatID) {
			text, _ := view(m)
			texts = append(texts, m.Type+": "+text)
		}
		t.Fatalf("%s: nothing with %q; got:\n%s", chatID, want, strings.Join(texts, "\n---\n"))
	}
	return found
}

func count(f *fake, chatID, want string) int {
	n := 0
	for _, m := range f.Sent(chatID) {
		if text, _ := view(m); strings.Contains(text, want) {
			n++
		}
	}
	return n
}

func TestStrangerIsRefusedWithTheirID(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	f.Say(stranger, "oc_p2p_stranger", "om_in1", "开始", false)
	got := await(t, f, "oc_p2p_stranger", "not allowed")
	if text, _ := view(got); !strings.Contains(text, stranger) || !strings.Contains(text, "feishu_operators") {
		t.Errorf("the refusal lacks the id or the key: %q", text)
	}
	var ack struct{ Code int }
	if err := json.Unmarshal(f.Ack("frame-om_in1"), &ack); err != nil || ack.Code != 200 {
		t.Errorf("the event was not acked with code 200: %q", f.Ack("frame-om_in1"))
	}
}

func TestOperatorStartsPlotsAndStopsWithButtons(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(200_000, 5*time.Millisecond), ConfirmStop: true})
	f.Say(operator, opChat, "om_in1", "开始", false)
	started := await(t, f, opChat, "run #1 started: demo")
	if _, b := view(started); started.Type != "interactive" || strings.Join(b, ",") != "停止 1,状态 1,画图 1" {
		t.Fatalf("the start answer is %s with buttons %q", started.Type, b)
	}
	if !chattest.Await(func() bool { st, err := s.Sup.Status(1); return err == nil && st.Progress.Step >= 20 }) {
		t.Fatal("the demo printed no metric")
	}
	f.Click(operator, opChat, "ev_c1", "画图 1")
	var key string
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(opChat) {
			if m.Type == "image" {
				var c struct {
					ImageKey string `json:"image_key"`
				}
				_ = json.Unmarshal([]byte(m.Content), &c)
				key = c.ImageKey
				return true
			}
		}
		return false
	}) {
		t.Fatal("画图 sent no image")
	}
	if _, err := png.Decode(bytes.NewReader(f.Image(key))); err != nil {
		t.Errorf("the uploaded chart is not a PNG: %v", err)
	}
	if ack := string(f.Ack("frame-ev_c1")); !strings.Contains(ack, `"code":200`) {
		t.Errorf("the click was not acked: %q", ack)
	}
	f.Click(operator, opChat, "ev_c2", "停止 1")
	confirm := await(t, f, opChat, "Stop run #1")
	var yes string
	_, b := view(confirm)
	for _, c := range b {
		if strings.Contains(c, "confirm") {
			yes = c
		}
	}
	if yes == "" {
		t.Fatalf("no confirmation button: %q", b)
	}
	f.Click(operator, opChat, "ev_c3", yes)
	await(t, f, opChat, "stopping run #1")
	if !chattest.Await(func() bool { _, err := s.Sup.Status(1); return err != nil }) {
		t.Fatal("the run did not stop")
	}
}

func TestRedeliveredMessageIsHandledOnceEvenAfterARestart(t *testing.T) {
	f := newFake(t)
	dir := t.TempDir()
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(100_000, 5*time.Millisecond), Dir: dir})
	f.Say(operator, opChat, "om_dup", "开始", false)
	f.Say(operator, opChat, "om_dup", "开始", false)
	f.Say(operator, opChat, "om_later", "帮助", false)
	await(t, f, opChat, "run #1 started")
	await(t, f, opChat, "状态")
	if n := count(f, opChat, "run #1 started") + count(f, opChat, "already"); n != 1 {
		t.Errorf("the start was answered %d times", n)
	}
	s.Close(t) // run #1 goes on running, as serve leaves it
	s2 := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(100_000, 5*time.Millisecond), Dir: dir})
	if _, err := s2.Sup.Status(1); err != nil {
		t.Fatalf("run #1 is not running after the restart: %v", err)
	}
	// Handled again, the repeat would say run #1 is already running (or
	// start run #2): only answers after the restart count.
	starts := func() int { return count(f, opChat, "started: demo") + count(f, opChat, "already running") }
	before, histories := starts(), count(f, opChat, "Recent runs")
	f.Say(operator, opChat, "om_dup", "开始", false)
	f.Say(operator, opChat, "om_after", "历史", false)
	if !chattest.Await(func() bool { return count(f, opChat, "Recent runs") > histories }) {
		t.Fatal("历史 after the restart was not answered")
	}
	if n := starts() - before; n != 0 {
		t.Errorf("after the restart the repeat was answered (%d start answers)", n)
	}
	if _, err := s2.Sup.Stop(1, "test"); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func TestDroppedConnectionIsReestablishedAndTheEndReportArrives(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(300, 5*time.Millisecond)})
	f.Say(operator, opChat, "om_in1", "开始", false)
	await(t, f, opChat, "run #1 started")
	dropped := time.Now()
	f.Drop()
	if !chattest.Await(func() bool { return f.Opened() >= 2 && f.connected() }) {
		t.Fatalf("no reconnect; log:\n%s", s.Logs.String())
	}
	t.Logf("reconnected %s after the drop", time.Since(dropped).Round(time.Millisecond))
	await(t, f, opChat, "finished")
	f.mu.Lock()
	pings := f.pings
	f.mu.Unlock()
	t.Logf("%d pings", pings)
}

func TestThrottlingIsWaitedOut(t *testing.T) {
	f := newFake(t)
	f.throttle["messages"] = 1
	s := newStack(t, f, chattest.Options{Access: access})
	f.Say(operator, opChat, "om_in1", "帮助", false)
	await(t, f, opChat, "开始")
	if logs := s.Logs.String(); !strings.Contains(logs, "code 99991400") || !strings.Contains(logs, "retry_in=300ms") {
		t.Errorf("the throttling was not waited out as asked:\n%s", logs)
	}
}

func TestEndpointRefusalsAreRetriedOrFinal(t *testing.T) {
	f := newFake(t)
	f.refuse = []int{500, 429}
	s := newStack(t, f, chattest.Options{Access: access})
	if n := strings.Count(s.Logs.String(), "connection lost; reconnecting"); n != 1 {
		t.Errorf("the failure was told %d times, want once", n)
	}
	f.Say(operator, opChat, "om_in1", "帮助", false)
	await(t, f, opChat, "开始")

	for _, c := range []struct {
		name   string
		status int
		secret string
	}{{"401", 401, f.appSecret}, {"bad secret", 0, "wrong-secret"}} {
		t.Run(c.name, func(t *testing.T) {
			f2 := newFake(t)
			if c.status != 0 {
				f2.refuse = []int{c.status}
			}
			o := options(f2, nil, nil)
			o.AppSecret = c.secret
			tr, err := feishu.New(o)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), chattest.Wait)
			defer cancel()
			err = tr.Receive(ctx, func(context.Context, chat.Message) {})
			if !chat.IsPermanent(err) || !strings.Contains(err.Error(), "app_secret") {
				t.Fatalf("Receive: %v, want a permanent error naming app_secret", err)
			}
			if strings.Contains(err.Error(), c.secret) {
				t.Error("the secret is in the error")
			}
		})
	}
}

// A run's live progress is one card, updated in place.
func TestProgressCardIsUpdatedInPlace(t *testing.T) {
	f := newFake(t)
	tr, err := feishu.New(options(f, nil, nil))
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
	f.Say(operator, "oc_group1", "om_g1", "@_user_1 订阅", true)
	m := <-got
	if !m.Group || m.Text != "订阅" {
		t.Fatalf("message %+v", m)
	}
	for i := range 3 {
		r := chat.Reply{Text: fmt.Sprintf("run #4 step %d", i), Kind: chat.KindProgress, RunID: 4}
		if _, err := tr.Send(ctx, m.Chat, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	s := f.Sent("oc_group1")
	if len(s) != 1 || s[0].Type != "interactive" {
		t.Fatalf("sent %+v, want one card", s)
	}
	f.mu.Lock()
	patches := f.patches[s[0].ID]
	f.mu.Unlock()
	if len(patches) != 2 || !strings.Contains(patches[1], "step 2") {
		t.Errorf("patches %q", patches)
	}
}

func TestLatency(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	p50, p99 := chattest.Latency(t, 40, func(i int) { f.Say(operator, opChat, fmt.Sprintf("om_lat%d", i), "帮助", false) }, func(i int) bool { return count(f, opChat, "开始") >= i+1 })
	t.Logf("message to reply: p50 %s, p99 %s (40 messages)", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
}

// toast reads the toast of a click's ack ("" without one).
func toast(t *testing.T, ack []byte) string {
	t.Helper()
	var res struct {
		Code int
		Data []byte // the handler's answer, as JSON
	}
	if err := json.Unmarshal(ack, &res); err != nil || res.Code != 200 {
		t.Fatalf("the click was not acked with code 200: %q (%v)", ack, err)
	}
	var rsp struct {
		Toast struct{ Type, Content string }
	}
	if err := json.Unmarshal(res.Data, &rsp); err != nil {
		t.Fatalf("the ack's answer %q: %v", res.Data, err)
	}
	return rsp.Toast.Content
}

// TestStrangersClickIsRefusedInItsToast: a stranger's clicks on a card in
// a group are answered with the refusal in the click's toast, which only
// they see; the group gets no refusal for them. A member's click shows its
// command.
func TestStrangersClickIsRefusedInItsToast(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	const group = "oc_group_team"
	for i := range 5 {
		f.Click(stranger, group, fmt.Sprint("ev_s", i), "停止 1")
	}
	for i := range 5 {
		id := fmt.Sprint("frame-ev_s", i)
		if !chattest.Await(func() bool { return f.Ack(id) != nil }) {
			t.Fatalf("click %d was not acked", i)
		}
		if got := toast(t, f.Ack(id)); !strings.Contains(got, "not allowed") || !strings.Contains(got, stranger) {
			t.Errorf("click %d's toast is %q, want the refusal", i, got)
		}
	}
	f.Click(operator, group, "ev_op", "状态")
	if !chattest.Await(func() bool { return f.Ack("frame-ev_op") != nil }) {
		t.Fatal("the operator's click was not acked")
	}
	if got := toast(t, f.Ack("frame-ev_op")); got != "状态" {
		t.Errorf("the operator's click's toast is %q, want its command", got)
	}
	await(t, f, group, "No run yet")
	s.Close(t)
	if n := count(f, group, "not allowed"); n != 0 {
		t.Errorf("the group got %d refusals for the clicks", n)
	}
}

// A payload split over frames is joined; an event of a type the bot does
// not handle is acked with 500, as the SDK's dispatcher does.
func TestSplitPayloadIsJoinedAndAnUnknownEventIsAcked500(t *testing.T) {
	f := newFake(t)
	tr, err := feishu.New(options(f, nil, nil))
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
	f.push("frame-other", map[string]any{"schema": "2.0", "header": map[string]string{"event_id": "ev_o", "event_type": "im.chat.updated_v1"}, "event": map[string]any{}})
	if !chattest.Await(func() bool { return f.Ack("frame-other") != nil }) {
		t.Fatal("the unknown event was not acked")
	}
	var ack struct{ Code int }
	if err := json.Unmarshal(f.Ack("frame-other"), &ack); err != nil || ack.Code != 500 {
		t.Errorf("the unknown event's ack: %q, want code 500", f.Ack("frame-other"))
	}
	content, _ := json.Marshal(map[string]string{"text": "状态 " + strings.Repeat("x", 3000)})
	payload, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]string{"event_id": "ev-split", "event_type": "im.message.receive_v1"},
		"event": map[string]any{"sender": map[string]any{"sender_id": map[string]string{"open_id": operator}},
			"message": map[string]any{"message_id": "om_split", "chat_id": opChat, "chat_type": "p2p", "message_type": "text", "content": string(content)}}})
	if !f.pushParts("frame-split", payload, 3) {
		t.Fatal("not pushed")
	}
	select {
	case m := <-got:
		if !strings.HasPrefix(m.Text, "状态 xxx") || len(m.Text) != len("状态 ")+3000 {
			t.Errorf("the joined message is %d bytes: %.20q…", len(m.Text), m.Text)
		}
	case <-time.After(chattest.Wait):
		t.Fatal("the split message was not delivered")
	}
	if !chattest.Await(func() bool { return f.Ack("frame-split") != nil }) {
		t.Fatal("the split message was not acked")
	}
}

// A tenant token Feishu calls invalid is renewed and the call made again,
// once; a refused app secret is a permanent failure that does not show the
// secret.
func TestTenantTokenIsRenewedAndARefusedSecretIsPermanent(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	f.Say(operator, opChat, "om_in1", "帮助", false)
	await(t, f, opChat, "开始")
	f.Revoke()
	f.Say(operator, opChat, "om_in2", "历史", false)
	if !chattest.Await(func() bool { return len(f.Sent(opChat)) >= 2 }) {
		t.Fatalf("no answer after the token was revoked; log:\n%s", s.Logs.String())
	}
	if n := f.Tokens(); n != 2 {
		t.Errorf("%d tokens fetched, want 2 (one renewal)", n)
	}

	chatNo := inbound.Number(opChat)
	o := options(f, memKV{"feishu.id." + fmt.Sprint(chatNo): opChat}, nil)
	o.AppSecret = "wrong-secret"
	tr, err := feishu.New(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Send(context.Background(), chatNo, chat.Reply{Text: "hi"}, 0)
	if !chat.IsPermanent(err) || !strings.Contains(err.Error(), "code 10014") {
		t.Fatalf("Send with a wrong secret: %v, want a permanent error with Feishu's code", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("the secret is in the error: %v", err)
	}
}

// memKV is an inbound.KV in memory, for one goroutine.
type memKV map[string]string

func (m memKV) Get(_ context.Context, k string) (string, bool, error) {
	v, ok := m[k]
	return v, ok, nil
}
func (m memKV) Set(_ context.Context, k, v string) error { m[k] = v; return nil }

// A pong's ClientConfig sets the ping interval, as the SDK lets it: with
// an hour from the discovery, pings come only once a pong says 1 s.
func TestPongSetsThePingInterval(t *testing.T) {
	f := newFake(t)
	f.pingInterval = 3600
	f.pongConfig = []byte(`{"PingInterval":1,"ReconnectCount":-1}`)
	newStack(t, f, chattest.Options{Access: access})
	if !chattest.Await(func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.pings > 0 }) {
		t.Fatal("no ping after the pong set a 1 s interval")
	}
}

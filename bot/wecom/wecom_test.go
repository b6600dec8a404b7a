package wecom_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/chattest"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/bot/wecom"
	"github.com/trainbot/trainbot/history"
)

func TestMain(m *testing.M) { chattest.Main(m) }

const (
	operator = "zhangsan"
	viewer   = "lisi"
	stranger = "wangwu"
)

var access = command.Access{Members: map[string]map[string]command.Role{
	wecom.Name: {operator: command.RoleOperator, viewer: command.RoleViewer}}}

// options are quick: short pings, short pauses, no pace.
func options(f *fake, kv inbound.KV, log *slog.Logger) wecom.Options {
	return wecom.Options{BotID: f.botID, Secret: f.secret, URL: f.URL, State: kv, Logger: log,
		PingInterval: time.Second, ReceiptTimeout: 2 * time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		ThrottlePause: 300 * time.Millisecond, Pace: []chat.Window{{N: 1000, Per: time.Second}}}
}

func newStack(t *testing.T, f *fake, o chattest.Options) *chattest.Stack {
	t.Helper()
	o.Secrets = append(o.Secrets, f.secret)
	s := chattest.NewStack(t, o, func(kv inbound.KV, log *slog.Logger) chattest.Transport {
		tr, err := wecom.New(options(f, kv, log))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
	if !chattest.Await(func() bool { return f.connected() }) {
		t.Fatalf("the transport did not connect; log:\n%s", s.Logs.String())
	}
	return s
}

// await waits for a message to chat that contains want, sent after the
// first from messages (those before the action waited for), and returns it.
func await(t *testing.T, f *fake, chatRef string, from int, want string) sent {
	t.Helper()
	var found sent
	ok := chattest.Await(func() bool {
		for _, m := range f.Sent(chatRef)[from:] {
			if strings.Contains(m.Text, want) {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		var texts []string
		for _, m := range f.Sent(chatRef)[from:] {
			texts = append(texts, m.Cmd+" "+m.MsgType+": "+m.Text)
		}
		t.Fatalf("%s: nothing with %q after message %d; got:\n%s", chatRef, want, from, strings.Join(texts, "\n---\n"))
	}
	return found
}

// count counts the messages to chat after the first from that contain want.
func count(f *fake, chatRef string, from int, want string) int {
	n := 0
	for _, m := range f.Sent(chatRef)[from:] {
		if strings.Contains(m.Text, want) {
			n++
		}
	}
	return n
}

func TestStrangerIsRefusedWithTheirID(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	f.Say(stranger, "", "m1", "开始")
	got := await(t, f, stranger, 0, "not allowed")
	if got.Cmd != "aibot_respond_msg" {
		t.Errorf("the answer went by %s, want a stream reply (aibot_respond_msg)", got.Cmd)
	}
	if !strings.Contains(got.Text, "wangwu") || !strings.Contains(got.Text, "wecom_operators") {
		t.Errorf("the refusal does not give the id and the key: %q", got.Text)
	}
}

func TestOperatorStartsPlotsAndStopsWithButtons(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(200_000, 5*time.Millisecond), ConfirmStop: true})

	f.Say(operator, "", "m1", "开始")
	await(t, f, operator, 0, "run #1 started: demo")
	var card sent
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(operator) {
			if m.MsgType == "template_card" {
				card = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("no button card after the start")
	}
	if want := []string{"停止 1", "状态 1", "画图 1"}; !slices.Equal(card.Buttons, want) {
		t.Fatalf("buttons: got %q, want %q", card.Buttons, want)
	}
	if !chattest.Await(func() bool { st, err := s.Sup.Status(1); return err == nil && st.Progress.Step >= 20 }) {
		t.Fatal("the demo printed no metric")
	}

	from := len(f.Sent(operator))
	f.Say(operator, "", "m2", "画图")
	var chart sent
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(operator)[from:] {
			if len(m.Images) > 0 {
				chart = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("画图 sent no image")
	}
	if chart.Cmd != "aibot_respond_msg" {
		t.Errorf("the chart went by %s, want inline on the stream reply", chart.Cmd)
	}
	if _, err := png.Decode(bytes.NewReader(chart.Images[0])); err != nil {
		t.Errorf("the inline chart is not a PNG: %v", err)
	}

	from = len(f.Sent(operator))
	f.Click(operator, "c1", "停止 1")
	await(t, f, operator, from, "Stop run #1")
	var yes string
	if !chattest.Await(func() bool {
		for _, m := range f.Sent(operator)[from:] {
			for _, b := range m.Buttons {
				if strings.Contains(b, "confirm") {
					yes = b
					return true
				}
			}
		}
		return false
	}) {
		t.Fatal("no confirmation buttons")
	}
	from = len(f.Sent(operator))
	f.Click(operator, "c2", yes)
	await(t, f, operator, from, "stopping run #1")
	if !chattest.Await(func() bool { _, err := s.Sup.Status(1); return err != nil }) {
		t.Fatal("the run did not stop")
	}
	await(t, f, operator, from, "run #1 (demo) stopped by zhangsan") // the end report
}

func TestViewerCannotStart(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access, Job: chattest.DemoJob(10, time.Millisecond)})
	f.Say(viewer, "", "m1", "开始")
	got := await(t, f, viewer, 0, "Viewers can look")
	if !strings.Contains(got.Text, "lisi") {
		t.Errorf("no id in %q", got.Text)
	}
}

func TestGroupMessageMentionIsStrippedAndAnsweredInTheGroup(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	f.Say(operator, "group-1", "g1", "@trainbot 帮助")
	got := await(t, f, "group-1", 0, "开始")
	if got.Cmd != "aibot_respond_msg" {
		t.Errorf("answered by %s", got.Cmd)
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
	await(t, f, operator, 0, "run #1 started")
	f.Say(operator, "", "later", "帮助") // in order after the repeat
	await(t, f, operator, 0, "状态")
	if n := count(f, operator, 0, "started: demo"); n != 1 {
		t.Errorf("the start was answered %d times", n)
	}
	if n := count(f, operator, 0, "already running"); n != 0 {
		t.Errorf("the repeat was handled: %d answers say a run is already running", n)
	}
	s.Close(t)

	// Restarted, WeCom pushes the same message again.
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
	if !chattest.Await(func() bool { return f.Subscribed() >= 2 && f.connected() }) {
		t.Fatalf("no reconnect; log:\n%s", s.Logs.String())
	}
	t.Logf("reconnected %s after the drop", time.Since(dropped).Round(time.Millisecond))
	await(t, f, operator, from, "finished")
}

func TestDeadLinkIsNoticedByPings(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	f.mu.Lock()
	f.mute = true
	f.mu.Unlock()
	if !chattest.Await(func() bool { return f.Subscribed() >= 2 }) {
		t.Fatalf("two unanswered pings did not end the link; log:\n%s", s.Logs.String())
	}
	if !strings.Contains(s.Logs.String(), "two pings") {
		t.Error("the log does not say why the link ended")
	}
}

func TestThrottlingIsWaitedOut(t *testing.T) {
	f := newFake(t)
	f.throttle["aibot_respond_msg"] = 1
	s := newStack(t, f, chattest.Options{Access: access})
	f.Say(operator, "", "m1", "帮助")
	await(t, f, operator, 0, "开始")
	if logs := s.Logs.String(); !strings.Contains(logs, "errcode 45009") || !strings.Contains(logs, "retry_in=300ms") {
		t.Errorf("the throttling was not waited out as asked:\n%s", logs)
	}
}

func TestConnectRefusalsAreRetriedOrFinal(t *testing.T) {
	f := newFake(t)
	f.refuse = []int{500, 429}
	s := newStack(t, f, chattest.Options{Access: access}) // connects in the end
	if n := strings.Count(s.Logs.String(), "connection lost; reconnecting"); n != 1 {
		t.Errorf("the failure was told %d times, want once", n)
	}
	f.Say(operator, "", "m1", "帮助")
	await(t, f, operator, 0, "开始")

	for _, c := range []struct {
		name   string
		status int
		secret string
	}{{"401", 401, f.secret}, {"bad secret", 0, "wrong"}} {
		t.Run(c.name, func(t *testing.T) {
			f2 := newFake(t)
			if c.status != 0 {
				f2.refuse = []int{c.status}
			}
			tr, err := wecom.New(wecom.Options{BotID: f2.botID, Secret: c.secret, URL: f2.URL, MinBackoff: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), chattest.Wait)
			defer cancel()
			err = tr.Receive(ctx, func(context.Context, chat.Message) {})
			if !chat.IsPermanent(err) {
				t.Fatalf("Receive: %v, want a permanent error", err)
			}
			if strings.Contains(err.Error(), c.secret) {
				t.Error("the secret is in the error")
			}
		})
	}
}

func TestDisconnectedEventStopsWithoutFighting(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	f.Evict()
	select {
	case <-s.Done():
		if err := s.ReceiveErr(); !chat.IsPermanent(err) || !strings.Contains(err.Error(), "another connection") {
			t.Fatalf("Receive: %v", err)
		}
	case <-time.After(chattest.Wait):
		t.Fatal("Receive did not stop")
	}
	time.Sleep(100 * time.Millisecond) // a reconnect would come within the backoff
	if n := f.Subscribed(); n != 1 {
		t.Errorf("%d subscriptions, want 1", n)
	}
}

func TestPushedChartGoesThroughTheChunkedUpload(t *testing.T) {
	f := newFake(t)
	tr, err := wecom.New(options(f, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	got := make(chan chat.Message, 1)
	go func() { done <- tr.Receive(ctx, func(_ context.Context, m chat.Message) { got <- m }) }()
	defer func() { cancel(); <-done }()
	if !chattest.Await(f.connected) {
		t.Fatal("no connection")
	}
	f.Say(operator, "", "m1", "订阅")
	m := <-got
	// A big chart (over one 512 KB chunk), pushed as an alert.
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 200_000)
	r := chat.Reply{Text: "⚠️ run #3 ran out of memory", Kind: chat.KindAlert, Images: []chat.Image{{Name: "loss.png", PNG: img}}}
	n, err := tr.Send(ctx, m.Chat, r, 0)
	if err != nil || n != 2 {
		t.Fatalf("Send: %d, %v", n, err)
	}
	var media string
	for _, s := range f.Sent(operator) {
		if s.MsgType == "image" {
			media = s.MediaID
		}
	}
	if media == "" {
		t.Fatal("no image message")
	}
	if !bytes.Equal(f.Upload(media), img) {
		t.Errorf("the upload is %d bytes, want the chart's %d", len(f.Upload(media)), len(img))
	}
	if strings.Contains(f.Sent(operator)[0].Text, "out of memory") && f.Sent(operator)[0].Cmd != "aibot_send_msg" {
		t.Error("an alert must be pushed, not a stream reply")
	}
}

// TestLatency measures message-to-reply time through the fake (reported,
// never asserted).
func TestLatency(t *testing.T) {
	f := newFake(t)
	newStack(t, f, chattest.Options{Access: access})
	p50, p99 := chattest.Latency(t, 40, func(i int) { f.Say(operator, "", fmt.Sprintf("lat%d", i), "帮助") }, func(i int) bool { return count(f, operator, 0, "开始") >= i+1 })
	t.Logf("message to reply: p50 %s, p99 %s (40 messages)", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
}

// TestStrangerIsToldOnceAndClicksPostNoMore: WeCom has no answer a click
// alone sees, so a stranger's clicks and messages go by the refusal rule:
// one refusal in the chat, whatever they send, and every attempt in the
// audit.
func TestStrangerIsToldOnceAndClicksPostNoMore(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	f.Say(stranger, "", "m1", "开始")
	await(t, f, stranger, 0, "not allowed")
	for i := range 5 {
		f.Click(stranger, fmt.Sprint("c", i), "停止 1")
		f.Say(stranger, "", fmt.Sprint("m", i+2), "状态")
	}
	if !chattest.Await(func() bool {
		log, err := s.Store.AuditLog(context.Background(), history.AuditFilter{Limit: 100})
		return err == nil && len(log) == 11
	}) {
		t.Fatal("not every attempt is in the audit")
	}
	s.Close(t)
	if n := count(f, stranger, 0, "not allowed"); n != 1 {
		t.Errorf("the stranger got %d refusals, want 1", n)
	}
}

package push

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
)

const pushplusToken = "0123456789abcdef0123456789abcdef"

func TestPushPlusRequest(t *testing.T) {
	f := newFake(t, ok(`{"code":200,"msg":"请求成功","data":"3cbc5eab19fe512e80677540fbde332a"}`))
	c := newChannel(t, Options{Kind: PushPlus, Name: "me", URL: f.srv.URL, Key: pushplusToken})
	if err := send(c, oomReply(t)); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	q := reqs[0]
	t.Logf("POST %s\n%v\n%s", q.path, q.hdr, strings.ReplaceAll(string(q.body), pushplusToken, "TOKEN"))
	if q.path != "/send" || q.raw != "" {
		t.Errorf("went to %s?%s, want /send", q.path, q.raw)
	}
	if ct := q.hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if got, want := keysOf(t, q.body), []string{"channel", "content", "template", "title", "token"}; !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	var m pushplusMsg
	decode(t, q.body, &m)
	want := pushplusMsg{Token: pushplusToken, Title: "💥 run #3 (mnist) hit out-of-memory", Template: "markdown", Channel: "wechat",
		Content: "💥 run #3 (mnist) hit out-of-memory\nCUDA out of memory. Tried to allocate 2.00 GiB\n" +
			"↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n" +
			"(1 chart not shown here: PushPlus cannot upload images; send 画图 to the bot)"}
	if m != want {
		t.Errorf("message\n%+v, want\n%+v", m, want)
	}
}

func TestPushPlusTemplates(t *testing.T) {
	f := newFake(t, ok(`{"code":200,"msg":"请求成功","data":"x"}`))
	r := chat.Reply{Text: "⚠️ a < b & \"c\"\nline 2", Kind: chat.KindAlert, Alert: chat.AlertNaN, RunID: 5, Key: "k5",
		Buttons: [][]chat.Button{{{Label: "Stop", Data: "停止 5"}}}}
	for template, want := range map[string]string{
		"txt":  "⚠️ a < b & \"c\"\nline 2\n↪ Stop: send「停止 5」to the bot",
		"html": "⚠️ a &lt; b &amp; &#34;c&#34;<br>line 2<br>↪ Stop: send「停止 5」to the bot",
	} {
		c := newChannel(t, Options{Kind: PushPlus, URL: f.srv.URL, Key: pushplusToken, Template: template})
		if err := send(c, r); err != nil {
			t.Fatal(err)
		}
		var m pushplusMsg
		decode(t, f.got()[len(f.got())-1].body, &m)
		if m.Template != template || m.Content != want {
			t.Errorf("%s: template %q content %q, want %q", template, m.Template, m.Content, want)
		}
	}
	c := newChannel(t, Options{Kind: PushPlus, URL: f.srv.URL, Key: pushplusToken, Template: "json"})
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	var m pushplusMsg
	decode(t, f.got()[len(f.got())-1].body, &m)
	var w WebhookMessage
	decode(t, []byte(m.Content), &w)
	if m.Template != "json" || w.Source != "trainbot" || w.Alert != "nan" || w.RunID != 5 || w.Text != "⚠️ a < b & \"c\"\nline 2\n↪ Stop: send「停止 5」to the bot" ||
		len(w.Buttons) != 1 || w.Buttons[0].Data != "停止 5" {
		t.Errorf("json content %s", m.Content)
	}
	if _, err := New(Options{Kind: PushPlus, Key: pushplusToken, Template: "cloudMonitor"}); err == nil || !strings.Contains(err.Error(), "template") {
		t.Errorf("a plug-in's template: %v, want refused", err)
	}
}

// Each content stays within 20,000 characters once written in its
// template (html's escapes count).
func TestPushPlusLongContentIsSplit(t *testing.T) {
	f := newFake(t, ok(`{"code":200,"msg":"请求成功","data":"x"}`))
	c := newChannel(t, Options{Kind: PushPlus, URL: f.srv.URL, Key: pushplusToken, Template: "html"})
	text := strings.Repeat("<tensor> & \"loss\"\n", 2000) // 36,000 bytes, 62,000 characters escaped
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert}); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want the text split", len(reqs))
	}
	for i, q := range reqs {
		var m pushplusMsg
		decode(t, q.body, &m)
		if n := utf8.RuneCountInString(m.Content); n > 20000 {
			t.Errorf("content %d has %d characters, over 20,000", i, n)
		}
		if m.Title != "<tensor> & \"loss\"" {
			t.Errorf("title %q", m.Title)
		}
	}
}

func TestPushPlusErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		temporary bool
		after     time.Duration
		code      int
	}{
		{"invalid token", 200, `{"code":903,"msg":"无效的用户令牌 ` + pushplusToken + `","data":null}`, false, 0, 903},
		{"not verified", 200, `{"code":905,"msg":"账户未进行实名认证","data":null}`, false, 0, 905},
		{"refused", 200, `{"code":999,"msg":"内容长度超过限制","data":null}`, false, 0, 999},
		{"daily limit", 200, `{"code":900,"msg":"请求次数过多,减少请求后2天恢复正常","data":null}`, true, time.Hour, 900},
		{"too frequent", 200, `{"code":999,"msg":"请求频繁,请稍后再试","data":null}`, true, time.Minute, 999},
		{"system error", 200, `{"code":500,"msg":"系统异常，请稍后再试","data":null}`, true, 0, 500},
		{"429", 429, `{"code":429,"msg":"too many requests"}`, true, time.Minute, 429},
		{"503", 503, `Service Unavailable`, true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(int, *http.Request, []byte) (int, string) { return tc.status, tc.body })
			c := newChannel(t, Options{Kind: PushPlus, URL: f.srv.URL, Key: pushplusToken})
			err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if pe.Temporary != tc.temporary || pe.After != tc.after || pe.Code != tc.code {
				t.Errorf("got temporary %v after %s code %d (%v), want %v %s %d", pe.Temporary, pe.After, pe.Code, err, tc.temporary, tc.after, tc.code)
			}
			if permanent, after := chat.Classify(err); permanent == tc.temporary || after != tc.after {
				t.Errorf("chat.Classify = %v %s", permanent, after)
			}
			if strings.Contains(err.Error(), pushplusToken) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

// Without an API base the request goes to www.pushplus.plus; none is made.
func TestPushPlusDefaultBase(t *testing.T) {
	c := newChannel(t, Options{Kind: PushPlus, Key: pushplusToken})
	msgs, err := c.d.messages(chat.Reply{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.d.(poster).request(context.Background(), msgs[0], fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != http.MethodPost || req.URL.String() != "https://www.pushplus.plus/send" {
		t.Errorf("%s %s, want POST https://www.pushplus.plus/send", req.Method, req.URL)
	}
	if _, err := New(Options{Kind: PushPlus}); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("no token: %v", err)
	}
}

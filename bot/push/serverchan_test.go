package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

const (
	sctKey  = "SCT123456TzYxWvUtSrQpOnMlKjIhG"
	sctpKey = "sctp98765tAbCdEfGhIjKlMnOpQrSt"
)

// oomReply is an OOM alert with a chart and a retry button.
func oomReply(t *testing.T) chat.Reply {
	return chat.Reply{Text: "💥 run #3 (mnist) hit out-of-memory\nCUDA out of memory. Tried to allocate 2.00 GiB", Kind: chat.KindAlert, Alert: chat.AlertOOM,
		RunID: 3, Key: "run:3:alert:oom:1", Images: []chat.Image{{Name: "run-3-loss.png", PNG: testPNG(t, 8, 8, false), Caption: "loss"}},
		Buttons: [][]chat.Button{{{Label: "Retry with half batch", Data: "开始 mnist batch_size=32"}}}}
}

// keysOf lists a JSON object's keys, sorted.
func keysOf(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]any
	decode(t, body, &m)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestServerChanRequests(t *testing.T) {
	f := newFake(t, ok(`{"code":0,"message":"","data":{"pushid":"123","readkey":"SCTabc","error":"SUCCESS","errno":0}}`))
	for _, tc := range []struct {
		key, path string
		keys      []string
		noip      int
	}{
		{sctKey, "/" + sctKey + ".send", []string{"desp", "noip", "title"}, 1},
		{sctpKey, "/send/" + sctpKey + ".send", []string{"desp", "title"}, 0},
	} {
		c := newChannel(t, Options{Kind: ServerChan, Name: "me", URL: f.srv.URL, Key: tc.key})
		if err := send(c, oomReply(t)); err != nil {
			t.Fatal(err)
		}
		q := f.got()[len(f.got())-1]
		t.Logf("POST %s\n%v\n%s", strings.ReplaceAll(q.path, tc.key, "KEY"), q.hdr, q.body)
		if q.path != tc.path || q.raw != "" {
			t.Errorf("went to %s?%s, want %s", q.path, q.raw, tc.path)
		}
		if ct := q.hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
		if got := keysOf(t, q.body); !slices.Equal(got, tc.keys) {
			t.Errorf("fields %v, want %v", got, tc.keys)
		}
		var m struct {
			Title string `json:"title"`
			Desp  string `json:"desp"`
			NoIP  int    `json:"noip"`
		}
		decode(t, q.body, &m)
		// The first line is 38 bytes: cut to 32 with "…", so desp holds all of it.
		if m.Title != "💥 run #3 (mnist) hit out-o…" || len(m.Title) > 32 || m.NoIP != tc.noip {
			t.Errorf("title %q (%d bytes), noip %d", m.Title, len(m.Title), m.NoIP)
		}
		want := "💥 run #3 (mnist) hit out-of-memory  \nCUDA out of memory. Tried to allocate 2.00 GiB  \n" +
			"↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot  \n" +
			"(1 chart not shown here: ServerChan cannot upload images; send 画图 to the bot)"
		if m.Desp != want {
			t.Errorf("desp\n%q, want\n%q", m.Desp, want)
		}
	}
}

// A short first line is the title alone; the text after it is desp, and a
// reply of one line sends no desp.
func TestServerChanTitleAndDesp(t *testing.T) {
	f := newFake(t, ok(`{"code":0,"message":""}`))
	c := newChannel(t, Options{Kind: ServerChan, URL: f.srv.URL, Key: sctKey, Lang: i18n.Zh})
	for _, r := range []chat.Reply{
		{Text: "✅ 训练 #7 完成\nloss 0.017", Kind: chat.KindAlert, Alert: chat.AlertFinished, Images: []chat.Image{{Name: "a.png", PNG: []byte("x")}}},
		{Text: "一行", Kind: chat.KindAlert},
		{Text: "长\n" + strings.Repeat("日志 log line\n", 4000), Kind: chat.KindAlert},
	} {
		if err := send(c, r); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.got()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want one a reply", len(reqs))
	}
	var m []serverchanMsg
	for _, q := range reqs {
		var one serverchanMsg
		decode(t, q.body, &one)
		m = append(m, one)
	}
	if m[0].Title != "✅ 训练 #7 完成" || m[0].Desp != "loss 0.017  \n（这里显示不了 1 张图：Server酱不能上传图片；向机器人发送「画图」查看）" {
		t.Errorf("message %+v", m[0])
	}
	if m[1].Title != "一行" || m[1].Desp != "" || strings.Contains(string(reqs[1].body), "desp") {
		t.Errorf("one line: %s", reqs[1].body)
	}
	if n := len(m[2].Desp); n > 32<<10 || !strings.Contains(m[2].Desp, "字节没有发出") {
		t.Errorf("long desp of %d bytes, want at most 32 KB with a note at the end: …%s", n, m[2].Desp[max(0, n-120):])
	}
}

func TestServerChanErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		header    string
		temporary bool
		after     time.Duration
		code      int
	}{
		{"bad key", 200, `{"code":40001,"message":"bad pushtoken ` + sctKey + `","data":null}`, "", false, 0, 40001},
		{"bad key, 400", 400, `{"code":40001,"message":"bad pushtoken"}`, "", false, 0, 40001},
		{"daily quota", 200, `{"code":40001,"message":"超过当天的发送次数限制[5]，请明天再试或升级会员","data":null}`, "", true, time.Hour, 40001},
		{"server error code", 200, `{"code":500,"message":"服务器错误"}`, "", true, 0, 500},
		{"429", 429, `{"code":429,"message":"too many requests"}`, "", true, 24 * time.Hour, 429},
		{"429 with Retry-After", 429, `slow down`, "120", true, 2 * time.Minute, 0},
		{"502", 502, `<html>bad gateway</html>`, "", true, 0, 0},
		{"not json", 200, `<html>maintenance</html>`, "", true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(int, *http.Request, []byte) (int, string) { return tc.status, tc.body })
			if tc.header != "" {
				f.srv.Config.Handler = retryAfter(tc.header, f.srv.Config.Handler)
			}
			c := newChannel(t, Options{Kind: ServerChan, URL: f.srv.URL, Key: sctKey})
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
			if strings.Contains(err.Error(), sctKey) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

// retryAfter sets a Retry-After header before next answers.
func retryAfter(v string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", v)
		next.ServeHTTP(w, r)
	})
}

// Without an API base a Turbo key goes to sctapi.ftqq.com and a Server酱³
// key to its uid's host; no request is made.
func TestServerChanDefaultHosts(t *testing.T) {
	for key, want := range map[string]string{
		sctKey:  "https://sctapi.ftqq.com/" + sctKey + ".send",
		sctpKey: "https://98765.push.ft07.com/send/" + sctpKey + ".send",
	} {
		c := newChannel(t, Options{Kind: ServerChan, Key: key})
		msgs, err := c.d.messages(chat.Reply{Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		req, err := c.d.(poster).request(context.Background(), msgs[0], fakeNow)
		if err != nil {
			t.Fatal(err)
		}
		if req.Method != http.MethodPost || req.URL.String() != want {
			t.Errorf("%s %s, want POST %s", req.Method, req.URL, want)
		}
	}
	if _, err := New(Options{Kind: ServerChan, Key: "sctpXYZ-not-a-key"}); err == nil || strings.Contains(err.Error(), "XYZ-not-a-key") {
		t.Errorf("a malformed sctp key: %v, want an error without it", err)
	}
	if _, err := New(Options{Kind: ServerChan}); err == nil || !strings.Contains(err.Error(), "no SendKey") {
		t.Errorf("no key: %v", err)
	}
}

// A failed dial to the uid's host quotes the URL, key included, in its
// url.Error: the error keeps none of it.
func TestServerChanDialErrorHidesTheKey(t *testing.T) {
	dialed := make(chan string, 1)
	client := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed <- addr
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}}}
	c := newChannel(t, Options{Kind: ServerChan, Key: sctpKey, Client: client})
	err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
	if got := <-dialed; got != "98765.push.ft07.com:443" {
		t.Errorf("dialed %s", got)
	}
	if err == nil || chat.IsPermanent(err) || strings.Contains(err.Error(), sctpKey) {
		t.Errorf("got %v, want a temporary error without the key", err)
	}
}

// The generic webhook of the secrets test answers 400 with a body that
// quotes the request: ServerChan's error hides the key in it too.
func TestServerChanEchoedKeyIsRedacted(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"code":40001,"message":"bad pushtoken for %s"}`, r.URL.Path)
	}))
	defer echo.Close()
	c := newChannel(t, Options{Kind: ServerChan, URL: echo.URL, Key: sctpKey})
	err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
	if !chat.IsPermanent(err) || strings.Contains(err.Error(), sctpKey) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("got %v, want a permanent error with the key redacted", err)
	}
}

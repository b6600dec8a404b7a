package push

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// fakeNow is the clock of every channel under test.
var fakeNow = time.Date(2030, 5, 17, 3, 4, 5, 0, time.UTC)

// fake is a push server on 127.0.0.1 that records requests and answers
// with what answer returns.
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []fakeReq
	answer func(n int, r *http.Request, body []byte) (int, string)
}

type fakeReq struct {
	method string
	path   string
	query  url.Values
	raw    string // the raw query
	hdr    http.Header
	body   []byte
}

func newFake(t *testing.T, answer func(n int, r *http.Request, body []byte) (int, string)) *fake {
	t.Helper()
	return newFakeOf(t, false, answer)
}

// newFakeOf is newFake, taking file uploads (a PUT of any body) too when
// uploads is set.
func newFakeOf(t *testing.T, uploads bool, answer func(n int, r *http.Request, body []byte) (int, string)) *fake {
	t.Helper()
	f := &fake{t: t, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, fakeReq{method: r.Method, path: r.URL.Path, query: r.URL.Query(), raw: r.URL.RawQuery, hdr: r.Header.Clone(), body: body})
		n := len(f.reqs)
		f.mu.Unlock()
		upload := uploads && r.Method == http.MethodPut // a file: any body
		if !upload && (r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")) {
			t.Errorf("request %d: %s with Content-Type %q, want a JSON POST", n, r.Method, r.Header.Get("Content-Type"))
		}
		status, text := f.answer(n, r, body)
		w.WriteHeader(status)
		io.WriteString(w, text)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) got() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

func ok(body string) func(int, *http.Request, []byte) (int, string) {
	return func(int, *http.Request, []byte) (int, string) { return 200, body }
}

func newChannel(t *testing.T, o Options) *Channel {
	t.Helper()
	o.Now = func() time.Time { return fakeNow }
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// send makes one attempt at the whole reply.
func send(c *Channel, r chat.Reply) error {
	_, err := c.Send(context.Background(), 0, r, 0)
	return err
}

// testPNG draws a w×h gradient; raw stores it without compression (a
// large file, cheap to make).
func testPNG(t *testing.T, w, h int, raw bool) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	enc := png.Encoder{}
	if raw {
		enc.CompressionLevel = png.NoCompression
	}
	var b bytes.Buffer
	if err := enc.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
}

func TestWeComMarkdownAndImages(t *testing.T) {
	const key = "693a91f6-7aoc-4bc4-97a0-0ec2sifa5aaa"
	f := newFake(t, ok(`{"errcode":0,"errmsg":"ok"}`))
	c := newChannel(t, Options{Kind: WeCom, Name: "lab", URL: f.srv.URL + "/cgi-bin/webhook/send?key=" + key})
	if c.Name() != "wecom:lab" {
		t.Errorf("name %q", c.Name())
	}
	small := testPNG(t, 64, 48, false)
	big := testPNG(t, 900, 900, true) // stored: a PNG over 2 MB
	if len(big) <= wecomImageMax {
		t.Fatalf("test image is only %d bytes", len(big))
	}
	long := "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory\n" + strings.Repeat("第二行 line of the traceback\n", 300)
	r := chat.Reply{Text: long, Kind: chat.KindAlert, Alert: chat.AlertOOM, RunID: 3, Key: "run:3:alert:oom:1",
		Images:  []chat.Image{{Name: "run-3-loss.png", PNG: small, Caption: "run #3 mnist · loss"}, {Name: "run-3-noise.png", PNG: big}},
		Buttons: [][]chat.Button{{{Label: "用一半 batch 重试 Retry with half batch", Data: "开始 mnist batch_size=32"}}}}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	var texts, formats []string
	var images int
	for i, q := range reqs {
		if q.path != "/cgi-bin/webhook/send" || q.query.Get("key") != key {
			t.Errorf("request %d went to %s?%s", i, q.path, q.raw)
		}
		var m struct {
			MsgType  string `json:"msgtype"`
			Markdown struct {
				Content string `json:"content"`
			} `json:"markdown"`
			Image struct {
				Base64 string `json:"base64"`
				MD5    string `json:"md5"`
			} `json:"image"`
		}
		decode(t, q.body, &m)
		switch m.MsgType {
		case "markdown":
			if images > 0 {
				t.Error("text after the images")
			}
			if n := len(m.Markdown.Content); n == 0 || n > 4096 {
				t.Errorf("markdown of %d bytes, want 1..4096", n)
			}
			texts = append(texts, m.Markdown.Content)
		case "image":
			images++
			raw, err := base64.StdEncoding.DecodeString(m.Image.Base64)
			if err != nil {
				t.Fatal(err)
			}
			sum := md5.Sum(raw)
			if m.Image.MD5 != hex.EncodeToString(sum[:]) {
				t.Errorf("image %d: md5 %s is not the md5 of its bytes", images, m.Image.MD5)
			}
			if len(raw) > 2<<20 {
				t.Errorf("image %d is %d bytes, over WeCom's 2 MB", images, len(raw))
			}
			_, format, err := image.DecodeConfig(bytes.NewReader(raw))
			if err != nil {
				t.Errorf("image %d does not decode: %v", images, err)
			}
			formats = append(formats, format)
		default:
			t.Errorf("msgtype %q", m.MsgType)
		}
	}
	if len(texts) < 2 || images != 2 {
		t.Fatalf("%d markdown parts and %d images, want the long text split and 2 images", len(texts), images)
	}
	if strings.Join(formats, ",") != "png,jpeg" {
		t.Errorf("image formats %v, want the small PNG as is and the large one re-encoded as JPEG", formats)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{`<font color="warning">💥 run #3 (mnist) hit out-of-memory`, "📈 run #3 mnist · loss", "send「开始 mnist batch_size=32」to the bot", "第二行"} {
		if !strings.Contains(all, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestFeishuSignedPost(t *testing.T) {
	const secret = "feishu-secret-0123456789"
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		var m struct {
			Timestamp string `json:"timestamp"`
			Sign      string `json:"sign"`
		}
		json.Unmarshal(body, &m)
		ts, err := strconv.ParseInt(m.Timestamp, 10, 64)
		// As documented: key = timestamp + "\n" + secret, message empty, base64.
		mac := hmac.New(sha256.New, []byte(m.Timestamp+"\n"+secret))
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if err != nil || m.Sign != want || time.Unix(ts, 0).Sub(fakeNow).Abs() > time.Hour {
			return 200, `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`
		}
		return 200, `{"StatusCode":0,"StatusMessage":"success","code":0,"data":{},"msg":"success"}`
	})
	c := newChannel(t, Options{Kind: Feishu, URL: f.srv.URL + "/open-apis/bot/v2/hook/abcdef-hook-token", Secret: secret})
	r := chat.Reply{Text: "✅ run #7 (demo) finished after 30s\nloss 0.0172\npeak GPU memory 1.00 GiB", Kind: chat.KindAlert, Alert: chat.AlertFinished,
		Images: []chat.Image{{Name: "a.png", PNG: []byte("x")}}}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	if err := send(c, chat.Reply{Text: "one line", Kind: chat.KindProgress}); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var post struct {
		Timestamp string `json:"timestamp"`
		MsgType   string `json:"msg_type"`
		Content   struct {
			Post map[string]struct {
				Title   string `json:"title"`
				Content [][]struct {
					Tag  string `json:"tag"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"post"`
		} `json:"content"`
	}
	decode(t, reqs[0].body, &post)
	zh := post.Content.Post["zh_cn"]
	if post.MsgType != "post" || post.Timestamp != strconv.FormatInt(fakeNow.Unix(), 10) || zh.Title != "✅ run #7 (demo) finished after 30s" ||
		len(zh.Content) != 3 || zh.Content[0][0].Tag != "text" || zh.Content[0][0].Text != "loss 0.0172" {
		t.Errorf("post %s", reqs[0].body)
	}
	if !strings.Contains(string(reqs[0].body), "1 chart not shown here: Feishu custom bots cannot upload images") {
		t.Errorf("post does not say the chart was left out: %s", reqs[0].body)
	}
	var text struct {
		MsgType string `json:"msg_type"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	decode(t, reqs[1].body, &text)
	if text.MsgType != "text" || text.Content.Text != "one line" {
		t.Errorf("text message %s", reqs[1].body)
	}
	// A wrong secret is refused by the server: a permanent error.
	bad := newChannel(t, Options{Kind: Feishu, URL: f.srv.URL + "/open-apis/bot/v2/hook/abcdef-hook-token", Secret: "wrong-secret"})
	err := send(bad, chat.Reply{Text: "x", Kind: chat.KindAlert})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != 19021 || pe.Temporary || !chat.IsPermanent(err) {
		t.Errorf("bad signature: got %v, want a permanent code 19021", err)
	}
}

func TestFeishuBodyStaysUnder20KB(t *testing.T) {
	f := newFake(t, ok(`{"code":0,"msg":"success"}`))
	c := newChannel(t, Options{Kind: Feishu, URL: f.srv.URL + "/hook/x"})
	text := "title\n" + strings.Repeat("a\n", 9000) // short lines: the post's overhead dominates
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert}); err != nil {
		t.Fatal(err)
	}
	for i, q := range f.got() {
		if len(q.body) > 20<<10 {
			t.Errorf("body %d is %d bytes, over Feishu's 20 KB", i, len(q.body))
		}
	}
}

func TestDingTalkSignedMarkdown(t *testing.T) {
	const secret = "SECb4f5c1e3d2a0987654321"
	const token = "dt-access-token-123456"
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		q := r.URL.Query()
		ts := q.Get("timestamp")
		// As documented: HmacSHA256 keyed with the secret over timestamp+"\n"+secret, base64, URL-escaped.
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "\n" + secret))
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if q.Get("access_token") != token || q.Get("sign") != want || !strings.Contains(r.URL.RawQuery, "sign="+url.QueryEscape(want)) {
			return 200, `{"errcode":310000,"errmsg":"sign not match, more: [https://ding-doc.dingtalk.com/doc#/serverapi2/qf2nxq]"}`
		}
		return 200, `{"errcode":0,"errmsg":"ok"}`
	})
	c := newChannel(t, Options{Kind: DingTalk, URL: f.srv.URL + "/robot/send?access_token=" + token, Secret: secret})
	r := chat.Reply{Text: "⏸ run #9 (bert) looks stalled: no output for 30m\nlast line: epoch 3", Kind: chat.KindAlert, Alert: chat.AlertStalled}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].query.Get("timestamp"); got != strconv.FormatInt(fakeNow.UnixMilli(), 10) {
		t.Errorf("timestamp %s, want milliseconds %d", got, fakeNow.UnixMilli())
	}
	var m struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Title string `json:"title"`
			Text  string `json:"text"`
		} `json:"markdown"`
	}
	decode(t, reqs[0].body, &m)
	if m.MsgType != "markdown" || m.Markdown.Title != "⏸ run #9 (bert) looks stalled: no output for 30m" || m.Markdown.Text != "⏸ run #9 (bert) looks stalled: no output for 30m  \nlast line: epoch 3" {
		t.Errorf("message %s", reqs[0].body)
	}
	bad := newChannel(t, Options{Kind: DingTalk, URL: f.srv.URL + "/robot/send?access_token=" + token, Secret: "SECwrong"})
	if err := send(bad, r); !chat.IsPermanent(err) || !strings.Contains(err.Error(), "310000") {
		t.Errorf("bad signature: got %v, want a permanent 310000", err)
	}
}

// TestDingTalkLongTextStaysUnderTheLimit: the two spaces markdown needs
// before every line break count against DingTalk's 20000 bytes too.
func TestDingTalkLongTextStaysUnderTheLimit(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		var m struct {
			Markdown struct {
				Text string `json:"text"`
			} `json:"markdown"`
		}
		if json.Unmarshal(body, &m) != nil || len(m.Markdown.Text) > 20000 {
			return 200, `{"errcode":460101,"errmsg":"message too long, exceed 20000 bytes"}`
		}
		return 200, `{"errcode":0,"errmsg":"ok"}`
	})
	c := newChannel(t, Options{Kind: DingTalk, URL: f.srv.URL + "/robot/send?access_token=tok-123456"})
	text := strings.TrimSuffix(strings.Repeat("loss 0.5\n", 3000), "\n") // 27,000 bytes in 3000 lines
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertFailed}); err != nil {
		t.Fatal(err)
	}
	var joined []string
	for _, r := range f.got() {
		var m struct {
			Markdown struct {
				Title string `json:"title"`
				Text  string `json:"text"`
			} `json:"markdown"`
		}
		decode(t, r.body, &m)
		if m.Markdown.Title != "loss 0.5" {
			t.Errorf("title %q", m.Markdown.Title)
		}
		joined = append(joined, strings.ReplaceAll(m.Markdown.Text, "  \n", "\n"))
	}
	if got := strings.Join(joined, "\n"); got != text {
		t.Errorf("the %d messages do not add up to the text", len(joined))
	}
}

func TestWebhookSignedJSON(t *testing.T) {
	const secret = "hook-secret-987654"
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		ts := r.Header.Get("X-Trainbot-Timestamp")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		if r.Header.Get("X-Trainbot-Signature") != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			return 401, "bad signature"
		}
		return 204, ""
	})
	c := newChannel(t, Options{Kind: Webhook, Name: "ops", URL: f.srv.URL + "/hooks/trainbot", Secret: secret})
	png := testPNG(t, 8, 8, false)
	r := chat.Reply{Text: "💥 oom", Kind: chat.KindAlert, Alert: chat.AlertOOM, RunID: 4, Key: "run:4:ended",
		Images: []chat.Image{{Name: "run-4-loss.png", PNG: png, Caption: "loss"}}, Buttons: [][]chat.Button{{{Label: "L", Data: "开始 j bs=8"}}}}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	var m WebhookMessage
	decode(t, f.got()[0].body, &m)
	if m.Source != "trainbot" || m.Kind != "alert" || m.Alert != "oom" || m.Severity != "critical" || m.RunID != 4 || m.Key != "run:4:ended" ||
		len(m.Images) != 1 || m.Images[0].Caption != "loss" || len(m.Buttons) != 1 || m.Buttons[0].Data != "开始 j bs=8" {
		t.Errorf("message %+v", m)
	}
	if raw, _ := base64.StdEncoding.DecodeString(m.Images[0].PNGBase64); !bytes.Equal(raw, png) {
		t.Error("the image does not round-trip")
	}
	bad := newChannel(t, Options{Kind: Webhook, URL: f.srv.URL + "/hooks/trainbot", Secret: "nope-nope"})
	if err := send(bad, r); !chat.IsPermanent(err) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("bad signature: got %v", err)
	}
}

func TestErrorCodes(t *testing.T) {
	cases := []struct {
		kind      string
		status    int
		body      string
		header    string // Retry-After
		retryable bool
		after     time.Duration
		code      int
	}{
		{WeCom, 200, `{"errcode":93000,"errmsg":"invalid webhook url, hint: [1]"}`, "", false, 0, 93000},
		{WeCom, 200, `{"errcode":45009,"errmsg":"api freq out of limit"}`, "", true, time.Minute, 45009},
		{WeCom, 200, `{"errcode":-1,"errmsg":"system busy"}`, "", true, 0, -1},
		{WeCom, 502, `<html>bad gateway</html>`, "", true, 0, 0},
		{WeCom, 200, `not json`, "", true, 0, 0},
		{DingTalk, 200, `{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`, "", true, time.Minute, 130101},
		{DingTalk, 200, `{"errcode":300001,"errmsg":"token is not exist"}`, "", false, 0, 300001},
		{DingTalk, 200, `{"errcode":310000,"errmsg":"keywords not in content"}`, "", false, 0, 310000},
		{Feishu, 200, `{"code":11232,"msg":"frequency limited"}`, "", true, 10 * time.Second, 11232},
		{Feishu, 400, `{"code":9499,"msg":"Bad Request"}`, "", false, 0, 9499},
		{Feishu, 200, `{"StatusCode":19024,"StatusMessage":"Key Words Not Found"}`, "", false, 0, 19024},
		{Feishu, 200, `{"StatusCode":0,"StatusMessage":"success"}`, "", false, 0, -999},
		{Webhook, 500, `oops`, "", true, 0, 0},
		{Webhook, 429, `slow down`, "7", true, 7 * time.Second, 0},
		{Webhook, 404, `no such hook`, "", false, 0, 0},
		{Webhook, 302, ``, "", false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %d %s", tc.kind, tc.status, tc.body), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				if tc.status == 302 {
					w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newChannel(t, Options{Kind: tc.kind, URL: srv.URL + "/send?key=k1234"})
			err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
			if tc.code == -999 {
				if err != nil {
					t.Fatalf("success answer: %v", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if pe.Temporary != tc.retryable || pe.After != tc.after || pe.Code != tc.code {
				t.Errorf("got temporary %v after %s code %d (%v), want %v %s %d", pe.Temporary, pe.After, pe.Code, err, tc.retryable, tc.after, tc.code)
			}
			if permanent == tc.retryable || after != tc.after {
				t.Errorf("chat.Classify = %v %s: what delivery reads must say the same", permanent, after)
			}
		})
	}
}

func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	const key, secret = "KEY-5f1e2d3c-aaaa-bbbb", "SECRET-77aa66bb55cc"
	// A server that quotes the whole request back, as some proxies do.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg, _ := json.Marshal(fmt.Sprintf("bad request %s %s %s", r.URL.String(), r.URL.RawQuery, body))
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"errcode":40058,"errmsg":%s,"code":40058,"msg":%s}`, msg, msg)
	}))
	defer echo.Close()
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hang.Close()
	defer close(stop) // before hang.Close
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Email: a refused port, and a server that fails AUTH.
	authFails := newSMTP(t, smtpConfig{tls: MailSTARTTLS, user: mailUser, pass: "not-" + secret})
	for _, addr := range []string{strings.TrimPrefix(refused, "http://"), authFails.addr} {
		o := authFails.mailOptions(MailSTARTTLS, mailUser, secret)
		o.Mail.SMTP, o.Logger = addr, logger
		err := send(newChannel(t, o), chat.Reply{Text: "alert " + secret, Kind: chat.KindAlert, Key: "k"})
		if err == nil {
			t.Fatalf("email against %s: no error", addr)
		}
		if s := err.Error(); strings.Contains(s, secret) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Errorf("email: the error shows the password: %s", s)
		}
		logger.Error("push failed", "err", err)
	}
	for _, kind := range Kinds {
		if spec, _ := SpecOf(kind); spec.Mail {
			continue // above
		}
		for _, base := range []string{echo.URL, hang.URL, refused} {
			u := base + "/cgi-bin/webhook/send?key=" + key + "&access_token=" + key
			if kind == Feishu {
				u = base + "/open-apis/bot/v2/hook/" + key
			}
			o := Options{Kind: kind, Name: "x", URL: u, Timeout: 200 * time.Millisecond, Logger: logger}
			spec, _ := SpecOf(kind)
			if spec.Signs {
				o.Secret = secret
			}
			if spec.API != "" {
				o.URL, o.Key = base, key
			}
			if slices.Contains(spec.Takes, "topic") {
				o.Topic = secret // a topic is a secret too
			}
			c := newChannel(t, o)
			text := "alert " + key // echoed in the error
			if spec.Signs {
				text = "alert " + secret
			}
			err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Key: "k"})
			if err == nil {
				t.Fatalf("%s against %s: no error", kind, base)
			}
			if s := err.Error(); strings.Contains(s, key) || strings.Contains(s, secret) || strings.Contains(s, url.QueryEscape(key)) {
				t.Errorf("%s: the error shows a secret: %s", kind, s)
			}
			logger.Error("push failed", "err", err)
		}
	}
	if s := logs.String(); strings.Contains(s, key) || strings.Contains(s, secret) {
		t.Errorf("the log shows a secret:\n%s", s)
	}
	if _, err := New(Options{Kind: WeCom, URL: "::" + key}); err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("bad URL: %v", err)
	}
}

func TestResumeAfterAPartialFailure(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		if n == 2 { // the image, the first time
			return 200, `{"errcode":-1,"errmsg":"system busy"}`
		}
		return 200, `{"errcode":0,"errmsg":"ok"}`
	})
	c := newChannel(t, Options{Kind: WeCom, URL: f.srv.URL + "/send?key=k"})
	r := chat.Reply{Text: "report", Kind: chat.KindProgress, Key: "report:1", Images: []chat.Image{{Name: "a.png", PNG: testPNG(t, 4, 4, false)}}}
	done, err := c.Send(context.Background(), 0, r, 0)
	if err == nil || chat.IsPermanent(err) || done != 1 {
		t.Fatalf("first attempt: %d sent, %v; want the text sent and a temporary error", done, err)
	}
	if n, err := c.Send(context.Background(), 0, r, done); err != nil || n != 2 {
		t.Fatalf("second attempt: %d %v", n, err)
	}
	var kinds []string
	for _, q := range f.got() {
		var m struct {
			MsgType string `json:"msgtype"`
		}
		decode(t, q.body, &m)
		kinds = append(kinds, m.MsgType)
	}
	if strings.Join(kinds, ",") != "markdown,image,image" {
		t.Errorf("requests %v, want the text once and the image twice", kinds)
	}
}

func TestPaceIsTheChannelsLimit(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []chat.Window
	}{
		{Options{Kind: WeCom}, []chat.Window{{N: 20, Per: time.Minute}}},
		{Options{Kind: WeCom, PerMinute: 5}, []chat.Window{{N: 5, Per: time.Minute}}},
		{Options{Kind: WeCom, PerMinute: 50}, []chat.Window{{N: 20, Per: time.Minute}}}, // only lowered
		{Options{Kind: Feishu}, []chat.Window{{N: 100, Per: time.Minute}, {N: 5, Per: time.Second}}},
		{Options{Kind: Webhook, PerMinute: 600}, []chat.Window{{N: 600, Per: time.Minute}}},
	} {
		tc.o.URL = "https://example.com/hook"
		c := newChannel(t, tc.o)
		own, all := c.Pace(0)
		if fmt.Sprint(own) != fmt.Sprint(tc.want) || all != nil {
			t.Errorf("%s %d: pace %v %v, want %v", tc.o.Kind, tc.o.PerMinute, own, all, tc.want)
		}
	}
}

func TestSplitText(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		want  []string
	}{
		{"short", 10, []string{"short"}},
		{"aaaa\nbbbb\ncccc", 10, []string{"aaaa\nbbbb", "cccc"}},
		{"abcdefghijkl", 5, []string{"abcde", "fghij", "kl"}},
		{"一二三四", 7, []string{"一二", "三四"}}, // 3 bytes a rune: never split one
	}
	for _, c := range cases {
		got := splitText(c.in, c.limit, i18n.ZhEn)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("splitText(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
	parts := splitText(strings.Repeat("line of text\n", 1000), 100, i18n.ZhEn)
	if len(parts) != maxParts || !strings.Contains(parts[maxParts-1], "more bytes not sent") {
		t.Errorf("%d parts, want %d with a note at the end", len(parts), maxParts)
	}
	for _, p := range parts {
		if len(p) > 100 {
			t.Errorf("part of %d bytes", len(p))
		}
	}
}

// A channel speaking Chinese adds its notes and button lines in Chinese.
func TestChannelNotesInItsLanguage(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		return 200, `{"StatusCode":0,"StatusMessage":"success","code":0,"data":{},"msg":"success"}`
	})
	c := newChannel(t, Options{Kind: Feishu, URL: f.srv.URL + "/open-apis/bot/v2/hook/abcdef-hook-token", Lang: i18n.Zh})
	r := chat.Reply{Text: "💥 训练 #3（mnist）显存不足", Kind: chat.KindAlert, Alert: chat.AlertOOM,
		Images:  []chat.Image{{Name: "a.png", PNG: []byte("x")}, {Name: "b.png", PNG: []byte("y")}},
		Buttons: [][]chat.Button{{{Label: "用一半 batch 重试", Data: "开始 mnist batch_size=32"}}}}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	body := string(f.got()[0].body)
	for _, want := range []string{"↪ 用一半 batch 重试：向机器人发送「开始 mnist batch_size=32」", "（这里显示不了 2 张图：飞书自定义机器人不能上传图片；向机器人发送「画图」查看）"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q: %s", want, body)
		}
	}
}

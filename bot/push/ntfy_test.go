package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

const (
	ntfyToken = "tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2"
	ntfyTop   = "trainbot-lab-x7q2"
)

// ntfyOOM is an OOM alert with a chart, a command button and a page.
func ntfyOOM(t *testing.T) chat.Reply {
	return chat.Reply{Text: "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory\npeak GPU memory 23.5 GiB", Kind: chat.KindAlert, Alert: chat.AlertOOM, RunID: 3,
		Images:  []chat.Image{{Name: "run-3-loss.png", PNG: testPNG(t, 16, 16, false), Caption: "run #3 mnist · loss"}},
		Buttons: [][]chat.Button{{{Label: "Retry with half batch", Data: "开始 mnist batch_size=32"}, {Label: "Run page", URL: "https://gpu1.lab:8080/runs/3"}}}}
}

// pretty is a JSON body indented, for a log a reader compares with docs.
func pretty(body []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, body, "", "  ") != nil {
		return string(body)
	}
	return b.String()
}

func TestNtfyPublishAndAttachment(t *testing.T) {
	f := newFakeOf(t, true, ok(`{"id":"hwQ2YpKdmg","time":1700000000,"event":"message","topic":"trainbot-lab-x7q2"}`))
	c := newChannel(t, Options{Kind: Ntfy, Name: "phone", URL: f.srv.URL, Key: ntfyToken, Topic: ntfyTop})
	r := ntfyOOM(t)
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the JSON publish and the chart", len(reqs))
	}
	pub := reqs[0]
	t.Logf("%s %s\nContent-Type: %s\n\n%s", pub.method, pub.path, pub.hdr.Get("Content-Type"), pretty(pub.body))
	if pub.method != http.MethodPost || pub.path != "/" || pub.hdr.Get("Content-Type") != "application/json; charset=utf-8" ||
		pub.hdr.Get("Authorization") != "Bearer "+ntfyToken {
		t.Errorf("publish: %s %s, Content-Type %q, Authorization %q; want a JSON POST to the root with the token", pub.method, pub.path, pub.hdr.Get("Content-Type"), pub.hdr.Get("Authorization"))
	}
	want := `{"topic":"trainbot-lab-x7q2","title":"💥 run #3 (mnist) hit out-of-memory: CUDA out of memory",` +
		`"message":"peak GPU memory 23.5 GiB\n↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n↪ Run page: https://gpu1.lab:8080/runs/3",` +
		`"priority":5,"tags":["rotating_light","oom"],"click":"https://gpu1.lab:8080/runs/3",` +
		`"actions":[{"action":"view","label":"Run page","url":"https://gpu1.lab:8080/runs/3"}]}`
	if string(pub.body) != want {
		t.Errorf("publish body\n%s\nwant\n%s", pub.body, want)
	}
	file := reqs[1]
	t.Logf("%s %s\nFilename: %s\nMessage: %s\nPriority: %s\nContent-Type: %s\n\n(%d bytes of PNG)", file.method, file.path,
		file.hdr.Get("Filename"), file.hdr.Get("Message"), file.hdr.Get("Priority"), file.hdr.Get("Content-Type"), len(file.body))
	caption, err := new(mime.WordDecoder).DecodeHeader(file.hdr.Get("Message"))
	if file.method != http.MethodPut || file.path != "/"+ntfyTop || file.hdr.Get("Filename") != "run-3-loss.png" ||
		file.hdr.Get("Authorization") != "Bearer "+ntfyToken || file.hdr.Get("Priority") != "2" || file.hdr.Get("Content-Type") != "image/png" ||
		err != nil || caption != "run #3 mnist · loss" || !bytes.Equal(file.body, r.Images[0].PNG) {
		t.Errorf("attachment: %s %s %v (caption %q, %v), want a PUT of the PNG to the topic with its Filename", file.method, file.path, file.hdr, caption, err)
	}
}

func TestNtfyPriorities(t *testing.T) {
	f := newFakeOf(t, true, ok(`{"id":"x"}`))
	c := newChannel(t, Options{Kind: Ntfy, URL: f.srv.URL, Topic: ntfyTop}) // no token: a public topic
	for _, r := range []chat.Reply{
		{Text: "📈 run #3 (mnist) step 1200: loss 0.21", Kind: chat.KindNotice},
		{Text: "✅ run #7 (demo) finished after 30s\nloss 0.0172", Kind: chat.KindAlert, Alert: chat.AlertFinished},
		{Text: "⏸ run #9 (bert) looks stalled\nlast line: epoch 3", Kind: chat.KindAlert, Alert: chat.AlertStalled},
	} {
		if err := send(c, r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`{"topic":"trainbot-lab-x7q2","message":"📈 run #3 (mnist) step 1200: loss 0.21","priority":2,"tags":["chart_with_upwards_trend"]}`,
		`{"topic":"trainbot-lab-x7q2","title":"✅ run #7 (demo) finished after 30s","message":"loss 0.0172","priority":3,"tags":["white_check_mark","finished"]}`,
		`{"topic":"trainbot-lab-x7q2","title":"⏸ run #9 (bert) looks stalled","message":"last line: epoch 3","priority":4,"tags":["warning","stalled"]}`,
	}
	for i, q := range f.got() {
		if q.hdr.Get("Authorization") != "" {
			t.Errorf("request %d has an Authorization header without a token", i)
		}
		if string(q.body) != want[i] {
			t.Errorf("request %d\n%s\nwant\n%s", i, q.body, want[i])
		}
	}
}

// A long text is split under ntfy's 4096 bytes (a longer message would
// arrive as a text file); only the first part rings.
func TestNtfyLongTextSplit(t *testing.T) {
	f := newFakeOf(t, true, ok(`{"id":"x"}`))
	c := newChannel(t, Options{Kind: Ntfy, URL: f.srv.URL, Topic: ntfyTop})
	text := "💥 run #4 (bert) failed: exit status 1\n" + strings.Repeat("Traceback line of the failed run\n", 300)
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertFailed}); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want the text split", len(reqs))
	}
	for i, q := range reqs {
		var m ntfyMsg
		decode(t, q.body, &m)
		if len(m.Message) > 4096 || m.Title != "💥 run #4 (bert) failed: exit status 1" {
			t.Errorf("part %d: %d bytes, title %q", i, len(m.Message), m.Title)
		}
		if want := map[bool]int{true: 5, false: 2}[i == 0]; m.Priority != want {
			t.Errorf("part %d: priority %d, want %d", i, m.Priority, want)
		}
	}
}

func TestNtfyErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		header    string // Retry-After
		onFile    bool   // the server refuses the attachment, not the text
		permanent bool
		after     time.Duration
		code      int
	}{
		{"bad token", 401, `{"code":40101,"http":401,"error":"unauthorized","link":"https://ntfy.sh/docs/publish/#authentication"}`, "", false, true, 0, 40101},
		{"reserved topic", 403, `{"code":40301,"http":403,"error":"forbidden","link":"https://ntfy.sh/docs/publish/#authentication"}`, "", false, true, 0, 40301},
		{"no attachments", 400, `{"code":40014,"http":400,"error":"invalid request: attachments not allowed","link":"https://ntfy.sh/docs/config/#attachments"}`, "", true, true, 0, 40014},
		{"attachment too large", 413, `{"code":41301,"http":413,"error":"attachment too large, or bandwidth limit reached"}`, "", true, true, 0, 41301},
		{"rate limit", 429, `{"code":42901,"http":429,"error":"limit reached: too many requests"}`, "", false, false, time.Minute, 42901},
		{"rate limit with Retry-After", 429, `{"code":42901,"http":429,"error":"limit reached: too many requests"}`, "9", false, false, 9 * time.Second, 42901},
		{"daily quota", 429, `{"code":42908,"http":429,"error":"limit reached: daily message quota reached"}`, "", false, false, time.Hour, 42908},
		{"server error", 500, `{"code":50001,"http":500,"error":"internal server error"}`, "", false, false, 0, 50001},
		{"proxy", 502, `<html>bad gateway</html>`, "", false, false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				if tc.onFile != (r.Method == http.MethodPut) {
					io.WriteString(w, `{"id":"x"}`)
					return
				}
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newChannel(t, Options{Kind: Ntfy, URL: srv.URL, Key: ntfyToken, Topic: ntfyTop})
			done, err := c.Send(context.Background(), 0, ntfyOOM(t), 0)
			if want := map[bool]int{true: 1, false: 0}[tc.onFile]; done != want {
				t.Errorf("%d messages sent, want %d", done, want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if permanent != tc.permanent || chat.IsPermanent(err) != tc.permanent || after != tc.after || pe.After != tc.after || pe.Code != tc.code || pe.Status != tc.status {
				t.Errorf("got permanent %v after %s code %d status %d (%v), want %v %s %d %d", permanent, after, pe.Code, pe.Status, err, tc.permanent, tc.after, tc.code, tc.status)
			}
			if s := err.Error(); strings.Contains(s, ntfyToken) || strings.Contains(s, ntfyTop) {
				t.Errorf("the error shows the token or the topic: %s", s)
			}
		})
	}
}

// Without a URL, a channel publishes to ntfy.sh.
func TestNtfyDefaultServer(t *testing.T) {
	c := newChannel(t, Options{Kind: Ntfy, Topic: ntfyTop, Key: ntfyToken})
	msgs, err := c.d.messages(ntfyOOM(t))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	for i, want := range []string{"https://ntfy.sh/", "https://ntfy.sh/" + ntfyTop} {
		req, err := c.d.(poster).request(context.Background(), msgs[i], fakeNow)
		if err != nil {
			t.Fatal(err)
		}
		if req.URL.String() != want {
			t.Errorf("message %d goes to %s, want %s", i, req.URL, want)
		}
	}
	if own, _ := c.Pace(0); fmt.Sprint(own) != "[{12 1m0s}]" {
		t.Errorf("pace %v, want ntfy.sh's 12 a minute", own)
	}
}

func TestNtfyNeedsAGoodTopic(t *testing.T) {
	for _, topic := range []string{"", "my topic/../x", strings.Repeat("a", 65)} {
		_, err := New(Options{Kind: Ntfy, Topic: topic})
		if err == nil {
			t.Errorf("topic %q taken", topic)
			continue
		}
		if topic != "" && strings.Contains(err.Error(), topic) {
			t.Errorf("the error shows the topic: %v", err)
		}
	}
}

package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

const barkKey = "ynJ5Ft4atkMkWeo2PAvFhF"

func TestBarkPush(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, body []byte) (int, string) {
		return 200, `{"code":200,"message":"success","timestamp":1700000000}`
	})
	c := newChannel(t, Options{Kind: Bark, Name: "iphone", URL: f.srv.URL, Key: barkKey})
	if err := send(c, ntfyOOM(t)); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want one push (Bark takes no images)", len(reqs))
	}
	q := reqs[0]
	t.Logf("%s %s\nContent-Type: %s\n\n%s", q.method, q.path, q.hdr.Get("Content-Type"), pretty(q.body))
	if q.method != http.MethodPost || q.path != "/push" || q.hdr.Get("Content-Type") != "application/json; charset=utf-8" || q.hdr.Get("Authorization") != "" {
		t.Errorf("%s %s, Content-Type %q; want a JSON POST to /push", q.method, q.path, q.hdr.Get("Content-Type"))
	}
	want := `{"device_key":"ynJ5Ft4atkMkWeo2PAvFhF","title":"💥 run #3 (mnist) hit out-of-memory: CUDA out of memory",` +
		`"body":"peak GPU memory 23.5 GiB\n↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n↪ Run page: https://gpu1.lab:8080/runs/3\n` +
		`(1 chart not shown here: Bark cannot show images; send 画图 to the bot)",` +
		`"level":"critical","volume":"5","group":"trainbot","url":"https://gpu1.lab:8080/runs/3"}`
	if string(q.body) != want {
		t.Errorf("body\n%s\nwant\n%s", q.body, want)
	}
}

func TestBarkLevels(t *testing.T) {
	c := newChannel(t, Options{Kind: Bark, Key: barkKey, Lang: i18n.Zh})
	for _, tc := range []struct {
		r     chat.Reply
		level string
	}{
		{chat.Reply{Text: "📈 run #3 step 1200", Kind: chat.KindProgress}, "passive"},
		{chat.Reply{Text: "▶️ run #3 started", Kind: chat.KindNotice}, "passive"},
		{chat.Reply{Text: "✅ done", Kind: chat.KindAlert, Alert: chat.AlertFinished}, "active"},
		{chat.Reply{Text: "⏸ stalled", Kind: chat.KindAlert, Alert: chat.AlertStalled}, "timeSensitive"},
		{chat.Reply{Text: "🧨 nan", Kind: chat.KindAlert, Alert: chat.AlertNaN}, "critical"},
	} {
		msgs, err := c.d.messages(tc.r)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%d messages, %v", len(msgs), err)
		}
		m := msgs[0].(barkMsg)
		if m.Level != tc.level || (m.Volume != "") != (tc.level == "critical") || m.Title != "" || m.Body != tc.r.Text {
			t.Errorf("%q: %+v, want level %s, the one line as the body", tc.r.Text, m, tc.level)
		}
	}
	// A chart is left out with a note in the channel's language.
	msgs, _ := c.d.messages(chat.Reply{Text: "报告", Kind: chat.KindProgress, Images: []chat.Image{{Name: "a.png"}}})
	if b := msgs[0].(barkMsg).Body; !strings.Contains(b, "这里显示不了 1 张图：Bark 不能显示图片") {
		t.Errorf("body %q lacks the Chinese note", b)
	}
}

// A long text is cut so that the push stays inside APNs' 4 KB payload.
func TestBarkLongTextCut(t *testing.T) {
	f := newFake(t, ok(`{"code":200,"message":"success","timestamp":1700000000}`))
	c := newChannel(t, Options{Kind: Bark, URL: f.srv.URL, Key: barkKey})
	text := "💥 run #4 (bert) failed: exit status 1\n" + strings.Repeat("第二行 traceback line\n", 400)
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertFailed}); err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	var m barkMsg
	decode(t, reqs[0].body, &m)
	if len(reqs) != 1 || len(m.Title)+len(m.Body) > barkMax || len(reqs[0].body) > 4096 || !strings.Contains(m.Body, "more bytes not sent") {
		t.Errorf("%d pushes, title and body %d bytes, request %d bytes: want one under 4 KB with a note", len(reqs), len(m.Title)+len(m.Body), len(reqs[0].body))
	}
}

func TestBarkErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		header    string // Retry-After
		permanent bool
		after     time.Duration
	}{
		// bark-server quotes the key it did not find: the error must not.
		{"unknown key", 400, `{"code":400,"message":"failed to get device token: failed to get [` + barkKey + `] device token from database","timestamp":1700000000}`, "", true, 0},
		{"empty key", 400, `{"code":400,"message":"device key is empty","timestamp":1700000000}`, "", true, 0},
		{"app removed", 500, `{"code":500,"message":"push failed: BadDeviceToken","timestamp":1700000000}`, "", true, 0},
		{"apns down", 500, `{"code":500,"message":"push failed: Post \"https://api.push.apple.com\": i/o timeout","timestamp":1700000000}`, "", false, 0},
		{"rate limit", 429, `too many requests`, "", false, time.Minute},
		{"rate limit with Retry-After", 429, `{"code":429,"message":"too many requests"}`, "30", false, 30 * time.Second},
		{"proxy", 502, `<html>bad gateway</html>`, "", false, 0},
		{"code in a 200", 200, `{"code":400,"message":"request bind failed"}`, "", true, 0},
		{"not json", 200, `<html>captive portal</html>`, "", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newChannel(t, Options{Kind: Bark, URL: srv.URL, Key: barkKey})
			err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if permanent != tc.permanent || chat.IsPermanent(err) != tc.permanent || after != tc.after || pe.Temporary == tc.permanent || pe.After != tc.after {
				t.Errorf("got permanent %v after %s (%v), want %v %s", permanent, after, err, tc.permanent, tc.after)
			}
			if strings.Contains(err.Error(), barkKey) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

// Without a URL, a channel pushes to api.day.app; a key is required.
func TestBarkDefaultServer(t *testing.T) {
	c := newChannel(t, Options{Kind: Bark, Key: barkKey})
	msgs, err := c.d.messages(chat.Reply{Text: "x", Kind: chat.KindAlert})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.d.(poster).request(context.Background(), msgs[0], fakeNow)
	if err != nil || req.URL.String() != "https://api.day.app/push" || req.Method != http.MethodPost {
		t.Errorf("request %v %v, want a POST to https://api.day.app/push", req, err)
	}
	if own, _ := c.Pace(0); fmt.Sprint(own) != "[{60 1m0s}]" {
		t.Errorf("pace %v, want 60 a minute", own)
	}
	if _, err := New(Options{Kind: Bark}); err == nil || !strings.Contains(err.Error(), "no device key") {
		t.Errorf("no key: %v, want an error naming the device key", err)
	}
}

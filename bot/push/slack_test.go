package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// recorder is a push server on 127.0.0.1 that records every request as
// it came (any method and body: fake insists on a JSON POST) and answers
// with what answer returns.
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []recorded
	answer func(n int, w http.ResponseWriter, r *http.Request) (int, string)
}

type recorded struct {
	method, path, rawQuery string
	hdr                    http.Header
	body                   []byte
}

func newRecorder(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request) (int, string)) *recorder {
	t.Helper()
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, hdr: r.Header.Clone(), body: body})
		n := len(rec.reqs)
		rec.mu.Unlock()
		status, text := rec.answer(n, w, r)
		w.WriteHeader(status)
		io.WriteString(w, text)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) got() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.reqs...)
}

func answer(status int, body string) func(int, http.ResponseWriter, *http.Request) (int, string) {
	return func(int, http.ResponseWriter, *http.Request) (int, string) { return status, body }
}

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got body\n%s\nwant\n%s", pretty(got), want)
	}
}

// oom3 is the OOM alert of run 3 the tests of both kinds send: a chart,
// a button with a command and the run's page.
func oom3(t *testing.T, page string) chat.Reply {
	t.Helper()
	r := chat.Reply{
		Text: "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory\nTried to allocate 2.00 GiB <script>& friends\npeak GPU memory 23.5 GiB of 24 GiB",
		Kind: chat.KindAlert, Alert: chat.AlertOOM, RunID: 3, Key: "run:3:alert:oom:1",
		Images:  []chat.Image{{Name: "run-3-loss.png", PNG: testPNG(t, 64, 48, false), Caption: "run #3 mnist · loss"}},
		Buttons: [][]chat.Button{{{Label: "Retry with half batch", Data: "开始 mnist batch_size=32"}}},
	}
	if page != "" {
		r.Buttons = append(r.Buttons, []chat.Button{{Label: "Open run #3", URL: page}})
	}
	return r
}

const slackPath = "/services/T0123ABCD/B0456EFGH/abcdEFGHijklMNOPqrstUVWX"

func TestSlackBlocks(t *testing.T) {
	rec := newRecorder(t, answer(200, "ok"))
	c := newChannel(t, Options{Kind: Slack, Name: "lab", URL: rec.srv.URL + slackPath, Lang: i18n.En})
	if err := send(c, oom3(t, "https://bot.example.com/runs/3?t=x&v=2")); err != nil {
		t.Fatal(err)
	}
	reqs := rec.got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.method != http.MethodPost || q.path != slackPath || q.rawQuery != "" || q.hdr.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Errorf("request %s %s?%s %q, want a JSON POST to the webhook", q.method, q.path, q.rawQuery, q.hdr.Get("Content-Type"))
	}
	sameJSON(t, q.body, `{
  "text": "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory\nTried to allocate 2.00 GiB &lt;script&gt;&amp; friends\npeak GPU memory 23.5 GiB of 24 GiB\n↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n↪ Open run #3: https://bot.example.com/runs/3?t=x&amp;v=2\n📈 run-3-loss.png (run #3 mnist · loss): https://bot.example.com/runs/3?t=x&amp;v=2",
  "blocks": [
    {"type": "header", "text": {"type": "plain_text", "text": "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory", "emoji": true}},
    {"type": "section", "text": {"type": "mrkdwn", "text": "Tried to allocate 2.00 GiB &lt;script&gt;&amp; friends\npeak GPU memory 23.5 GiB of 24 GiB"}},
    {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open run #3", "emoji": true}, "url": "https://bot.example.com/runs/3?t=x&v=2"}]},
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n📈 run-3-loss.png (run #3 mnist · loss): <https://bot.example.com/runs/3?t=x&amp;v=2|open the run's page>"}]}
  ]
}`)
	t.Logf("sample request as the recorder received it:\n%s %s\nContent-Type: %s\n\n%s", q.method, q.path, q.hdr.Get("Content-Type"), pretty(q.body))
}

// Without public pages, the charts are imagesNotSent's note; a progress
// report shows no buttons (as every push channel).
func TestSlackChartsWithoutAPage(t *testing.T) {
	rec := newRecorder(t, answer(200, "ok"))
	c := newChannel(t, Options{Kind: Slack, URL: rec.srv.URL + slackPath, Lang: i18n.En})
	r := oom3(t, "")
	r.Images = append(r.Images, chat.Image{Name: "run-3-lr.png", PNG: []byte("x")})
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	var m slackMsg
	decode(t, rec.got()[0].body, &m)
	last := m.Blocks[len(m.Blocks)-1]
	ctx, _ := json.Marshal(last.Elements)
	if last.Type != "context" || !strings.Contains(string(ctx), "(2 charts not shown here: Slack incoming webhooks cannot upload images; send /plot to the bot)") {
		t.Errorf("last block %s %s, want a context with the note", last.Type, ctx)
	}
	for _, b := range m.Blocks {
		if b.Type == "actions" {
			t.Error("an actions block without URL buttons")
		}
	}
	if err := send(c, chat.Reply{Text: "📊 run #3 (mnist) step 200\nloss 0.31", Kind: chat.KindProgress, Buttons: r.Buttons}); err != nil {
		t.Fatal(err)
	}
	decode(t, rec.got()[1].body, &m)
	if len(m.Blocks) != 2 || m.Blocks[0].Type != "header" || m.Blocks[1].Type != "section" {
		t.Errorf("progress blocks %s, want a header and a section", rec.got()[1].body)
	}
}

// A long text is several sections of at most 3000 characters, escaped,
// within 50 blocks, and none is cut inside an entity.
func TestSlackLongTextSections(t *testing.T) {
	rec := newRecorder(t, answer(200, "ok"))
	c := newChannel(t, Options{Kind: Slack, URL: rec.srv.URL + slackPath})
	text := strings.Repeat("x", 400) + "\n" + strings.Repeat("<a&b> ", 2000) + "\n" + strings.Repeat("第二行 traceback line\n", 3000)
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertFailed}); err != nil {
		t.Fatal(err)
	}
	var m slackMsg
	decode(t, rec.got()[0].body, &m)
	if len(m.Blocks) > 50 || len(m.Blocks) < 5 {
		t.Fatalf("%d blocks, want several sections and at most 50", len(m.Blocks))
	}
	if h := m.Blocks[0]; h.Type != "header" || utf8.RuneCountInString(h.Text.Text) > 150 || !strings.HasSuffix(h.Text.Text, "…") {
		t.Errorf("header %+v, want the first line cut to 150 characters", h.Text)
	}
	var joined strings.Builder
	for _, b := range m.Blocks[1:] {
		if b.Type != "section" {
			continue
		}
		if n := utf8.RuneCountInString(b.Text.Text); n == 0 || n > 3000 {
			t.Errorf("a section of %d characters", n)
		}
		joined.WriteString(b.Text.Text)
	}
	s := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(joined.String(), "&lt;", ""), "&gt;", ""), "&amp;", "")
	if strings.ContainsAny(s, "<>&") {
		t.Error("a section holds a bare or broken entity")
	}
	if !strings.Contains(joined.String(), strings.Repeat("x", 400)) {
		t.Error("the header's whole line is not in the body")
	}
	if n := utf8.RuneCountInString(m.Text); n > 40000 {
		t.Errorf("fallback text of %d characters", n)
	}
}

func TestSlackErrors(t *testing.T) {
	cases := []struct {
		status     int
		body, wait string // wait: Retry-After
		temporary  bool
		after      time.Duration
	}{
		{400, "invalid_blocks", "", false, 0},
		{400, "invalid_payload", "", false, 0},
		{403, "invalid_token", "", false, 0},
		{404, "no_service", "", false, 0},
		{410, "channel_is_archived", "", false, 0},
		{429, "rate_limited", "7", true, 7 * time.Second},
		{500, "rollup_error", "", true, 0},
		{503, "", "", true, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.body), func(t *testing.T) {
			rec := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) (int, string) {
				if tc.wait != "" {
					w.Header().Set("Retry-After", tc.wait)
				}
				return tc.status, tc.body
			})
			c := newChannel(t, Options{Kind: Slack, Name: "lab", URL: rec.srv.URL + slackPath})
			err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if pe.Temporary != tc.temporary || permanent == tc.temporary || after != tc.after || pe.After != tc.after || pe.Status != tc.status {
				t.Errorf("got %v (temporary %v, after %s), want temporary %v after %s", err, pe.Temporary, after, tc.temporary, tc.after)
			}
			if !strings.Contains(err.Error(), "slack:lab: reply: HTTP "+fmt.Sprint(tc.status)) || !strings.Contains(err.Error(), tc.body) {
				t.Errorf("error %q does not tell the status and %q", err, tc.body)
			}
		})
	}
}

func TestSlackAndDiscordPace(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []chat.Window
	}{
		{Options{Kind: Slack}, []chat.Window{{N: 60, Per: time.Minute}}},
		{Options{Kind: Slack, PerMinute: 100}, []chat.Window{{N: 60, Per: time.Minute}}}, // only lowered
		{Options{Kind: Discord}, []chat.Window{{N: 30, Per: time.Minute}, {N: 2, Per: time.Second}}},
		{Options{Kind: Discord, PerMinute: 10}, []chat.Window{{N: 10, Per: time.Minute}, {N: 2, Per: time.Second}}},
	} {
		tc.o.URL = "https://example.com/hook/token-0123456789"
		own, all := newChannel(t, tc.o).Pace(0)
		if fmt.Sprint(own) != fmt.Sprint(tc.want) || all != nil {
			t.Errorf("%s %d: pace %v %v, want %v", tc.o.Kind, tc.o.PerMinute, own, all, tc.want)
		}
	}
}

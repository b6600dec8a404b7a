package push

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// A Discord webhook URL as Discord shows it: /api/webhooks/ID/TOKEN.
const (
	discordID    = "1234567890123456789"
	discordToken = "Xy9_aBcDeFgHiJkLmNoPqRsTuVwXyZ-0123456789abcdefghijklmnopqrstuvwxyzABCD"
	discordPath  = "/api/webhooks/" + discordID + "/" + discordToken
)

// discordPart is one part of a multipart/form-data request.
type discordPart struct {
	name, filename, contentType string
	data                        []byte
}

// discordParts parses a recorded multipart/form-data request.
func discordParts(t *testing.T, q recorded) []discordPart {
	t.Helper()
	mt, params, err := mime.ParseMediaType(q.hdr.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("Content-Type %q, want multipart/form-data", q.hdr.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(q.body), params["boundary"])
	var out []discordPart
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, discordPart{name: p.FormName(), filename: p.FileName(), contentType: p.Header.Get("Content-Type"), data: data})
	}
}

func TestDiscordMultipart(t *testing.T) {
	rec := newRecorder(t, answer(200, `{"id":"1","type":0,"content":"","channel_id":"2","webhook_id":"`+discordID+`"}`))
	c := newChannel(t, Options{Kind: Discord, Name: "lab", URL: rec.srv.URL + discordPath, Lang: i18n.En})
	r := oom3(t, "https://bot.example.com/runs/3")
	r.Images = append(r.Images, chat.Image{Name: "run 3 / gpu.png", PNG: testPNG(t, 16, 16, false)})
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	reqs := rec.got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.method != http.MethodPost || q.path != discordPath || q.rawQuery != "wait=true" {
		t.Errorf("request %s %s?%s, want a POST to the webhook with wait=true", q.method, q.path, q.rawQuery)
	}
	parts := discordParts(t, q)
	if len(parts) != 3 || parts[0].name != "payload_json" || parts[0].contentType != "application/json" {
		t.Fatalf("parts %+v, want payload_json and two files", parts)
	}
	sameJSON(t, parts[0].data, `{
  "username": "trainbot",
  "content": "",
  "embeds": [{
    "title": "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory",
    "description": "Tried to allocate 2.00 GiB <script>& friends\npeak GPU memory 23.5 GiB of 24 GiB\n↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot\n↪ Open run #3: https://bot.example.com/runs/3\n📈 run #3 mnist · loss",
    "url": "https://bot.example.com/runs/3",
    "color": 15158332,
    "image": {"url": "attachment://run-3-loss.png"},
    "footer": {"text": "trainbot · run #3"},
    "timestamp": "2030-05-17T03:04:05Z"
  }],
  "attachments": [
    {"id": 0, "filename": "run-3-loss.png", "description": "run #3 mnist · loss"},
    {"id": 1, "filename": "run_3___gpu.png"}
  ],
  "allowed_mentions": {"parse": []}
}`)
	for i, want := range []struct {
		name string
		png  []byte
	}{{"run-3-loss.png", r.Images[0].PNG}, {"run_3___gpu.png", r.Images[1].PNG}} {
		p := parts[i+1]
		if p.name != fmt.Sprintf("files[%d]", i) || p.filename != want.name || p.contentType != "image/png" || !bytes.Equal(p.data, want.png) {
			t.Errorf("part %d: %s %q %s, %d bytes; want files[%d] %q image/png with the chart", i+1, p.name, p.filename, p.contentType, len(p.data), i, want.name)
		}
		if _, err := png.Decode(bytes.NewReader(p.data)); err != nil {
			t.Errorf("files[%d] does not decode as PNG: %v", i, err)
		}
	}
	var sample strings.Builder
	fmt.Fprintf(&sample, "%s %s?%s\nContent-Type: %s\n", q.method, q.path, q.rawQuery, q.hdr.Get("Content-Type"))
	for _, p := range parts {
		fmt.Fprintf(&sample, "\npart %s filename=%q Content-Type: %s\n", p.name, p.filename, p.contentType)
		if p.contentType == "image/png" {
			fmt.Fprintf(&sample, "<PNG, %d bytes>\n", len(p.data))
		} else {
			sample.WriteString(pretty(p.data) + "\n")
		}
	}
	t.Logf("sample request as the recorder received it:\n%s", sample.String())
}

// Without charts the payload goes as JSON, with the same keys; a long
// text is more messages, each description at most 4096 characters.
func TestDiscordJSONAndLongText(t *testing.T) {
	rec := newRecorder(t, answer(204, ""))
	c := newChannel(t, Options{Kind: Discord, URL: rec.srv.URL + discordPath + "?thread_id=42"})
	text := "⏸ run #9 (bert) looks stalled: no output for 30m\n" + strings.Repeat("第二行 last line of the log @everyone\n", 400)
	if err := send(c, chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertStalled, RunID: 9}); err != nil {
		t.Fatal(err)
	}
	reqs := rec.got()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want the text in several messages", len(reqs))
	}
	for i, q := range reqs {
		if ct := q.hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("request %d: Content-Type %q, want JSON without charts", i, ct)
		}
		if v, _ := url.ParseQuery(q.rawQuery); v.Get("wait") != "true" || v.Get("thread_id") != "42" {
			t.Errorf("request %d: query %q, want thread_id kept and wait=true", i, q.rawQuery)
		}
		var p discordPayload
		decode(t, q.body, &p)
		if len(p.Embeds) != 1 || p.Embeds[0].Color != discordOrange || p.Embeds[0].Footer.Text != "trainbot · run #9" || p.AllowedMentions.Parse == nil || len(p.AllowedMentions.Parse) != 0 {
			t.Errorf("request %d: payload %s", i, q.body)
		}
		if n := utf8.RuneCountInString(p.Embeds[0].Description); n == 0 || n > 4096 {
			t.Errorf("request %d: description of %d characters", i, n)
		}
		if (i == 0) != (p.Embeds[0].Title != "") {
			t.Errorf("request %d: title %q, want one on the first message only", i, p.Embeds[0].Title)
		}
	}
}

// A chart over 8 MiB is re-encoded (a JPEG named .jpg); the colours
// follow the severity.
func TestDiscordLargeChartAndColours(t *testing.T) {
	rec := newRecorder(t, answer(200, `{"id":"1"}`))
	c := newChannel(t, Options{Kind: Discord, URL: rec.srv.URL + discordPath})
	big := testPNG(t, 1800, 1600, true)
	if len(big) <= discordFileMax {
		t.Fatalf("test image is only %d bytes", len(big))
	}
	if err := send(c, chat.Reply{Text: "✅ run #7 finished", Kind: chat.KindAlert, Alert: chat.AlertFinished, Images: []chat.Image{{Name: "run-7-loss.png", PNG: big}}}); err != nil {
		t.Fatal(err)
	}
	parts := discordParts(t, rec.got()[0])
	if len(parts) != 2 || parts[1].filename != "run-7-loss.jpg" || parts[1].contentType != "image/jpeg" || len(parts[1].data) > discordFileMax {
		t.Fatalf("file part %s %q %s of %d bytes, want a JPEG within 8 MiB", parts[1].name, parts[1].filename, parts[1].contentType, len(parts[1].data))
	}
	var p discordPayload
	decode(t, parts[0].data, &p)
	if p.Embeds[0].Image == nil || p.Embeds[0].Image.URL != "attachment://run-7-loss.jpg" || p.Embeds[0].Color != discordGreen {
		t.Errorf("payload %s", parts[0].data)
	}
	for _, tc := range []struct {
		r    chat.Reply
		want int
	}{
		{chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertNaN}, 0xE74C3C},
		{chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertGPU}, 0xE67E22},
		{chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertStopped}, 0x2ECC71},
		{chat.Reply{Kind: chat.KindProgress}, 0x3498DB},
	} {
		if got := discordColor(tc.r); got != tc.want {
			t.Errorf("%v %s: colour %06X, want %06X", tc.r.Kind, tc.r.Alert, got, tc.want)
		}
	}
}

func TestDiscordErrors(t *testing.T) {
	cases := []struct {
		status    int
		body      string
		header    map[string]string
		temporary bool
		after     time.Duration
		code      int
		says      string
	}{
		{429, `{"message": "You are being rate limited.", "retry_after": 1.5, "global": false}`, nil, true, 1500 * time.Millisecond, 0, "You are being rate limited."},
		{429, `{"message": "You are being rate limited.", "retry_after": 0.3333, "global": true}`, nil, true, 334 * time.Millisecond, 0, "rate limited"},
		{429, `<html>slow down</html>`, map[string]string{"X-RateLimit-Reset-After": "2.25"}, true, 2250 * time.Millisecond, 0, "slow down"},
		{429, ``, map[string]string{"Retry-After": "4"}, true, 4 * time.Second, 0, ""},
		{404, `{"message": "Unknown Webhook", "code": 10015}`, nil, false, 0, 10015, "Unknown Webhook"},
		{401, `{"message": "401: Unauthorized", "code": 0}`, nil, false, 0, 0, "Unauthorized"},
		{403, `{"message": "Missing Permissions", "code": 50013}`, nil, false, 0, 50013, "Missing Permissions"},
		{400, `{"code": 50035, "errors": {"embeds": {"0": {"description": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 4096 or fewer in length."}]}}}}, "message": "Invalid Form Body"}`, nil, false, 0, 50035, "BASE_TYPE_MAX_LENGTH"},
		{400, `{"message": "Cannot send an empty message", "code": 50006}`, nil, false, 0, 50006, "empty message"},
		{500, `{"message": "500: Internal Server Error", "code": 0}`, nil, true, 0, 0, "Internal Server Error"},
		{502, `<html>bad gateway</html>`, nil, true, 0, 0, "bad gateway"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.says), func(t *testing.T) {
			rec := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) (int, string) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				return tc.status, tc.body
			})
			c := newChannel(t, Options{Kind: Discord, Name: "ops", URL: rec.srv.URL + discordPath})
			err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if pe.Temporary != tc.temporary || permanent == tc.temporary || pe.After != tc.after || after != tc.after || pe.Code != tc.code {
				t.Errorf("got %v (temporary %v after %s code %d), want temporary %v after %s code %d", err, pe.Temporary, pe.After, pe.Code, tc.temporary, tc.after, tc.code)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

// A server that quotes the request path (a proxy's error page, Discord
// behind one) never gets the token into an error or a log, not even its
// start when the answer is cut to a snippet; neither does a token before
// Discord's /slack suffix.
func TestDiscordTokenNeverInErrors(t *testing.T) {
	for _, tc := range []struct {
		kind, path string
		pad        int // bytes before the quoted path: the snippet's 200-character cut falls inside the token
	}{
		{Discord, discordPath, 0},
		{Discord, discordPath, 200 - len("/api/webhooks/"+discordID+"/") - 10},
		{Slack, discordPath + "/slack", 0},
		{Slack, slackPath, 200 - len("/services/T0123ABCD/B0456EFGH/") - 10},
	} {
		rec := newRecorder(t, func(_ int, _ http.ResponseWriter, r *http.Request) (int, string) {
			return http.StatusNotFound, strings.Repeat("x", tc.pad) + r.URL.Path + " not found"
		})
		var logs bytes.Buffer
		c := newChannel(t, Options{Kind: tc.kind, URL: rec.srv.URL + tc.path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		err := send(c, chat.Reply{Text: "x", Kind: chat.KindAlert})
		if err == nil {
			t.Fatalf("%s %s: no error", tc.kind, tc.path)
		}
		slog.New(slog.NewTextHandler(&logs, nil)).Error("push failed", "err", err)
		token := discordToken
		if tc.path == slackPath {
			token = "abcdEFGHijklMNOPqrstUVWX"
		}
		if s := err.Error() + logs.String(); strings.Contains(s, token[:8]) {
			t.Errorf("%s %s (pad %d): the token shows: %s", tc.kind, tc.path, tc.pad, s)
		}
		if !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("%s %s: %v, want the path quoted with the token redacted", tc.kind, tc.path, err)
		}
	}
}

package telegram

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/trainbot/trainbot/bot/chat"
)

func TestSplitText(t *testing.T) {
	long := strings.Repeat("word ", 2000)                    // 10,000 bytes, spaces only
	lines := strings.Repeat("line of the log output\n", 500) // 11,500 bytes
	dense := strings.Repeat("x", 9000)                       // no place to cut
	emoji := strings.Repeat("😀", 3000)                       // 2 UTF-16 units each
	chinese := strings.Repeat("训练", 3000)                    // 1 unit each, 3 bytes
	tests := []struct {
		name  string
		in    string
		parts int
	}{
		{"short", "hello", 1},
		{"exact", strings.Repeat("a", 4096), 1},
		{"spaces", long, 3},
		{"lines", lines, 3},
		{"dense", dense, 3},
		{"emoji", emoji, 2},
		{"chinese", chinese, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := splitText(tt.in, 4096)
			if len(parts) != tt.parts {
				t.Fatalf("got %d parts, want %d", len(parts), tt.parts)
			}
			var joined strings.Builder
			for i, p := range parts {
				if n := len(utf16.Encode([]rune(p))); n > 4096 || n == 0 {
					t.Errorf("part %d has %d UTF-16 units", i, n)
				}
				joined.WriteString(p)
			}
			strip := func(s string) string { return strings.NewReplacer(" ", "", "\n", "").Replace(s) }
			if strip(joined.String()) != strip(tt.in) {
				t.Errorf("the parts do not add up to the text")
			}
		})
	}
	if parts := splitText(lines, 4096); !strings.HasSuffix(parts[0], "output") {
		t.Errorf("a part should end at a line break, got …%q", parts[0][len(parts[0])-20:])
	}
	if got := splitText("bad \xff utf8", 4096); got[0] != "bad \uFFFD utf8" {
		t.Errorf("invalid UTF-8: got %q", got[0])
	}
}

func TestEscapeAndClip(t *testing.T) {
	if got, want := escape(`loss < 0.5 & acc > 0.9 <b>"x"</b>`), `loss &lt; 0.5 &amp; acc &gt; 0.9 &lt;b&gt;"x"&lt;/b&gt;`; got != want {
		t.Errorf("escape: got %q, want %q", got, want)
	}
	if got := clipUTF16(strings.Repeat("é", 2000), 1024); len([]rune(got)) != 1024 || !strings.HasSuffix(got, "…") {
		t.Errorf("clip: got %d runes", len([]rune(got)))
	}
	if got := clipUTF16("short", 1024); got != "short" {
		t.Errorf("clip short: got %q", got)
	}
	if got, want := progressHTML("▶️ run #1 <demo>\nloss 0.5 & more"), "<b>▶️ run #1 &lt;demo&gt;</b>\nloss 0.5 &amp; more"; got != want {
		t.Errorf("progressHTML: got %q, want %q", got, want)
	}
}

func TestButtonData(t *testing.T) {
	tests := []struct {
		data string
		run  int64
		want string
	}{
		{"停止", 12, "停止 12"},
		{"状态", 12, "状态 12"},
		{"画图", 3, "画图 3"},
		{"/status", 3, "/status 3"},
		{"停止", 0, "停止"},
		{"日志", 12, "日志"}, // takes lines, not a run
		{"/stop 12 confirm", 12, "/stop 12 confirm"},
		{"/stop cancel", 12, "/stop cancel"},
		{"帮助", 12, "帮助"},
		{"nonsense", 12, "nonsense"},
	}
	for _, tt := range tests {
		if got := buttonData(tt.data, tt.run); got != tt.want {
			t.Errorf("buttonData(%q, %d): got %q, want %q", tt.data, tt.run, got, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	const token = "123456:SECRET-token_value"
	ue := &url.Error{Op: "Post", URL: "https://api.telegram.org/bot" + token + "/getMe", Err: context.DeadlineExceeded}
	err := redact(ue, token)
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("token in %q", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(DeadlineExceeded) lost")
	}
	var u *url.Error
	if !errors.As(err, &u) || strings.Contains(u.URL, token) {
		t.Errorf("the url.Error inside still has the token: %v", u)
	}
	a := newAPI(token, "http://127.0.0.1:1", &http.Client{Timeout: time.Second})
	werr := a.wrap("getMe", ue)
	if permanent, _ := chat.Classify(sendError(werr)); strings.Contains(werr.Error(), token) || permanent {
		t.Errorf("wrapped: %q, permanent %v", werr, permanent)
	}
	var ne net.Error
	_ = errors.As(werr, &ne) // must not panic
}

func TestSendErrorSaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		e         *Error
		permanent bool
		after     time.Duration
		reason    string
	}{
		{&Error{Method: "sendMessage", Code: 400, Description: "Bad Request: chat not found"}, true, 0, "Telegram answered 400 to sendMessage"},
		{&Error{Method: "sendMessage", Code: 403}, true, 0, "Telegram answered 403 to sendMessage"},
		{&Error{Method: "sendPhoto", Code: 429, Retry: 7 * time.Second}, false, 7 * time.Second, "Telegram answered 429 to sendPhoto"},
		{&Error{Method: "sendMediaGroup", Code: 500}, false, 0, "Telegram answered 500 to sendMediaGroup"},
		{&Error{Method: "sendMessage", Code: 401}, false, 0, "Telegram answered 401 to sendMessage"}, // goes out once the token is fixed
		{&Error{Method: "sendPhoto", err: errors.New("connection reset")}, false, 0, "Telegram could not be reached (sendPhoto)"},
	} {
		err := sendError(tc.e)
		permanent, after := chat.Classify(err)
		if permanent != tc.permanent || after != tc.after || chat.ReasonOf(err) != tc.reason || !errors.Is(err, tc.e) {
			t.Errorf("%v: permanent %v after %s reason %q", tc.e, permanent, after, chat.ReasonOf(err))
		}
	}
}

// Every answer is read with a limit: a server that answers getMe with more
// than maxAnswer bytes gets an error, not the memory.
func TestAnswersAreReadWithALimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range maxAnswer>>20 + 4 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}}`)
	}))
	defer srv.Close()
	a := newAPI("1:x", srv.URL, &http.Client{Timeout: 30 * time.Second})
	_, err := a.getMe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Fatalf("got %v, want the answer refused as too large", err)
	}
}

// An empty getUpdates answered at once is not asked again at once.
func TestEmptyPollsAreSpaced(t *testing.T) {
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/getMe"):
			io.WriteString(w, `{"ok":true,"result":{"id":42,"is_bot":true,"first_name":"t","username":"t_bot"}}`)
		case strings.HasSuffix(r.URL.Path, "/getUpdates"):
			polls.Add(1)
			io.WriteString(w, `{"ok":true,"result":[]}`)
		default:
			io.WriteString(w, `{"ok":true,"result":true}`)
		}
	}))
	defer srv.Close()
	tr, err := New(Options{Token: "42:abcdefghijklmnopqrstuvwxyz", APIEndpoint: srv.URL, PollTimeout: time.Second, MinPoll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr.Receive(ctx, func(context.Context, chat.Message) {})
	if n := polls.Load(); n > 6 || n < 2 {
		t.Errorf("%d polls in 1 s against a server that answers at once, want about 5 (one every 200 ms)", n)
	}
}

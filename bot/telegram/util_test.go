package telegram

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
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

func TestPacer(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	p := newPacer(Rate{Every: time.Second, Burst: 3}, Rate{Every: 3 * time.Second, Burst: 2}, Rate{Every: 10 * time.Millisecond, Burst: 30})
	// A private chat: three at once, then one a second.
	var got []time.Duration
	for range 5 {
		got = append(got, p.reserve(42, t0))
	}
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("private chat waits: got %v, want %v", got, want)
	}
	// Another chat is not held up by the first.
	if d := p.reserve(43, t0); d != 0 {
		t.Errorf("second chat waits %v, want 0", d)
	}
	// A group: two at once, then one every 3 s.
	got = nil
	for range 4 {
		got = append(got, p.reserve(-100, t0))
	}
	want = []time.Duration{0, 0, 3 * time.Second, 6 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("group waits: got %v, want %v", got, want)
	}
	// After a quiet while the burst is back.
	if d := p.reserve(42, t0.Add(time.Minute)); d != 0 {
		t.Errorf("after a minute: wait %v, want 0", d)
	}
	// A 429's retry_after holds the chat back.
	p.block(42, t0.Add(time.Minute), 5*time.Second)
	if d := p.reserve(42, t0.Add(time.Minute)); d != 5*time.Second {
		t.Errorf("after a 429: wait %v, want 5s", d)
	}
	// The whole bot: 30 at once, then one every 10 ms.
	g := newPacer(Rate{}, Rate{}, Rate{Every: 10 * time.Millisecond, Burst: 30})
	var last time.Duration
	for i := range 32 {
		last = g.reserve(int64(i+1), t0)
	}
	if last != 20*time.Millisecond {
		t.Errorf("32nd call of the bot waits %v, want 20ms", last)
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
	if strings.Contains(werr.Error(), token) || !temporary(werr) {
		t.Errorf("wrapped: %q, temporary %v", werr, temporary(werr))
	}
	var ne net.Error
	_ = errors.As(werr, &ne) // must not panic
}

package push

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
)

// maxParts is the most messages one reply's text is split into; beyond it
// the text is cut with a note (every message counts against the channel's
// rate limit).
const maxParts = 4

// splitText cuts s into parts of at most limit bytes, at line ends where it
// can, at rune boundaries where it must. More than maxParts parts are cut
// to maxParts, the last ending with a note of what was left out.
func splitText(s string, limit int) []string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var parts []string
	for len(s) > 0 {
		if len(s) <= limit {
			parts = append(parts, s)
			break
		}
		cut := strings.LastIndexByte(s[:limit], '\n')
		if cut <= 0 {
			cut = runeCut(s, limit)
		}
		parts = append(parts, strings.TrimRight(s[:cut], "\n"))
		s = strings.TrimLeft(s[cut:], "\n")
	}
	if len(parts) <= maxParts {
		return parts
	}
	left := 0
	for _, p := range parts[maxParts-1:] {
		left += len(p)
	}
	note := fmt.Sprintf("\n… (%d more bytes not sent: see 日志 or the run log)", left)
	last := parts[maxParts-1]
	last = last[:runeCut(last, limit-len(note))] + note
	return append(parts[:maxParts-1], last)
}

// runeCut is the largest index ≤ n that does not split a rune.
func runeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	if n < 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// buttonLines shows the buttons of an alert as words to send to the bot
// (push channels have no buttons; those of notices, 停止 状态 画图, would
// only be noise in a group).
func buttonLines(r chat.Reply) string {
	if r.Kind != chat.KindAlert {
		return ""
	}
	var b strings.Builder
	for _, row := range r.Buttons {
		for _, btn := range row {
			if btn.URL != "" {
				fmt.Fprintf(&b, "\n↪ %s: %s", btn.Label, btn.URL)
				continue
			}
			fmt.Fprintf(&b, "\n↪ %s: send「%s」to the bot", btn.Label, btn.Data)
		}
	}
	return b.String()
}

// textOf is the reply's text with its buttons as lines, and notes.
func textOf(r chat.Reply, notes []string) string {
	t := r.Text + buttonLines(r)
	for _, n := range notes {
		t += "\n" + n
	}
	return strings.TrimLeft(t, "\n")
}

// imagesNotSent is the note for charts a channel cannot show.
func imagesNotSent(r chat.Reply, why string) []string {
	if len(r.Images) == 0 {
		return nil
	}
	what := "1 chart"
	if len(r.Images) > 1 {
		what = fmt.Sprintf("%d charts", len(r.Images))
	}
	return []string{fmt.Sprintf("(%s not shown here: %s; send 画图 to the bot)", what, why)}
}

// firstLine is the first line of s, at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:runeCut(s, n-len("…"))] + "…"
	}
	return s
}

package push

import (
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
)

// maxParts is the most messages one reply's text is split into; beyond it
// the text is cut with a note (every message counts against the channel's
// rate limit).
const maxParts = 4

// splitText cuts s into parts of at most limit bytes, at most maxParts
// of them (chat.SplitText).
func splitText(s string, limit int) []string { return chat.SplitText(s, limit, maxParts) }

// runeCut is chat.RuneCut.
func runeCut(s string, n int) int { return chat.RuneCut(s, n) }

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

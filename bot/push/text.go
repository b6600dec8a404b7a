package push

import (
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// maxParts is the most messages one reply's text is split into; beyond it
// the text is cut with a note (every message counts against the channel's
// rate limit).
const maxParts = 4

// splitText cuts s into parts of at most limit bytes, at most maxParts
// of them (chat.SplitText).
func splitText(s string, limit int, l i18n.Lang) []string {
	return chat.SplitText(s, limit, maxParts, l)
}

// runeCut is chat.RuneCut.
func runeCut(s string, n int) int { return chat.RuneCut(s, n) }

// buttonLines shows the buttons of an alert as words to send to the bot
// (push channels have no buttons; those of notices, 停止 状态 画图, would
// only be noise in a group).
func buttonLines(l i18n.Lang, r chat.Reply) string {
	var b strings.Builder
	for _, btn := range alertButtons(r) {
		if btn.URL != "" {
			fmt.Fprintf(&b, "\n↪ %s: %s", btn.Label, btn.URL)
			continue
		}
		b.WriteString(l.T(i18n.PushButton, btn.Label, btn.Data))
	}
	return b.String()
}

// alertButtons are the buttons a push channel shows, in order: an
// alert's; none of other replies.
func alertButtons(r chat.Reply) []chat.Button {
	if r.Kind != chat.KindAlert {
		return nil
	}
	var out []chat.Button
	for _, row := range r.Buttons {
		out = append(out, row...)
	}
	return out
}

// textOf is the reply's text with its buttons as lines, and notes.
func textOf(l i18n.Lang, r chat.Reply, notes []string) string {
	t := r.Text + buttonLines(l, r)
	for _, n := range notes {
		t += "\n" + n
	}
	return strings.TrimLeft(t, "\n")
}

// imagesNotSent is the note for charts a channel cannot show.
func imagesNotSent(l i18n.Lang, r chat.Reply, why string) []string {
	if len(r.Images) == 0 {
		return nil
	}
	return []string{l.T(i18n.PushNotShown, len(r.Images), why)}
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

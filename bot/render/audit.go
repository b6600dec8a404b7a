package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/store"
)

// AuditLine is one audit entry on one line: when, the messenger and chat,
// who (name and id), what they sent, allowed or refused (and why), and the
// run it touched:
//
//	2026-12-01 00:35:12 · telegram chat -100 · eve (7) · 停止 3 · refused: not an allowed user · run #3
func AuditLine(e store.AuditEntry) string {
	who := strconv.FormatInt(e.User, 10)
	if e.UserName != "" {
		who = fmt.Sprintf("%s (%d)", e.UserName, e.User)
	}
	verdict := "allowed"
	if !e.Allowed {
		verdict = "refused"
		if e.Reason != "" {
			verdict += ": " + e.Reason
		}
	}
	parts := []string{
		e.T.Local().Format("2006-01-02 15:04:05"),
		fmt.Sprintf("%s chat %d", def(e.Transport, "?"), e.Chat),
		who,
		Clip(strings.Join(strings.Fields(e.Text), " "), 60),
		verdict,
	}
	if e.Run != 0 {
		parts = append(parts, fmt.Sprintf("run #%d", e.Run))
	}
	return strings.Join(parts, " · ")
}

// AuditText is the answer of 审计: the entries, newest first.
func AuditText(entries []store.AuditEntry) string {
	if len(entries) == 0 {
		return "The audit is empty: nobody has sent a command yet."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Last %d command(s), newest first:", len(entries))
	for _, e := range entries {
		b.WriteString("\n" + AuditLine(e))
	}
	return b.String()
}

func def(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

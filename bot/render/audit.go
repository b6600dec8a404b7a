package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
)

// AuditLine is one audit entry on one line: when, the messenger and chat,
// who (name and id), what they sent, allowed or refused (and why), and the
// run it touched:
//
//	2026-12-01 00:35:12 · telegram chat -100 · eve (7) · 停止 3 · refused: not an allowed user · run #3
func AuditLine(l i18n.Lang, e history.AuditEntry) string {
	who := strconv.FormatInt(e.User, 10)
	if e.UserName != "" {
		who = fmt.Sprintf("%s (%d)", e.UserName, e.User)
	}
	verdict := l.T(i18n.AuditAllowed)
	if !e.Allowed {
		verdict = l.T(i18n.AuditRefused)
		if e.Reason != "" {
			verdict = l.T(i18n.AuditRefusedW, e.Reason)
		}
	}
	parts := []string{
		e.T.Local().Format("2006-01-02 15:04:05"),
		l.T(i18n.AuditChat, def(e.Transport, "?"), e.Chat),
		who,
		Clip(strings.Join(strings.Fields(e.Text), " "), 60),
		verdict,
	}
	if e.Run != 0 {
		parts = append(parts, l.T(i18n.AuditRun, e.Run))
	}
	return strings.Join(parts, " · ")
}

// AuditText is the answer of 审计: the entries, newest first.
func AuditText(l i18n.Lang, entries []history.AuditEntry) string {
	if len(entries) == 0 {
		return l.T(i18n.AuditEmpty)
	}
	var b strings.Builder
	b.WriteString(l.T(i18n.AuditHead, len(entries)))
	for _, e := range entries {
		b.WriteString("\n" + AuditLine(l, e))
	}
	return b.String()
}

func def(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

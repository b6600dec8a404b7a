package chat

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trainbot/trainbot/i18n"
)

// SplitText cuts s into parts of at most limit bytes, at line ends where it
// can, at rune boundaries where it must. More than maxParts parts are cut
// to maxParts, the last ending with a note of what was left out.
func SplitText(s string, limit, maxParts int, l i18n.Lang) []string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var parts []string
	for len(s) > 0 {
		if len(s) <= limit {
			parts = append(parts, s)
			break
		}
		cut := strings.LastIndexByte(s[:limit], '\n')
		if cut <= 0 {
			cut = RuneCut(s, limit)
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
	note := l.T(i18n.CutNote, left)
	last := parts[maxParts-1]
	last = last[:RuneCut(last, limit-len(note))] + note
	return append(parts[:maxParts-1], last)
}

// RuneCut is the largest index ≤ n that does not split a rune.
func RuneCut(s string, n int) int {
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

// ButtonData is the text a button sends: its Data, with the run id added
// to a bare command that takes a run ("停止" under run 12 sends "停止 12"),
// so that a button pressed later still means its run.
func ButtonData(data string, runID int64) string {
	if runID <= 0 || strings.ContainsAny(data, " \t\n") {
		return data
	}
	p := Parse(data)
	if p.Cmd == nil || p.Start || len(p.Args) > 0 || !strings.HasPrefix(p.Cmd.Args, "[run]") {
		return data
	}
	return data + " " + strconv.FormatInt(runID, 10)
}

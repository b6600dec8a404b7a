// Package termsafe makes text safe to print on a terminal. What trainbot
// prints on the command line and in the terminal chat holds text others
// wrote: a chat user's name and message (the audit), a note, a run's
// output and stderr, a process's name. A terminal acts on the control
// characters in it (ESC starts sequences that move the cursor, clear the
// screen, set the window title, or on some terminals write files or
// answer back as typed input), so they are shown as escapes instead:
// "\x1b[2J" prints as the eight characters \x1b[2J.
//
// JSON output needs none of this: encoding/json escapes control
// characters already.
//
// Argv writes a command line for a log line or a hint to paste into a
// shell, quoting the items a shell would not read as one word.
package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s with the characters a terminal acts on written as Go
// escapes: ESC and the other C0 controls (\x1b, \x07, \r…) except
// newline and tab, DEL (\x7f), the C1 controls U+0080–U+009F (\u009b,
// which is CSI where a terminal takes 8-bit controls) and bytes that are
// not UTF-8 (\xff). Everything else, other scripts and emoji included,
// is kept; s comes back unchanged when nothing needs escaping.
func String(s string) string { return escape(s, false) }

// Field is String for a part of one line (a row of a list, a cell of a
// table): newline and tab are escaped too (\n, \t), so a value cannot
// start a line of its own or shift the columns.
func Field(s string) string { return escape(s, true) }

const hexDigits = "0123456789abcdef"

func escape(s string, field bool) string {
	i := firstUnsafe(s, field)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case r == '\n' && field:
			b.WriteString(`\n`)
		case r == '\t' && field:
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unsafeRune(r, field):
			if r < 0x80 {
				b.WriteString(`\x`)
			} else {
				b.WriteString(`\u00`)
			}
			b.WriteByte(hexDigits[r>>4&0xf])
			b.WriteByte(hexDigits[r&0xf])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first byte of s to escape, -1 if none.
func firstUnsafe(s string, field bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if unsafeRune(rune(c), field) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r, field) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports whether a terminal acts on r: a C0 control (but
// newline and tab outside a field), DEL or a C1 control.
func unsafeRune(r rune, field bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return field
	case r < 0x20 || r == 0x7f:
		return true
	}
	return r >= 0x80 && r <= 0x9f
}

// Argv renders argv for a log line (or a command to paste into a shell),
// quoting the items a shell would not read as one word.
func Argv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			q[i] = strconv.Quote(a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

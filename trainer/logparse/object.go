package logparse

import (
	"strconv"
	"strings"
)

// maxObjectDepth bounds nesting in objects: deeper values are skipped.
const maxObjectDepth = 4

// objectIn finds a JSON object or a Python dict repr in the line and returns
// its numeric members, flattened with "/" ("train": {"loss": 1} is
// train/loss) and lower-cased. It accepts what json.dumps and repr() print:
// single or double quotes, True/False/None, NaN/Infinity/nan/inf and a
// trailing comma. ok is false when the line holds no complete object.
func objectIn(line string) (out []kv, ok bool) {
	start := strings.IndexByte(line, '{')
	if start < 0 || line[len(line)-1] != '}' {
		return nil, false
	}
	// A log prefix before the object is fine ("INFO {...}"), text after is not.
	sc := objScanner{s: line, i: start}
	if !sc.object("", 0, &out) {
		return nil, false
	}
	sc.space()
	if sc.i != len(sc.s) {
		return nil, false
	}
	return out, true
}

type objScanner struct {
	s string
	i int
}

func (sc *objScanner) space() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

func (sc *objScanner) peek() byte {
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

// object parses {...} at sc.i, appending numeric members under prefix.
func (sc *objScanner) object(prefix string, depth int, out *[]kv) bool {
	if sc.peek() != '{' {
		return false
	}
	sc.i++
	for {
		sc.space()
		if sc.peek() == '}' {
			sc.i++
			return true
		}
		key, ok := sc.str()
		if !ok {
			return false
		}
		sc.space()
		if sc.peek() != ':' {
			return false
		}
		sc.i++
		sc.space()
		name := strings.ToLower(strings.TrimSpace(key))
		if prefix != "" {
			name = prefix + "/" + name
		}
		if !sc.value(name, depth, out) {
			return false
		}
		sc.space()
		switch sc.peek() {
		case ',':
			sc.i++
		case '}':
			sc.i++
			return true
		default:
			return false
		}
	}
}

// value parses one value; numbers are appended under name.
func (sc *objScanner) value(name string, depth int, out *[]kv) bool {
	switch c := sc.peek(); {
	case c == '{':
		if depth+1 >= maxObjectDepth {
			return sc.skipNested()
		}
		return sc.object(name, depth+1, out)
	case c == '[' || c == '(':
		return sc.skipNested()
	case c == '"' || c == '\'':
		_, ok := sc.str()
		return ok
	default:
		start := sc.i
		for sc.i < len(sc.s) {
			ch := sc.s[sc.i]
			if ch == ',' || ch == '}' || ch == ' ' || ch == '\t' {
				break
			}
			if ch == '(' { // tensor(0.5) and friends
				if !sc.skipNested() {
					return false
				}
				continue
			}
			sc.i++
		}
		tok := sc.s[start:sc.i]
		switch tok {
		case "true", "false", "null", "True", "False", "None":
			return true
		case "":
			return false
		}
		if strings.HasPrefix(tok, "tensor(") && strings.HasSuffix(tok, ")") {
			tok = tok[len("tensor(") : len(tok)-1]
			if k := strings.IndexByte(tok, ','); k >= 0 {
				tok = tok[:k]
			}
		}
		if v, ok := parseNumber(tok); ok && name != "" {
			*out = append(*out, kv{name, v})
		}
		return true
	}
}

// str parses a quoted string (JSON escapes or Python quotes).
func (sc *objScanner) str() (string, bool) {
	q := sc.peek()
	if q != '"' && q != '\'' {
		return "", false
	}
	sc.i++
	start := sc.i
	escaped := false
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == '\\':
			escaped = true
			sc.i += 2
			continue
		case c == q:
			raw := sc.s[start:sc.i]
			sc.i++
			if escaped && q == '"' {
				if u, err := strconv.Unquote(`"` + raw + `"`); err == nil {
					return u, true
				}
			}
			return raw, true
		}
		sc.i++
	}
	return "", false
}

// skipNested skips a balanced [...], (...) or {...}, minding strings.
func (sc *objScanner) skipNested() bool {
	depth := 0
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch c {
		case '"', '\'':
			if _, ok := sc.str(); !ok {
				return false
			}
			continue
		case '[', '(', '{':
			depth++
		case ']', ')', '}':
			depth--
			if depth == 0 {
				sc.i++
				return true
			}
			if depth < 0 {
				return false
			}
		}
		sc.i++
	}
	return false
}

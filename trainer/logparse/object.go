package logparse

import (
	"math"
	"strconv"
	"strings"
)

// maxObjectDepth bounds nesting in objects: deeper values are skipped.
const maxObjectDepth = 4

// maxObjectTries bounds the '{' positions tried as the start of an object.
const maxObjectTries = 4

// member is one number (or, for "name" and "value", one string) of an
// object; its flattened lower-case name is arena[start:end].
type member struct {
	start, end int
	value      float64
	str        string // a string value; only kept for "name" and "value"
	isStr      bool
}

// objectIn finds a JSON object or a Python dict repr that ends the line and
// applies its members to li. It accepts what json.dumps and repr() print:
// single or double quotes, True/False/None, NaN/Infinity/nan/inf, a trailing
// comma, tensor(…) and np.float64(…) values. start is where the object
// begins (text before it is a prefix such as "INFO" or "Epoch 1:"); ok is
// false when the line ends with no complete object.
func (p *Parser) objectIn(li *lineInfo, line string) (start int, ok bool) {
	if line[len(line)-1] != '}' {
		return 0, false
	}
	off := 0
	for try := 0; try < maxObjectTries; try++ {
		i := strings.IndexByte(line[off:], '{')
		if i < 0 {
			return 0, false
		}
		start = off + i
		sc := objScanner{s: line, i: start, path: p.path[:0], arena: p.arena[:0], members: p.members[:0]}
		good := sc.object(0)
		sc.space()
		p.path, p.arena, p.members = sc.path, sc.arena, sc.members
		if good && sc.i == len(line) {
			p.applyObject(li, sc.arena, sc.members)
			return start, true
		}
		off = start + 1
	}
	return 0, false
}

// applyObject routes an object's members to progress and metrics.
func (p *Parser) applyObject(li *lineInfo, arena []byte, members []member) {
	named := false
	for _, m := range members {
		if m.isStr && string(arena[m.start:m.end]) == "name" {
			b := appendLower(p.nameBuf[:0], strings.TrimSpace(m.str))
			p.nameBuf = b
			if validName(b) {
				li.objName, li.objID = p.intern(b)
				named = true
			}
		}
	}
	for _, m := range members {
		name := arena[m.start:m.end]
		if named && string(name) == "value" {
			if m.isStr {
				if v, ok := specialFloat(m.str); ok {
					li.objValue, li.objHasV = v, true
				}
			} else {
				li.objValue, li.objHasV = m.value, true
			}
			continue
		}
		if m.isStr {
			continue
		}
		switch classify(name) {
		case keyStep:
			if m.value == math.Trunc(m.value) {
				li.setAbsStep(m.value)
			}
		case keyEpoch:
			li.setEpoch(m.value, false)
		case keyTotalSteps:
			li.setTotalSteps(m.value)
		case keyTotalEpochs:
			li.setTotalEpochs(m.value)
		case keyBatch, keyIgnored:
		default:
			if validName(name) && !isTimestamp(string(name), m.value) {
				s, id := p.intern(name)
				p.addMetric(li, s, id, m.value, false)
			}
		}
	}
}

// specialFloat reads the strings `trainbot parse --json` writes for values
// JSON has no number for: "NaN", "Inf", "-Inf" (and "Infinity", "nan"…).
func specialFloat(s string) (float64, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "nan", "+nan", "-nan":
		return math.NaN(), true
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	}
	return parseNumber(s)
}

type objScanner struct {
	s       string
	i       int
	path    []byte // the current flattened name
	arena   []byte // recorded names, append-only
	members []member
}

func (sc *objScanner) space() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t':
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

// record keeps the current name with a number or a string.
func (sc *objScanner) record(m member) {
	if len(sc.path) == 0 || len(sc.members) >= 1024 {
		return
	}
	m.start = len(sc.arena)
	sc.arena = append(sc.arena, sc.path...)
	m.end = len(sc.arena)
	sc.members = append(sc.members, m)
}

// object parses {...} at sc.i; its keys are flattened under the current
// path ("train": {"loss": 1} is train/loss).
func (sc *objScanner) object(depth int) bool {
	if sc.peek() != '{' {
		return false
	}
	sc.i++
	prefix := len(sc.path)
	defer func() { sc.path = sc.path[:prefix] }()
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
		// The name is prefix/key, lower-case, spaces as '_'.
		sc.path = sc.path[:prefix]
		if prefix > 0 {
			sc.path = append(sc.path, '/')
		}
		key = strings.TrimSpace(key)
		for k := 0; k < len(key); k++ {
			c := key[k]
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == ' ':
				c = '_'
			}
			sc.path = append(sc.path, c)
		}
		if !sc.value(depth) {
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

// value parses one value, recorded under the current path.
func (sc *objScanner) value(depth int) bool {
	switch c := sc.peek(); {
	case c == '{':
		if depth+1 >= maxObjectDepth {
			return sc.skipNested()
		}
		return sc.object(depth + 1)
	case c == '[' || c == '(':
		return sc.skipNested()
	case c == '"' || c == '\'':
		v, ok := sc.str()
		if !ok {
			return false
		}
		if n := string(sc.path); depth == 0 && (n == "name" || n == "value") {
			sc.record(member{str: v, isStr: true})
		} else if x, ok := quotedNumber(v); ok {
			// fairseq's JSON log quotes its numbers: "loss": "609.299".
			sc.record(member{value: x})
		}
		return true
	default:
		start := sc.i
		for sc.i < len(sc.s) {
			ch := sc.s[sc.i]
			if ch == ',' || ch == '}' || ch == ' ' || ch == '\t' {
				break
			}
			if ch == '(' { // tensor(0.5, device='cuda:0') and friends
				if !sc.skipNested() {
					return false
				}
				continue
			}
			if ch == '{' || ch == '[' || ch == '"' || ch == '\'' || ch == ':' {
				return false
			}
			sc.i++
		}
		tok := sc.s[start:sc.i]
		switch tok {
		case "":
			return false
		case "true", "false", "null", "True", "False", "None":
			return true
		}
		if v, ok := parseNumber(tok); ok {
			sc.record(member{value: v})
		}
		// A bare word that is not a number (an enum, device(type='cuda')) is
		// not a metric, but the object is still an object.
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

// quotedNumber reads a number quoted as a string; "nan" and words do not
// count, so that a quoted enum or version stays a string.
func quotedNumber(s string) (float64, bool) {
	if s == "" || len(s) > 32 || !(s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '.') {
		return 0, false
	}
	return parseNumber(s)
}

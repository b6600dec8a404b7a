package logparse

import (
	"math"
	"strconv"
	"strings"
)

// The fast path: learned line shapes.
//
// A training script prints the same few lines over and over with new
// numbers: "Epoch [3/10], Step [400/600], Loss: 0.2345". What scan makes of
// such a line depends on its words and punctuation, on how each number is
// written and on a few of its values (is it whole, at least 1, a Unix
// time…), never on the digits otherwise. So the parser learns each shape
// once: a line's shape is its text with every free-standing number cut
// out, plus the class of each number (see numClass). The second time a
// shape is seen, the line is scanned again with each number changed
// (keeping its class) to learn which number each field of the lineInfo
// comes from; from then on a line of that shape fills its lineInfo from
// its numbers without scanning, and fold (the state: steps, epochs,
// counters) runs as always.
//
// A template is only learned, and only used, when scan cannot depend on
// the parser's state: no custom patterns, outside configuration blocks and
// tables, and after a line that did not end with ':' (a table's title). A
// shape whose fields do not follow its numbers one to one ("25,000" read as
// 25000, a list of equal values, a name made of a number) is marked so
// and always scanned. FuzzParse checks that both paths give the same
// points and progress.

const (
	maxSlots     = 32   // numbers in a line with a shape
	maxTemplates = 1024 // shapes remembered; then the table starts over
	maxNumDigits = 15   // longer numbers are text
)

// numClass is how a number is written and which of the value tests scan
// makes it passes: lengths of its integer and fraction parts, a leading
// zero, its sign, its exponent as written, and the tests.
type numClass uint64

const (
	clsNeg numClass = 1 << (16 + iota)
	clsLead0
	clsExp
	clsExpPlus
	clsExpMinus
	clsWhole   // v == Trunc(v)
	clsZero    // v == 0
	clsGE1     // v >= 1
	clsLE1e9   // v <= 1e9
	clsUnix    // 1e9 <= v < 1e10 or 1e12 <= v < 1e13
	clsInt64OK // v == float64(int64(v))
)

// slot is one free-standing number of a line.
type slot struct {
	start, end int
	class      numClass
	v          float64
}

// template is what scan makes of a shape.
type template struct {
	lits    []string // the text around the numbers: len(classes)+1 pieces
	classes []numClass
	ok      bool // false: lines of this shape are scanned
	li      lineInfo
	// The number (an index into the line's slots) each field comes from,
	// -1 when it is the same for every line of the shape: the fixed
	// fields (see fieldsOf), then the metrics.
	src       [fixedFields]int8
	metricSrc []int8

	// Made from the above by compile, for reading lines of the shape:
	steps []numStep  // per number: the text before it, how it is written
	fixed bool       // every number's class says how it is written
	raw   bool       // a whole raw line of the shape is one clean segment
	sets  []fieldSet // the fields that come from a number
	work  lineInfo   // li with the numbers of the latest line (fill)
	// A shape whose numbers have fixed forms of at most eight digits a
	// part has a layout: every line of it is size bytes long, with its
	// text, signs and points at the same places (words) and its digits
	// at the same places too (nums).
	size  int
	words []layoutWord
	nums  []layoutNum
	// layout is the layout's number, unique in the parser (LineRead.Layout).
	layout uint64
}

// layoutWord is eight bytes of a layout, at off (the last word of a line
// overlaps the one before it): lit masks the bytes of text, sign or point,
// which are text; dig masks the digits.
type layoutWord struct {
	off            int
	lit, text, dig uint64
	digHi, digLow6 uint64 // 0x30 and 0x06 in the digits' bytes
}

// layoutNum is where a number of a layout is and what its class is.
type layoutNum struct {
	intOff, intLen, fracOff, fracLen int
	neg                              bool
	base, cls                        numClass
	intAt, fracAt                    digitsAt
	lead0Below                       uint64 // a value below it has a leading zero: 10^(intLen-1), 0 for one digit
	// The digits (as loaded and shifted) of the last line read with this
	// number in its class, and its value then: seen says they are set.
	lastInt, lastFrac uint64
	lastV             float64
	seen              bool
}

// digitsAt is where digits8 finds n digits in a line of a layout: in the
// eight bytes at off, shifted right by shr bits and left by shl.
type digitsAt struct{ off, shr, shl uint }

func digitsAtOf(i, n, size int) digitsAt {
	off := min(i, size-8)
	return digitsAt{uint(off), uint(8 * (i - off)), uint(8 * (8 - n))}
}

// numStep is a number of a shape and the text before it. When its class
// fixes how it is written (no exponent, at most maxNumDigits digits) it is
// n bytes: '-' when neg, intLen digits and, when fracLen > 0, a point and
// fracLen digits.
type numStep struct {
	lit             string
	word, mask      uint64   // lit's first eight bytes (load8), and which are lit's
	cls, base       numClass // base: the bits of cls the digits do not set
	n               int
	intLen, fracLen int
	neg             bool
}

// fieldSet is a field of lineInfo set from a number of the line: fixed
// field field when below fixedFields, else metric field-fixedFields; i or
// f is that field of the template's work.
type fieldSet struct {
	field, src int8
	i          *int64
	f          *float64
}

// compile makes steps, sets and work of a learned template.
func (tp *template) compile() {
	tp.steps = make([]numStep, len(tp.classes))
	tp.fixed = true
	for k, cls := range tp.classes {
		st := numStep{lit: tp.lits[k], cls: cls, intLen: int(cls & 0xff), fracLen: int(cls >> 8 & 0xff), neg: cls&clsNeg != 0}
		st.base = numClass(st.intLen) | numClass(st.fracLen)<<8 | cls&clsNeg
		for i := 0; i < len(st.lit) && i < 8; i++ {
			st.word |= uint64(st.lit[i]) << (8 * i)
			st.mask |= 0xff << (8 * i)
		}
		if cls&clsExp == 0 && st.intLen > 0 && st.intLen+st.fracLen <= maxNumDigits {
			st.n = st.intLen
			if st.fracLen > 0 {
				st.n += 1 + st.fracLen
			}
			if st.neg {
				st.n++
			}
		} else {
			tp.fixed = false
		}
		tp.steps[k] = st
	}
	// A raw line that starts and ends as the shape's text does has no
	// spaces to trim, no rank prefix (which starts with '[' or a digit) and
	// no control characters: it is the segment parseSegment would read.
	first, last := tp.lits[0], tp.lits[len(tp.lits)-1]
	tp.raw = first != "" && plainByte(first[0]) && first[0] != '[' && !isDigit(first[0]) &&
		(last == "" || plainByte(last[len(last)-1]))
	tp.work = tp.li
	tp.work.metrics = append([]kv(nil), tp.li.metrics...)
	tp.sets = tp.sets[:0]
	for f, src := range tp.src {
		if src >= 0 {
			i, x := tp.work.fixedField(f)
			tp.sets = append(tp.sets, fieldSet{int8(f), src, i, x})
		}
	}
	for i, src := range tp.metricSrc {
		if src >= 0 {
			tp.sets = append(tp.sets, fieldSet{int8(fixedFields + i), src, nil, &tp.work.metrics[i].value})
		}
	}
	tp.makeLayout()
}

// makeLayout sets size, words and nums when the shape has a layout.
func (tp *template) makeLayout() {
	if !tp.fixed {
		return
	}
	var line []byte // the shape's text, with 0 for digits
	var isDig []bool
	var nums []layoutNum
	for _, st := range tp.steps {
		if st.intLen > 8 || st.fracLen > 8 {
			return
		}
		line = append(line, st.lit...)
		for range len(st.lit) {
			isDig = append(isDig, false)
		}
		if st.neg {
			line, isDig = append(line, '-'), append(isDig, false)
		}
		nm := layoutNum{intOff: len(line), intLen: st.intLen, fracLen: st.fracLen, neg: st.neg,
			base: st.base | clsLE1e9, cls: st.cls} // at most eight digits: < 1e9, not a Unix time
		for range st.intLen {
			line, isDig = append(line, 0), append(isDig, true)
		}
		if st.fracLen > 0 {
			line, isDig = append(line, '.'), append(isDig, false)
			nm.fracOff = len(line)
			for range st.fracLen {
				line, isDig = append(line, 0), append(isDig, true)
			}
		}
		nums = append(nums, nm)
	}
	tail := tp.lits[len(tp.steps)]
	line = append(line, tail...)
	for range len(tail) {
		isDig = append(isDig, false)
	}
	if len(line) < 8 {
		return
	}
	// What follows each number is the shape's: a digit, a point or a
	// letter there, and no line matches (matchDirect's check).
	for _, nm := range nums {
		end := nm.intOff + nm.intLen
		if nm.fracLen > 0 {
			end = nm.fracOff + nm.fracLen
		}
		if end < len(line) && (isDig[end] || isWordChar(line[end]) || line[end] == '.') {
			return
		}
	}
	var words []layoutWord
	for off := 0; off < len(line); off += 8 {
		w := layoutWord{off: min(off, len(line)-8)}
		for i := range 8 {
			b := uint64(0xff) << (8 * i)
			if c := line[w.off+i]; isDig[w.off+i] {
				w.dig |= b
				w.digHi |= 0x30 << (8 * i)
				w.digLow6 |= 0x06 << (8 * i)
			} else {
				w.lit |= b
				w.text |= uint64(c) << (8 * i)
			}
		}
		words = append(words, w)
	}
	for i := range nums {
		nums[i].intAt = digitsAtOf(nums[i].intOff, nums[i].intLen, len(line))
		if nums[i].intLen > 1 {
			nums[i].lead0Below = pow10i[nums[i].intLen-1]
		}
		if nums[i].fracLen > 0 {
			nums[i].fracAt = digitsAtOf(nums[i].fracOff, nums[i].fracLen, len(line))
		}
	}
	tp.size, tp.words, tp.nums = len(line), words, nums
}

// plainByte reports whether c is a printable ASCII byte other than a space.
func plainByte(c byte) bool { return c > ' ' && c < 0x7f }

// shapes is a parser's learned shapes.
type shapes struct {
	off       bool // custom patterns: scan reads values no template can follow
	templates map[uint64]*template
	seen      map[uint64]struct{} // shapes seen once
	slots     []slot
	vals      [maxSlots]float64 // the numbers of a line read from a template
	spare     lineInfo
	noFast    bool         // tests: always scan
	hits      int          // lines read from a template (tests and benchmarks)
	recent    [2]*template // the templates of the last lines, tried first
	layouts   uint64       // layouts numbered so far
	lastShape uint64       // the layout the last whole line was read by, 0 when none
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

var pow10i = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// lexNumber reads a number at s[i] (a digit, or '-' before one): digits,
// a fraction, an exponent. It returns its end, class and value; ok is
// false when it is not one a shape can hold (too long), and then end is
// where the text it was goes on.
func lexNumber(s string, i int) (end int, cls numClass, v float64, ok bool) {
	j := i
	neg := s[j] == '-'
	if neg {
		j++
	}
	intStart := j
	var m uint64
	for j < len(s) && isDigit(s[j]) {
		m = m*10 + uint64(s[j]-'0')
		j++
	}
	intLen := j - intStart
	if intLen > maxNumDigits {
		for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
			j++
		}
		return j, 0, 0, false
	}
	intPart := m
	fracLen, fracZero := 0, true
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		j++
		f := j
		var frac uint64 // wraps past 19 digits; only used up to 15
		for j < len(s) && isDigit(s[j]) {
			frac = frac*10 + uint64(s[j]-'0')
			j++
		}
		fracLen = j - f
		if intLen+fracLen > 2*maxNumDigits {
			return j, 0, 0, false
		}
		if intLen+fracLen <= maxNumDigits {
			m = m*pow10i[fracLen] + frac
			fracZero = frac == 0
		} else {
			fracZero = strings.TrimRight(s[f:j], "0") == ""
		}
	}
	cls = numClass(intLen) | numClass(fracLen)<<8
	if neg {
		cls |= clsNeg
	}
	if intLen > 1 && s[intStart] == '0' {
		cls |= clsLead0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		return lexExponent(s, i, j, cls, m, fracLen, neg)
	}
	if intLen+fracLen > maxNumDigits {
		f, err := strconv.ParseFloat(s[i:j], 64)
		if err != nil || math.Abs(f) > maxStep {
			return j, 0, 0, false
		}
		return j, cls | valueClass(f), f, true
	}
	// Exact: m < 2^53 and 10^fracLen are floats, so one rounding, the same
	// as strconv's. The value tests come from the digits: a decimal of 15
	// digits or fewer with a fraction is no whole float.
	v = float64(m)
	if fracLen > 0 {
		v /= pow10[fracLen]
	}
	if neg {
		v = -v
	}
	if fracZero {
		cls |= clsWhole | clsInt64OK
	}
	switch {
	case intPart == 0 && fracZero:
		cls |= clsZero
	case intPart >= 1 && !neg:
		cls |= clsGE1
	}
	if neg || intPart < 1e9 || intPart == 1e9 && fracZero {
		cls |= clsLE1e9
	}
	if !neg && (intPart >= 1e9 && intPart < 1e10 || intPart >= 1e12 && intPart < 1e13) {
		cls |= clsUnix
	}
	return j, cls, v, true
}

// valueClass is the class bits of the value tests scan makes.
func valueClass(v float64) numClass {
	var cls numClass
	if v == math.Trunc(v) {
		cls |= clsWhole
	}
	if v == 0 {
		cls |= clsZero
	}
	if v >= 1 {
		cls |= clsGE1
	}
	if v <= 1e9 {
		cls |= clsLE1e9
	}
	if (v >= 1e9 && v < 1e10) || (v >= 1e12 && v < 1e13) {
		cls |= clsUnix
	}
	if v == float64(int64(v)) {
		cls |= clsInt64OK
	}
	return cls
}

// lexExponent finishes lexNumber for a number with an exponent at s[j].
func lexExponent(s string, i, j int, cls numClass, m uint64, fracLen int, neg bool) (end int, _ numClass, v float64, ok bool) {
	k := j + 1
	sign := numClass(0)
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		sign = clsExpPlus
		if s[k] == '-' {
			sign = clsExpMinus
		}
		k++
	}
	d, exp := k, 0
	for k < len(s) && isDigit(s[k]) && k-d < 4 {
		exp = exp*10 + int(s[k]-'0')
		k++
	}
	expLen := k - d
	if expLen == 0 || (k < len(s) && isDigit(s[k])) {
		return k, 0, 0, false
	}
	if sign == clsExpMinus {
		exp = -exp
	}
	// How the exponent is written is part of the class; its value sets
	// the magnitude, which the value tests below see.
	cls |= clsExp | sign | numClass(expLen)<<40 | numClass(uint16(int16(exp)))<<44
	if s[j] == 'E' {
		cls |= 1 << 60
	}
	intLen := int(cls & 0xff)
	if e10 := exp - fracLen; intLen+fracLen <= maxNumDigits && e10 >= -22 && e10 <= 22 {
		v = float64(m)
		if e10 < 0 {
			v /= pow10[-e10]
		} else {
			v *= pow10[e10]
		}
		if neg {
			v = -v
		}
	} else {
		f, err := strconv.ParseFloat(s[i:k], 64)
		if err != nil {
			return k, 0, 0, false
		}
		v = f
	}
	if math.IsInf(v, 0) || math.Abs(v) > maxStep {
		return k, 0, 0, false
	}
	return k, cls | valueClass(v), v, true
}

// shapeOf finds the free-standing numbers of s (not part of a word, a
// version or a longer number) and hashes the rest with their classes.
func (sh *shapes) shapeOf(s string) (uint64, bool) {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	slots := sh.slots[:0]
	lit := 0
	for i := 0; i < len(s); {
		c := s[i]
		if !isDigit(c) && !(c == '-' && i+1 < len(s) && isDigit(s[i+1])) {
			i++
			continue
		}
		if i > 0 && (isWordChar(s[i-1]) || s[i-1] == '.' || s[i-1] == '-' || s[i-1] == '+') {
			i++
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			continue
		}
		end, cls, v, ok := lexNumber(s, i)
		if !ok || (end < len(s) && (isWordChar(s[end]) || s[end] == '.')) {
			i = end
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			continue
		}
		if len(slots) == maxSlots {
			sh.slots = slots
			return 0, false
		}
		for k := lit; k < i; k++ {
			h = (h ^ uint64(s[k])) * prime
		}
		h = (h ^ 0x100 ^ uint64(cls)) * prime
		h = (h ^ uint64(cls)>>32) * prime
		slots = append(slots, slot{start: i, end: end, class: cls, v: v})
		lit, i = end, end
	}
	for k := lit; k < len(s); k++ {
		h = (h ^ uint64(s[k])) * prime
	}
	sh.slots = slots
	return h, true
}

// neutral reports whether scan of the next line cannot depend on t.
func neutral(t *track) bool {
	return t.reprDepth == 0 && len(t.table.cols) == 0 && t.title == ""
}

// match returns the template of s's shape when it has one that lines of
// it can use. sh.slots holds s's numbers afterwards.
func (sh *shapes) match(s string, key uint64) *template {
	tp := sh.templates[key]
	if tp == nil || !tp.ok || len(tp.classes) != len(sh.slots) {
		return nil
	}
	prev := 0
	for k, sl := range sh.slots {
		if sl.class != tp.classes[k] || s[prev:sl.start] != tp.lits[k] {
			return nil
		}
		prev = sl.end
	}
	if s[prev:] != tp.lits[len(sh.slots)] {
		return nil
	}
	return tp
}

// matchDirect reports whether s has tp's shape, reading its numbers into
// sh.vals as it goes; no hash. It finds what shapeOf would: the text
// around tp's numbers is the same, so is what precedes and follows each.
func (sh *shapes) matchDirect(s string, tp *template) bool {
	if tp.words != nil {
		return sh.matchLayout(s, tp)
	}
	if !tp.fixed {
		return sh.matchLex(s, tp)
	}
	pos := 0
	steps := tp.steps
	if len(steps) > maxSlots {
		return false
	}
	for i := range steps {
		st := &steps[i]
		start := pos + len(st.lit)
		end := start + st.n
		if end > len(s) {
			return false
		}
		// The text before the number: its first eight bytes at once.
		if pos+8 <= len(s) {
			if load8(s, pos)&st.mask != st.word || len(st.lit) > 8 && s[pos+8:start] != st.lit[8:] {
				return false
			}
		} else if s[pos:start] != st.lit {
			return false
		}
		if end < len(s) && (isWordChar(s[end]) || s[end] == '.') {
			return false // a digit, a point or a letter after it: another number
		}
		// The number, as lexNumber reads it.
		b := s[start:end]
		j := 0
		if st.neg {
			if b[0] != '-' {
				return false
			}
			j = 1
		}
		lead := b[j]
		var m uint64
		for e := j + st.intLen; j < e; j++ {
			d := b[j] - '0'
			if d > 9 {
				return false
			}
			m = m*10 + uint64(d)
		}
		intPart, fracZero := m, true
		var v float64
		if st.fracLen > 0 {
			if b[j] != '.' {
				return false
			}
			var frac uint64
			for j++; j < len(b); j++ {
				d := b[j] - '0'
				if d > 9 {
					return false
				}
				frac = frac*10 + uint64(d)
			}
			m = m*pow10i[st.fracLen] + frac
			fracZero = frac == 0
			v = float64(m) / pow10[st.fracLen]
		} else {
			v = float64(m)
		}
		cls := st.base
		if st.neg {
			v = -v
		}
		if st.intLen > 1 && lead == '0' {
			cls |= clsLead0
		}
		if fracZero {
			cls |= clsWhole | clsInt64OK
		}
		switch {
		case intPart == 0 && fracZero:
			cls |= clsZero
		case intPart >= 1 && !st.neg:
			cls |= clsGE1
		}
		if st.intLen < 10 {
			cls |= clsLE1e9 // and not clsUnix: intPart < 1e9
		} else {
			if st.neg || intPart < 1e9 || intPart == 1e9 && fracZero {
				cls |= clsLE1e9
			}
			if !st.neg && (intPart >= 1e9 && intPart < 1e10 || intPart >= 1e12 && intPart < 1e13) {
				cls |= clsUnix
			}
		}
		if cls != st.cls {
			return false
		}
		sh.vals[i] = v
		pos = end
	}
	return s[pos:] == tp.lits[len(steps)]
}

// matchLayout is matchDirect for a shape with a layout: the line's text
// is checked eight bytes at a time, then its numbers read eight digits at
// a time; the value and the class of each are what lexNumber makes.
func (sh *shapes) matchLayout(s string, tp *template) bool {
	nums := tp.nums
	if len(s) != tp.size || len(nums) > len(sh.vals) {
		return false
	}
	const hi4 = 0xf0f0f0f0f0f0f0f0
	for i := range tp.words {
		w := &tp.words[i]
		x := load8(s, w.off)
		// A digit is 0x30 to 0x39: its high half 3, and still 3 plus 6.
		// Digits do not carry into the next byte, and a byte that does
		// (0xfa or more) fails the first test.
		if x&w.lit != w.text || x&hi4&w.dig != w.digHi || ((x&w.dig)+w.digLow6)&hi4&w.dig != w.digHi {
			return false
		}
	}
	vals := sh.vals[:len(nums)]
	for i := range nums {
		nm := &nums[i]
		// digits8, by hand: the compiler does not inline it.
		a := &nm.intAt
		x := load8(s, int(a.off)) >> (a.shr & 63) << (a.shl & 63)
		var y uint64
		if nm.fracLen > 0 {
			y = load8(s, int(nm.fracAt.off)) >> (nm.fracAt.shr & 63) << (nm.fracAt.shl & 63)
		}
		if nm.seen && x == nm.lastInt && y == nm.lastFrac {
			// The digits of the last line that had this number: its value,
			// and its class matched.
			vals[i] = nm.lastV
			continue
		}
		nm.lastInt, nm.lastFrac = x, y
		x = (x & 0x0f0f0f0f0f0f0f0f) * 2561 >> 8
		x = (x & 0x00ff00ff00ff00ff) * 6553601 >> 16
		intPart := (x & 0x0000ffff0000ffff) * 42949672960001 >> 32
		m, fracZero := intPart, true
		var v float64
		if nm.fracLen > 0 {
			x := y
			x = (x & 0x0f0f0f0f0f0f0f0f) * 2561 >> 8
			x = (x & 0x00ff00ff00ff00ff) * 6553601 >> 16
			frac := (x & 0x0000ffff0000ffff) * 42949672960001 >> 32
			m = m*pow10i[nm.fracLen&15] + frac
			fracZero = frac == 0
			v = float64(m) / pow10[nm.fracLen&15]
		} else {
			v = float64(m)
		}
		cls := nm.base
		if nm.neg {
			v = -v
		}
		if intPart < nm.lead0Below {
			cls |= clsLead0 // intLen digits, the first a 0
		}
		if fracZero {
			cls |= clsWhole | clsInt64OK
			if intPart == 0 {
				cls |= clsZero
			}
		}
		if intPart >= 1 && !nm.neg {
			cls |= clsGE1
		}
		if cls != nm.cls {
			nm.seen = false
			return false
		}
		vals[i] = v
		nm.lastV, nm.seen = v, true
	}
	return true
}

// digits8 is the value of the digits (one to eight) at a of s: they are
// loaded at once, moved to the top of the word (the bytes below are
// leading zeros), and summed in three multiplications.
func digits8(s string, a digitsAt) uint64 {
	x := load8(s, int(a.off)) >> (a.shr & 63) << (a.shl & 63)
	x = (x & 0x0f0f0f0f0f0f0f0f) * 2561 >> 8
	x = (x & 0x00ff00ff00ff00ff) * 6553601 >> 16
	return (x & 0x0000ffff0000ffff) * 42949672960001 >> 32
}

// load8 is the eight bytes of s at i, the first the lowest.
func load8(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// matchLex is matchDirect for shapes with numbers lexNumber must read.
func (sh *shapes) matchLex(s string, tp *template) bool {
	slots := sh.slots[:0]
	pos := 0
	for k, lit := range tp.lits[:len(tp.classes)] {
		if !strings.HasPrefix(s[pos:], lit) {
			return false
		}
		pos += len(lit)
		if pos >= len(s) || !(isDigit(s[pos]) || s[pos] == '-' && pos+1 < len(s) && isDigit(s[pos+1])) {
			return false
		}
		end, cls, v, ok := lexNumber(s, pos)
		if !ok || cls != tp.classes[k] || (end < len(s) && (isWordChar(s[end]) || s[end] == '.')) {
			return false
		}
		slots = append(slots, slot{start: pos, end: end, class: cls, v: v})
		pos = end
	}
	sh.slots = slots
	sh.slotVals()
	return s[pos:] == tp.lits[len(tp.classes)]
}

// slotVals copies the values of sh.slots to sh.vals.
func (sh *shapes) slotVals() {
	for i, sl := range sh.slots[:min(len(sh.slots), maxSlots)] {
		sh.vals[i] = sl.v
	}
}

// fill returns the lineInfo of a line of tp's shape whose numbers are
// vals: tp.work, or li for a progress bar (fold filters its metrics in
// place).
func (tp *template) fill(li *lineInfo, vals *[maxSlots]float64) *lineInfo {
	if tp.li.bar {
		m := li.metrics[:0]
		*li = tp.li
		li.metrics = append(m, tp.li.metrics...)
		for _, fs := range tp.sets {
			v := vals[fs.src]
			if fs.field >= fixedFields {
				li.metrics[fs.field-fixedFields].value = v
			} else {
				li.setField(int(fs.field), v)
			}
		}
		return li
	}
	for _, fs := range tp.sets {
		v := vals[fs.src&(maxSlots-1)]
		if fs.i != nil {
			*fs.i = int64(v) // as setField
		} else {
			*fs.f = v
		}
	}
	return &tp.work
}

// direct reads a whole raw line from one of the last templates, when it
// has the shape of one that raw lines can have: the line is then the one
// clean segment of rank 0 that scanLine would read from it. It returns nil
// when the line is not read so.
func (sh *shapes) direct(li *lineInfo, s string, t *track) *lineInfo {
	if sh.off || sh.noFast || !neutral(t) {
		return nil
	}
	for i, tp := range sh.recent {
		if tp != nil && tp.raw && sh.matchDirect(s, tp) {
			sh.recent[0], sh.recent[i] = tp, sh.recent[0]
			sh.hits++
			sh.lastShape = tp.layout // the whole raw line: its text is the layout's
			return tp.fill(li, &sh.vals)
		}
	}
	return nil
}

// readWhole notes the layout of tp as the line's (LineRead.Layout) when
// s, the text tp matched, is the whole raw line. A match of a shape with a
// layout has its text and the classes of its numbers, which fix where the
// digits are.
func (sh *shapes) readWhole(tp *template, whole bool) {
	if whole {
		sh.lastShape = tp.layout
	}
}

// scanLine returns what s says: from a template when s's shape has one,
// else scanned into li, learning the shape when it is seen the second
// time. rawTried says s is a raw line direct did not read: the templates
// it tried need not be tried again.
func (p *Parser) scanLine(li *lineInfo, s string, t *track, rawTried bool) *lineInfo {
	sh := &p.shapes
	if sh.off || sh.noFast || !neutral(t) {
		li.reset()
		p.scan(li, s, t)
		return li
	}
	for i, tp := range sh.recent {
		if tp != nil && !(rawTried && tp.raw) && sh.matchDirect(s, tp) {
			sh.recent[0], sh.recent[i] = tp, sh.recent[0]
			sh.hits++
			sh.readWhole(tp, rawTried)
			return tp.fill(li, &sh.vals)
		}
	}
	key, ok := sh.shapeOf(s)
	li.reset()
	if !ok {
		p.scan(li, s, t)
		return li
	}
	if tp := sh.match(s, key); tp != nil {
		sh.recent[0], sh.recent[1] = tp, sh.recent[0]
		sh.hits++
		sh.readWhole(tp, rawTried)
		sh.slotVals()
		return tp.fill(li, &sh.vals)
	}
	p.scan(li, s, t)
	if !neutral(t) {
		return li
	}
	if _, known := sh.templates[key]; known {
		return li // a shape that failed to learn, or a hash collision
	}
	if _, again := sh.seen[key]; !again {
		if sh.seen == nil || len(sh.seen) >= maxTemplates {
			sh.seen = make(map[uint64]struct{})
		}
		sh.seen[key] = struct{}{}
		return li
	}
	delete(sh.seen, key)
	if sh.templates == nil || len(sh.templates) >= maxTemplates {
		sh.templates = make(map[uint64]*template)
	}
	sh.templates[key] = p.learn(li, s)
	return li
}

// learn builds the template of s's shape from li, what scan made of s:
// each number is changed twice, at its last and its first digit, keeping
// its class, and s is scanned again; a field that follows one number
// exactly comes from it, a field that never changes is the shape's, and
// anything else (a field that follows two numbers, or not exactly; a
// change of anything but numbers) leaves the shape to scan.
func (p *Parser) learn(li *lineInfo, s string) *template {
	slots := append([]slot(nil), p.shapes.slots...)
	tp := &template{lits: make([]string, 0, len(slots)+1), classes: make([]numClass, len(slots))}
	prev := 0
	for k, sl := range slots {
		tp.lits = append(tp.lits, strings.Clone(s[prev:sl.start]))
		tp.classes[k] = sl.class
		prev = sl.end
	}
	tp.lits = append(tp.lits, strings.Clone(s[prev:]))
	tp.li = *li
	tp.li.metrics = append([]kv(nil), li.metrics...)
	tp.li.label = strings.Clone(li.label)
	tp.metricSrc = make([]int8, len(li.metrics))
	base := fieldsOf(&tp.li)
	srcs := make([]int8, len(base))
	for i := range srcs {
		srcs[i] = -1
	}
	var scratch track
	buf := make([]byte, 0, len(s))
	for k, sl := range slots {
		variants := perturbations(s[sl.start:sl.end], sl.class)
		if len(variants) == 0 && sl.class&clsZero == 0 {
			return tp // a number that cannot be changed in its class: its fields cannot be told
		}
		for _, variant := range variants {
			buf = append(append(append(buf[:0], s[:sl.start]...), variant...), s[sl.end:]...)
			vs := string(buf)
			_, vcls, vv, ok := lexNumber(vs, sl.start)
			if !ok || vcls != sl.class {
				return tp
			}
			other := &p.shapes.spare
			other.reset()
			scratch = track{}
			p.scan(other, vs, &scratch)
			if !sameStructure(&tp.li, other) || !neutral(&scratch) {
				return tp
			}
			got := fieldsOf(other)
			for f := range base {
				if sameValue(got[f], base[f]) {
					continue
				}
				if (srcs[f] >= 0 && srcs[f] != int8(k)) || got[f] != vv || base[f] != sl.v {
					return tp
				}
				srcs[f] = int8(k)
			}
		}
	}
	copy(tp.src[:], srcs)
	copy(tp.metricSrc, srcs[fixedFields:])
	tp.compile()
	if tp.words != nil {
		p.shapes.layouts++
		tp.layout = p.shapes.layouts
	}
	tp.ok = true
	return tp
}

const fixedFields = 8

// fixedField is fixed field f of li: an integer or a float, in one order
// for reading (fieldsOf) and setting (setField).
func (li *lineInfo) fixedField(f int) (*int64, *float64) {
	switch f {
	case 0:
		return &li.absStep, nil
	case 1:
		return &li.n, nil
	case 2:
		return &li.total, nil
	case 3:
		return nil, &li.epoch
	case 4:
		return &li.epochTotal, nil
	case 5:
		return &li.totalSteps, nil
	case 6:
		return &li.stepsKey, nil
	}
	return nil, &li.objValue
}

// fieldsOf lists li's numbers: the fixed fields, then each metric's value.
func fieldsOf(li *lineInfo) []float64 {
	out := make([]float64, fixedFields, fixedFields+len(li.metrics))
	for f := range fixedFields {
		if i, x := li.fixedField(f); i != nil {
			out[f] = float64(*i)
		} else {
			out[f] = *x
		}
	}
	for _, m := range li.metrics {
		out = append(out, m.value)
	}
	return out
}

// setField sets fixed field f to v.
func (li *lineInfo) setField(f int, v float64) {
	if i, x := li.fixedField(f); i != nil {
		*i = int64(v)
	} else {
		*x = v
	}
}

// sameStructure reports whether two lineInfos differ in numbers only.
func sameStructure(a, b *lineInfo) bool {
	if a.hasAbs != b.hasAbs || a.kind != b.kind || a.otherLoop != b.otherLoop || a.hasEpoch != b.hasEpoch ||
		a.epochScoped != b.epochScoped || a.bar != b.bar || a.objName != b.objName || a.objID != b.objID ||
		a.objHasV != b.objHasV || a.config != b.config || a.literals != b.literals || a.label != b.label ||
		a.hasStepsKey != b.hasStepsKey || len(a.metrics) != len(b.metrics) {
		return false
	}
	for i := range a.metrics {
		if a.metrics[i].name != b.metrics[i].name || a.metrics[i].id != b.metrics[i].id ||
			math.IsNaN(a.metrics[i].value) != math.IsNaN(b.metrics[i].value) {
			return false
		}
	}
	return true
}

// perturbations returns up to two other numbers of the same class as num:
// one with the last digit of its mantissa changed, one with its first.
func perturbations(num string, cls numClass) []string {
	first, last := -1, -1
	for i := 0; i < len(num) && num[i] != 'e' && num[i] != 'E'; i++ {
		if isDigit(num[i]) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	var out []string
	for _, at := range []int{last, first} {
		for c := byte('0'); c <= '9'; c++ {
			if c == num[at] {
				continue
			}
			b := []byte(num)
			b[at] = c
			if _, vc, _, ok := lexNumber(string(b), 0); ok && vc == cls {
				out = append(out, string(b))
				break
			}
		}
		if first == last {
			break
		}
	}
	return out
}

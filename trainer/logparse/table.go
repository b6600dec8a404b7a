package logparse

import (
	"math"
	"strings"

	bytesize "github.com/trainbot/trainbot/internal/units"
)

// Column tables: a header line of names, then rows of values under them.
//
//	      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
//	        1/3      2.61G      1.235      1.447      1.219        230        640: 12%|█▎ | 1/8 [00:02<…]
//
//	epoch     train_loss  valid_loss  error_rate  time
//	0         0.169390    0.021388    0.005413    00:14
//
//	|   AP   |  AP50  |  AP75  |
//	|:------:|:------:|:------:|
//	| 70.916 | 86.567 | 80.134 |
//
// A header's names are separated by two spaces or more (or are the cells of
// a '|' table), none is a number, and one of them says what the table is
// about: an epoch or step column, or a name of a measure (loss, acc, mAP…).
// A row has as many fields as the header, mostly numbers; what follows its
// first ": " is a progress bar (ultralytics, YOLOv5). Each named number is a
// point, except counts (Instances, Images, Size) and other bookkeeping; an
// epoch column ("1/3") is the epoch; a memory column ("2.61G") is in bytes.
// A row with a text field (ultralytics' "all", a class name) is read only
// right after its header: the rows after it are per-class breakdowns.

// maxTableCols bounds the columns of a table.
const maxTableCols = 32

type table struct {
	cols   []tableCol
	pipes  bool   // a '|' table
	rows   int    // rows read since the header
	header string // as printed, to know it again when a bar redraws it
	title  string // the title it was read with
}

type tableCol struct {
	name string
	id   int32
	role uint8
}

const (
	colMetric uint8 = iota
	colEpoch
	colStep
	colMemory
	colSkip
)

// tableLine reads s as a table header or a row of the current table. It
// returns the part of s that is left for the other formats (a row's
// progress bar) and whether s was a table line.
func (p *Parser) tableLine(li *lineInfo, s string, t *track) (string, bool) {
	pipes := s[0] == '|'
	active := len(t.table.cols) > 0 && t.table.pipes == pipes && (pipes || rowStart(s[0]))
	if !pipes && !headerShape(s) && !(active && countFields(s, len(t.table.cols)+1) == len(t.table.cols)) {
		return s, false // neither a header nor a row: most lines
	}
	head, rest := s, ""
	if !pipes {
		if i := strings.Index(s, ": "); i >= 0 {
			head, rest = s[:i], s[i+2:]
		}
	}
	if active && p.tableRow(li, head, t) {
		return rest, true
	}
	if p.tableHeader(head, pipes, t) {
		return rest, true
	}
	return s, false
}

// rowStart reports whether a row may start with c: a number, a word
// (ultralytics' "all"), fastai's "#na#".
func rowStart(c byte) bool {
	return charClass[c]&(chLetter|chDigit) != 0 || c == '-' || c == '.' || c == '#'
}

// countFields counts the fields of s separated by spaces, up to limit and
// up to a field ending with ':' (a row's progress bar follows).
func countFields(s string, limit int) int {
	n := 0
	for i := 0; i < len(s) && n < limit; {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			break
		}
		n++
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		if s[i-1] == ':' {
			break
		}
	}
	return n
}

// headerShape reports quickly whether s may be a header laid out in
// columns: three fields or more that start with a letter, separated by
// two spaces or more, up to a ": " (a bar may follow). Most lines fail at
// their first gap.
func headerShape(s string) bool {
	n := 0
	for i := 0; i < len(s); {
		if !isLetter(s[i]) {
			return false
		}
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		n++
		if i == len(s) || s[i-1] == ':' {
			break
		}
		if s[i] == ' ' && (i+1 >= len(s) || (s[i+1] != ' ' && s[i+1] != '\t')) {
			return false
		}
		i = skipSpaces(s, i)
	}
	return n >= 3
}

// fields splits a header or a row: at runs of spaces, or at '|' for a '|'
// table. gaps reports whether every gap between fields is two spaces or
// more (or a tab), as in a header laid out in columns.
func fields(s string, pipes bool, out []string) (f []string, gaps bool) {
	f, gaps = out[:0], true
	if pipes {
		s = strings.TrimSpace(s)
		if len(s) < 2 || s[len(s)-1] != '|' {
			return nil, false
		}
		for _, c := range strings.Split(s[1:len(s)-1], "|") {
			if len(f) == maxTableCols+1 {
				return nil, false
			}
			f = append(f, strings.TrimSpace(c))
		}
		return f, true
	}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		if len(f) == maxTableCols+1 {
			return nil, false
		}
		f = append(f, s[i:j])
		k := j
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if k < len(s) && k-j < 2 && s[j] != '\t' {
			gaps = false
		}
		i = k
	}
	return f, gaps
}

// tableHeader reads s as a header and makes it the track's table.
func (p *Parser) tableHeader(s string, pipes bool, t *track) bool {
	if len(t.table.cols) > 0 && s == t.table.header && t.title == t.table.title && pipes == t.table.pipes {
		t.table.rows = 0 // the same header again: a bar's redraw, the next epoch's
		return true
	}
	if !pipes && strings.IndexByte(s, ' ') < 0 {
		return false
	}
	f, gaps := fields(s, pipes, p.fieldBuf)
	p.fieldBuf = f
	if !gaps || len(f) < 3 || len(f) > maxTableCols || (pipes && len(f) < 2) {
		return false
	}
	about := false
	for _, name := range f {
		if !headerName(name) {
			return false
		}
		about = about || aboutName(name)
	}
	if !about {
		return false
	}
	cols := make([]tableCol, 0, len(f))
	group := ""
	for _, name := range f {
		b := p.nameBuf[:0]
		if t.title != "" {
			b = append(append(b, t.title...), '/')
		}
		if group != "" {
			b = append(append(b, group...), '_')
		}
		if i := strings.IndexByte(name, '('); i > 0 {
			// ultralytics' "Box(P R mAP50 mAP50-95)": box_p … box_map50-95.
			group = strings.ToLower(name[:i])
			b = append(appendLower(b, name[:i]), '_')
			name = name[i+1:]
		}
		closes := strings.HasSuffix(name, ")")
		name = strings.TrimSuffix(name, ")")
		b = appendLower(b, name)
		p.nameBuf = b
		if closes {
			group = ""
		}
		col := tableCol{role: colMetric, id: -1}
		lk := appendLower(p.scratch[:0], name)
		p.scratch = lk
		switch classify(lk) {
		case keyEpoch:
			col.role = colEpoch
		case keyStep:
			col.role = colStep
		case keyMetric:
			if countColumn(string(lk)) {
				col.role = colSkip
			} else if strings.Contains(string(lk), "mem") {
				col.role = colMemory
			}
		default:
			col.role = colSkip
		}
		if col.role != colSkip && validName(b) {
			col.name, col.id = p.intern(b)
		} else {
			col.role = colSkip
		}
		for _, c := range cols {
			if c.name == col.name && col.name != "" {
				return false // "| category | AP | category | AP |": not one row of measures
			}
		}
		cols = append(cols, col)
	}
	t.table = table{cols: cols, pipes: pipes, header: strings.Clone(s), title: t.title}
	return true
}

// countColumns count things in a batch or a dataset: ultralytics'
// Instances and Size, YOLOv5's targets and img_size, a class name.
var countColumns = newWordSet("instances", "images", "targets", "labels", "size", "class", "category", "name", "count", "n")

func countColumn(s string) bool { return anyWord(s, countColumns) }

// headerName reports whether a header field may name a column: it starts
// with a letter and has no '=' or ':' of a pair ("mAP@.5:.95" has one
// inside, which is a name).
func headerName(s string) bool {
	if s == "" || !isLetter(s[0]) || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isKeyChar(c), c == '(', c == ')', c == '%', c == '#':
		case c == ':' && i+1 < len(s):
		default:
			return false
		}
	}
	return true
}

// aboutWords in a column name make a table one of measures.
var aboutWords = []string{"loss", "acc", "map", "error", "err", "f1", "ppl", "perplexity", "auc", "iou", "precision", "recall", "score", "bleu", "mse", "mae", "psnr", "ssim", "dice", "wer", "reward"}

// aboutName reports whether a column says the table is one of training
// measures: an epoch or step column, or a measure's name; "AP" of COCO
// ("AP", "AP50", "APs") counts.
func aboutName(s string) bool {
	var buf [maxNameLen]byte
	l := appendLower(buf[:0], s)
	switch classify(l) {
	case keyEpoch, keyStep:
		return true
	}
	ls := string(l) // no allocation: comparisons only
	for _, w := range aboutWords {
		if strings.Contains(ls, w) {
			return true
		}
	}
	return strings.HasPrefix(ls, "ap") && (len(ls) == 2 || strings.Trim(ls[2:], "0123456789sml") == "")
}

// tableRow reads s as a row of the track's table.
func (p *Parser) tableRow(li *lineInfo, s string, t *track) bool {
	tb := &t.table
	f, _ := fields(s, tb.pipes, p.fieldBuf)
	p.fieldBuf = f
	if len(f) != len(tb.cols) {
		return false
	}
	if tb.pipes && len(f) > 0 && strings.Trim(strings.Join(f, ""), ":-") == "" {
		return true // "|:------:|:------:|" under a '|' header
	}
	vals := p.rowVals[:0]
	numbers, text := 0, false
	for i, v := range f {
		x, ok := math.NaN(), false
		switch {
		case v == "" || v == "#na#" || v == "-":
		case tb.cols[i].role == colEpoch:
			ok = epochField(v)
		case tb.cols[i].role == colMemory:
			if x, ok = byteValue(v); !ok {
				x, ok = tableValue(v)
			}
		default:
			x, ok = tableValue(v)
		}
		switch {
		case ok:
			numbers++
		case v == "" || v == "#na#" || v == "-" || isClock(v):
		default:
			text = true
		}
		if !ok {
			x = math.NaN()
		}
		vals = append(vals, x)
	}
	p.rowVals = vals
	if numbers == 0 || 2*numbers < len(f) || (text && tb.rows > 0) {
		return false
	}
	tb.rows++
	for i, v := range f {
		col := tb.cols[i]
		switch col.role {
		case colSkip:
		case colEpoch:
			if !epochField(v) {
				continue
			}
			n, j, _ := scanUint(v, 0)
			li.setEpoch(float64(n), true)
			if j < len(v) && v[j] == '/' {
				total, _, _ := scanUint(v, j+1)
				li.setTotalEpochs(float64(total))
			}
		case colStep:
			if n, j, ok := scanUint(v, 0); ok && j == len(v) {
				li.setAbsStep(float64(n))
			}
		default:
			if x := vals[i]; !math.IsNaN(x) && !strings.HasSuffix(v, "%") {
				p.addMetric(li, col.name, col.id, x, false)
			}
		}
	}
	return true
}

// tableValue reads a field as a number: most are plain ("1.234"), others
// go through parseNumber ("95%", "1,234").
func tableValue(v string) (float64, bool) {
	if x, j, ok := scanNumber(v, 0); ok && j == len(v) {
		return x, true
	}
	return parseNumber(v)
}

// epochField reports whether v is an epoch: "3" or "3/100".
func epochField(v string) bool {
	_, j, ok := scanUint(v, 0)
	if ok && j < len(v) && v[j] == '/' {
		_, k, ok := scanUint(v, j+1)
		return ok && k == len(v)
	}
	return ok && j == len(v)
}

// isClock reports whether v is a duration such as "00:14" or "1:02:03".
func isClock(v string) bool {
	parts := 0
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		if j == i {
			return false
		}
		parts++
		if j == len(v) {
			return parts >= 2
		}
		if v[j] != ':' {
			return false
		}
		i = j + 1
	}
	return false
}

// byteValue reads a memory size with its unit, in bytes: "2.61G" (K, M, G,
// T are powers of 1000, as ultralytics and YOLOv5 compute them; so are KB,
// MB, GB, TB), "3.1GiB" (KiB, MiB, GiB, TiB are powers of 1024).
func byteValue(v string) (float64, bool) {
	_, j, ok := scanNumber(v, 0)
	if !ok || j == 0 || j == len(v) {
		return 0, false
	}
	return bytesize.ParseBytes(v[:j], v[j:])
}

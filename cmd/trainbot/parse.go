package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// pointJSON is one point of `trainbot parse --json`. Field names are a
// contract. JSON has no NaN or infinity: such a value is the string "NaN",
// "Inf" or "-Inf" (which TRAINBOT_METRICS_FILE reads back as the same value).
type pointJSON struct {
	Step  int64    `json:"step"`
	Epoch *float64 `json:"epoch,omitempty"`
	Name  string   `json:"name"`
	Value any      `json:"value"`
}

// patternFlags collects repeated --pattern flags.
type patternFlags []string

func (p *patternFlags) String() string { return strings.Join(*p, " ") }

func (p *patternFlags) Set(s string) error {
	if _, err := logparse.CompilePattern(s); err != nil {
		return err
	}
	*p = append(*p, s)
	return nil
}

func cmdParse(ctx context.Context, args []string, e env) int {
	fs := newFlags("parse", "[--json] [--pattern RE]… [FILE] < LOG | parse [--json] --tfevents DIR", e)
	asJSON := fs.Bool("json", false, `print one JSON object per point: {"step":100,"epoch":1,"name":"loss","value":0.6123}`)
	var patterns patternFlags
	fs.Var(&patterns, "pattern", "a Go regular expression (`RE`) with named groups, as in a job's patterns; repeatable")
	tfevents := fs.String("tfevents", "", "read the TensorBoard event files (events.out.tfevents.*) in `DIR` (and its subdirectories) instead of a log")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *tfevents != "" {
		if len(pos) > 0 || len(patterns) > 0 {
			return usageError(fs, e, "--tfevents DIR takes no FILE and no --pattern")
		}
		return parseTFEvents(ctx, *tfevents, *asJSON, e)
	}
	if len(pos) > 1 {
		return usageError(fs, e, "unexpected argument %q", pos[1])
	}
	in := e.stdin
	name := "standard input"
	if len(pos) == 1 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return errorf(e, "%v", err)
		}
		defer f.Close()
		in, name = f, pos[0]
	}
	p, err := logparse.New(patterns)
	if err != nil { // checked by the flag already
		return usageError(fs, e, "%v", err)
	}
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	var metrics metricTally
	points := 0
	var writeErr error
	var pts []logparse.Point
	var buf []byte
	var names nameCache
	lines, readErr := splitSegments(ctx, in, func(lineNo int, seg []byte) {
		pts = p.AppendLine(pts[:0], seg)
		if len(pts) == 0 {
			return
		}
		buf = buf[:0]
		for _, pt := range pts {
			points++
			metrics.add(pt.Name, pt.Value)
			if *asJSON {
				buf = appendPointJSON(buf, pt, &names)
			} else {
				buf = appendPointText(buf, lineNo, pt)
			}
		}
		if writeErr == nil {
			_, writeErr = out.Write(buf)
		}
	})
	if !*asJSON && writeErr == nil {
		writeSummary(out, lines, points, &metrics, p.Progress())
	}
	if err := out.Flush(); err != nil && writeErr == nil {
		writeErr = err
	}
	switch {
	case readErr != nil:
		return errorf(e, "read %s: %v", name, readErr)
	case writeErr != nil:
		return errorf(e, "write: %v", writeErr)
	}
	if points == 0 {
		fmt.Fprintf(e.stderr, "trainbot parse: no metrics in %d lines of %s; see docs/log-formats.md, or add --pattern with named groups, e.g. --pattern 'loss (?P<loss>\\S+)'\n", lines, name)
	}
	return exitOK
}

func toPointJSON(pt logparse.Point) pointJSON {
	j := pointJSON{Step: pt.Step, Name: pt.Name, Value: pt.Value}
	if pt.HasEpoch() {
		ep := pt.Epoch
		j.Epoch = &ep
	}
	if math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
		j.Value = formatValue(pt.Value)
	}
	return j
}

// appendPointJSON appends a point as encoding/json writes toPointJSON's
// value (with HTML escaping off) and a newline, without reflection: a
// parse of a million lines spent a quarter of its time in the encoder.
// TestPointJSONAsEncoder holds the two to the same bytes.
func appendPointJSON(b []byte, pt logparse.Point, names *nameCache) []byte {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, pt.Step, 10)
	if pt.HasEpoch() {
		b = append(b, `,"epoch":`...)
		b = appendJSONFloat(b, pt.Epoch)
	}
	b = append(b, `,"name":`...)
	b = append(b, names.quoted(pt.Name)...)
	b = append(b, `,"value":`...)
	if math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
		b = append(append(append(b, '"'), formatValue(pt.Value)...), '"')
	} else {
		b = appendJSONFloat(b, pt.Value)
	}
	return append(b, '}', '\n')
}

// appendJSONFloat formats a finite float as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// nameCache keeps the JSON form of the last metric names written (the
// parser hands out the same string for a name every time).
type nameCache struct {
	name [4]string
	form [4][]byte
	next int
}

func (c *nameCache) quoted(name string) []byte {
	for i := range c.name {
		if c.form[i] != nil && c.name[i] == name {
			return c.form[i]
		}
	}
	var w bytes.Buffer
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(name) // a string always encodes
	i := c.next
	c.name[i], c.form[i], c.next = name, bytes.TrimSuffix(w.Bytes(), []byte("\n")), (i+1)%len(c.name)
	return c.form[i]
}

// appendPointText appends the line parse prints for a point without --json.
func appendPointText(b []byte, lineNo int, pt logparse.Point) []byte {
	b = append(b, "line "...)
	b = strconv.AppendInt(b, int64(lineNo), 10)
	b = append(b, "  step "...)
	b = strconv.AppendInt(b, pt.Step, 10)
	if pt.HasEpoch() {
		b = append(b, "  epoch "...)
		b = appendValue(b, pt.Epoch)
	}
	b = append(append(append(b, "  "...), pt.Name...), " = "...)
	b = appendValue(b, pt.Value)
	return append(b, '\n')
}

// appendValue appends formatValue(v).
func appendValue(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, formatValue(v)...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// formatValue prints a value the shortest exact way, NaN, Inf or -Inf.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func writeSummary(w io.Writer, lines, points int, metrics *metricTally, pr logparse.Progress) {
	fmt.Fprintf(w, "-- %d lines read, %d points found\n", lines, points)
	metrics.write(w)
	fmt.Fprintf(w, "progress: %s\n", formatProgress(pr))
}

// metricTally counts the points of each metric and keeps its last value,
// for the summary of parse.
type metricTally struct {
	count map[string]int
	last  map[string]float64
}

func (m *metricTally) add(name string, v float64) {
	if m.count == nil {
		m.count, m.last = map[string]int{}, map[string]float64{}
	}
	m.count[name]++
	m.last[name] = v
}

// write prints each metric's count and last value, by name.
func (m *metricTally) write(w io.Writer) {
	if len(m.count) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(m.count))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d, last %s)", n, m.count[n], formatValue(m.last[n]))
	}
	fmt.Fprintf(w, "metrics: %s\n", strings.Join(parts, ", "))
}

func formatProgress(pr logparse.Progress) string {
	s := "step " + strconv.FormatInt(pr.Step, 10)
	if pr.TotalSteps > 0 {
		s += "/" + strconv.FormatInt(pr.TotalSteps, 10)
	}
	if !math.IsNaN(pr.Epoch) {
		s += " · epoch " + formatValue(pr.Epoch)
		if pr.TotalEpochs > 0 {
			s += "/" + strconv.FormatInt(pr.TotalEpochs, 10)
		}
	} else if pr.TotalEpochs > 0 {
		s += " · epochs " + strconv.FormatInt(pr.TotalEpochs, 10)
	}
	return s
}

// splitSegments reads r and calls fn for every segment between '\n' and
// '\r', the way trainbot splits a running script's output, so progress bars
// redrawn with '\r' parse the same. A segment longer than
// logparse.MaxLineLen is cut there. It returns the number of lines ('\n'
// plus a last unterminated one).
func splitSegments(ctx context.Context, r io.Reader, fn func(lineNo int, seg []byte)) (int, error) {
	buf := make([]byte, 64<<10)
	var partial []byte
	overlong := false
	lineNo := 1
	pending := false // the current line has bytes
	emit := func() {
		if len(partial) > 0 {
			fn(lineNo, partial)
		}
		partial = partial[:0]
		overlong = false
	}
	for {
		if err := ctx.Err(); err != nil {
			return lineNo - 1, err
		}
		n, err := r.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			i := indexLineEnd(chunk)
			part := chunk
			if i >= 0 {
				part = chunk[:i]
			}
			if len(part) > 0 {
				pending = true
			}
			if !overlong {
				room := logparse.MaxLineLen - len(partial)
				if len(part) > room {
					part = part[:room]
					overlong = true
				}
				partial = append(partial, part...)
			}
			if i < 0 {
				break
			}
			emit()
			if chunk[i] == '\n' {
				lineNo++
				pending = false
			}
			chunk = chunk[i+1:]
		}
		if errors.Is(err, io.EOF) {
			emit()
			if !pending {
				return lineNo - 1, nil
			}
			return lineNo, nil
		}
		if err != nil {
			return lineNo - 1, err
		}
	}
}

func indexLineEnd(p []byte) int {
	for i, b := range p {
		if b == '\n' || b == '\r' {
			return i
		}
	}
	return -1
}

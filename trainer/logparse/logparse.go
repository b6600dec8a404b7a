// Package logparse turns the lines a training script already prints into
// metric points, with no configuration.
//
// It recognises JSON objects and Python dict reprs (Hugging Face Trainer),
// "key=value" and "key: value" pairs (Keras, tqdm and Lightning postfixes,
// most hand-written loops) and the classic
// "Epoch [1/10], Step [100/600], Loss: 0.2345" line. A Parser keeps the step,
// the epoch and their totals across lines, and counts steps itself when the
// script prints none.
//
// Everything here is a pure function of the lines given; the package does no
// I/O, so it is table-tested against real logs in testdata/.
package logparse

import (
	"math"
	"regexp"
	"strings"
)

// MaxLineLen is the longest line the parser looks at; longer lines are cut
// to this length before parsing (the run log keeps them whole).
const MaxLineLen = 64 << 10

// Point is one metric value at one step.
type Point struct {
	Step  int64   // global step, 1-based; counted by the parser when the script prints none
	Epoch float64 // epoch as printed; NaN when unknown
	Name  string  // lower-case metric name, e.g. "loss", "val_acc", "train/loss"
	Value float64 // may be NaN or ±Inf: the script printed it so
}

// HasEpoch reports whether the point carries an epoch.
func (p Point) HasEpoch() bool { return !math.IsNaN(p.Epoch) }

// Progress is where the run stands according to its output so far.
type Progress struct {
	Step        int64   // latest global step, 0 before the first
	TotalSteps  int64   // 0 when unknown
	Epoch       float64 // latest epoch as printed, NaN when unknown
	TotalEpochs int64   // 0 when unknown
}

// Parser holds what one run's output has told so far. The zero value is
// ready to use; a Parser is not safe for concurrent use.
type Parser struct {
	custom []*regexp.Regexp

	step          int64
	explicitStep  bool // the script prints its own step numbers
	totalSteps    int64
	epoch         float64
	epochKnown    bool
	totalEpochs   int64
	stepsPerEpoch int64
}

// New returns a parser that also tries the given regular expressions on each
// line. Each expression's named groups become metrics ("loss", "acc"…),
// except the groups "step", "epoch", "total_steps" and "total_epochs", which
// set the progress. An expression without named groups is an error.
func New(patterns []string) (*Parser, error) {
	p := &Parser{}
	for _, s := range patterns {
		re, err := CompilePattern(s)
		if err != nil {
			return nil, err
		}
		p.custom = append(p.custom, re)
	}
	return p, nil
}

// CompilePattern compiles a job's custom pattern and checks that it has at
// least one named group.
func CompilePattern(s string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	named := false
	for _, n := range re.SubexpNames() {
		if n != "" {
			named = true
		}
	}
	if !named {
		return nil, errNoNamedGroup
	}
	return re, nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

const errNoNamedGroup = parseError("pattern has no named group such as (?P<loss>[0-9.eE+-]+)")

// Progress returns where the run stands.
func (p *Parser) Progress() Progress {
	pr := Progress{Step: p.step, TotalSteps: p.totalSteps, Epoch: math.NaN(), TotalEpochs: p.totalEpochs}
	if p.epochKnown {
		pr.Epoch = p.epoch
	}
	return pr
}

// lineInfo is what one line says, before it is folded into the parser state.
type lineInfo struct {
	step, stepTotal int64
	hasStep         bool
	epoch           float64
	epochTotal      int64
	hasEpoch        bool
	totalSteps      int64 // an explicit total (max_steps…), not a step's "/N"
	metrics         []kv
}

type kv struct {
	name  string
	value float64
}

// Line parses one line of output and returns the points it holds, nil when
// none. Carriage-return updates (tqdm) count as their last segment; ANSI
// colour codes are ignored.
func (p *Parser) Line(line string) []Point {
	line = Clean(line)
	if line == "" {
		return nil
	}
	var li lineInfo
	matched := false
	for _, re := range p.custom {
		if m := re.FindStringSubmatch(line); m != nil {
			li.fromRegexp(re, m)
			matched = true
			break
		}
	}
	if !matched {
		if obj, ok := objectIn(line); ok {
			li.fromObject(obj)
		} else {
			li.fromText(line)
		}
	}
	return p.fold(&li)
}

// fold applies a line's information to the parser state and builds points.
func (p *Parser) fold(li *lineInfo) []Point {
	if li.hasEpoch {
		p.epoch, p.epochKnown = li.epoch, true
		if li.epochTotal > 0 {
			p.totalEpochs = li.epochTotal
		}
	}
	if li.totalSteps > 0 {
		p.totalSteps = li.totalSteps
	}
	switch {
	case li.hasStep:
		step := li.step
		if li.hasEpoch && li.epochTotal > 0 && li.stepTotal > 0 && li.epoch >= 1 {
			// "Epoch [e/E], Step [s/S]": s counts within the epoch.
			p.stepsPerEpoch = li.stepTotal
			step = (int64(li.epoch)-1)*li.stepTotal + li.step
			p.totalSteps = li.epochTotal * li.stepTotal
		} else if li.stepTotal > 0 {
			if p.totalEpochs > 0 && p.epochKnown && p.stepsPerEpoch == li.stepTotal && p.epoch >= 1 {
				step = (int64(p.epoch)-1)*li.stepTotal + li.step
			} else {
				p.totalSteps = li.stepTotal
			}
		}
		p.step = step
		p.explicitStep = true
	case len(li.metrics) > 0 && !p.explicitStep:
		p.step++
	}
	if len(li.metrics) == 0 {
		return nil
	}
	if p.step == 0 {
		p.step = 1
	}
	epoch := math.NaN()
	if p.epochKnown {
		epoch = p.epoch
	}
	pts := make([]Point, 0, len(li.metrics))
	for _, m := range li.metrics {
		pts = append(pts, Point{Step: p.step, Epoch: epoch, Name: m.name, Value: m.value})
	}
	return pts
}

// Clean returns the part of a raw output line the parser reads: the last
// carriage-return segment that has text, without ANSI escape sequences,
// trimmed, and cut to MaxLineLen.
func Clean(line string) string {
	if len(line) > MaxLineLen {
		line = line[:MaxLineLen]
	}
	line = strings.TrimRight(line, "\r\n")
	if i := strings.LastIndexByte(line, '\r'); i >= 0 {
		segs := strings.Split(line, "\r")
		line = ""
		for j := len(segs) - 1; j >= 0; j-- {
			if strings.TrimSpace(segs[j]) != "" {
				line = segs[j]
				break
			}
		}
	}
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = stripANSI(line)
	}
	return strings.TrimSpace(line)
}

func stripANSI(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != 0x1b {
			b.WriteByte(c)
			continue
		}
		// ESC [ params final-byte (CSI), or ESC + one byte.
		if i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= 0x40 && s[j] <= 0x7e) {
				j++
			}
			i = j
			continue
		}
		i++
	}
	return b.String()
}

// Special keys, compared lower-case.
func isStepKey(k string) bool {
	switch k {
	case "step", "global_step", "globalstep", "iter", "iteration", "it", "steps", "train/global_step", "trainer/global_step":
		return true
	}
	return false
}

func isEpochKey(k string) bool {
	switch k {
	case "epoch", "ep", "train/epoch", "epochs":
		return true
	}
	return false
}

func isTotalStepsKey(k string) bool {
	switch k {
	case "total_steps", "max_steps", "num_steps", "total_step", "max_iters", "max_iter", "num_training_steps":
		return true
	}
	return false
}

func isTotalEpochsKey(k string) bool {
	switch k {
	case "total_epochs", "num_epochs", "max_epochs", "num_train_epochs", "n_epochs":
		return true
	}
	return false
}

// ignored names are numbers that scripts print but are not metrics.
func isIgnoredKey(k string) bool {
	switch k {
	case "v_num", "seed", "pid", "rank", "local_rank", "world_size", "gpu", "gpus", "device", "cuda",
		"port", "version", "batch", "batch_idx", "worker", "workers", "num_workers", "line", "id",
		"eta", "year", "month", "day", "hour", "minute", "second", "time_stamp", "timestamp", "total":
		return true
	}
	return false
}

func (li *lineInfo) setStep(v float64, total int64) {
	if v < 0 || v > 1e15 || math.IsNaN(v) {
		return
	}
	li.step, li.stepTotal, li.hasStep = int64(v), total, true
}

func (li *lineInfo) setEpoch(v float64, total int64) {
	if v < 0 || v > 1e9 || math.IsNaN(v) {
		return
	}
	li.epoch, li.epochTotal, li.hasEpoch = v, total, true
}

// add records a named number, routing the special names to progress.
func (li *lineInfo) add(name string, v float64) {
	switch {
	case isStepKey(name):
		li.setStep(v, 0)
	case isEpochKey(name):
		li.setEpoch(v, li.epochTotal)
	case isTotalStepsKey(name):
		if v > 0 && v < 1e15 {
			li.totalSteps = int64(v)
		}
	case isTotalEpochsKey(name):
		if v > 0 && v < 1e9 {
			li.epochTotal = int64(v)
		}
	case isIgnoredKey(name):
	default:
		for _, m := range li.metrics {
			if m.name == name {
				return // first value wins: "loss: 0.2 (avg loss: 0.3)" keeps 0.2
			}
		}
		li.metrics = append(li.metrics, kv{name, v})
	}
}

func (li *lineInfo) fromObject(obj []kv) {
	for _, e := range obj {
		li.add(e.name, e.value)
	}
}

func (li *lineInfo) fromRegexp(re *regexp.Regexp, m []string) {
	for i, name := range re.SubexpNames() {
		if name == "" || i >= len(m) || m[i] == "" {
			continue
		}
		v, ok := parseNumber(m[i])
		if !ok {
			continue
		}
		name = strings.ToLower(name)
		li.add(name, v)
	}
}

// Package logparse turns the lines a training script already prints into
// metric points, with no configuration.
//
// # Formats
//
// Each line (after ANSI colour codes and other control characters are
// removed) is read as one of:
//
//   - a JSON object or a Python dict repr, alone or after a prefix:
//     {"step": 100, "loss": 0.61} or Hugging Face Trainer's
//     {'loss': 0.6931, 'learning_rate': 4.5e-05, 'epoch': 0.1}. Nested
//     objects are flattened with "/" ({"train": {"loss": 1}} is train/loss);
//     {"name": "loss", "value": 0.5, "step": 3} is one point named loss, so
//     the output of `trainbot parse --json` reads back as the same points.
//   - free text with "key=value" and "key: value" pairs: key=value loggers,
//     Keras ("469/469 [====] - 3s 6ms/step - loss: 0.2950"), tqdm and
//     Lightning postfixes ("… 50/100 [00:05<00:05, 9.5it/s, loss=0.123,
//     v_num=0]"), the classic "Epoch [1/10], Step [100/600], Loss: 0.2345",
//     the PyTorch examples ("Train Epoch: 1 [640/60000 (1%)]	Loss: 1.35").
//   - "key value" separated by spaces only ("iter 100: loss 2.4567, time
//     123.45ms, mfu 12.34%" of nanoGPT, "Loss 6.8534e+00 (6.9012e+00)" of
//     the PyTorch ImageNet example), but only on a line that also has a
//     step, a counter or an epoch, when the key starts a field and is not
//     a verb ("reached 0.498", "using 0"), and when the number ends at the
//     end, at punctuation or before the next pair: elsewhere it is prose
//     ("Using Python 3.10").
//   - column tables (see table.go): a header of names laid out in columns
//     or between '|', then rows of values under them (ultralytics, YOLOv5,
//     fastai, the COCO tables of detectron2).
//   - a job's own regular expressions, tried on every line in addition:
//     named groups are metrics, except step, epoch, total_steps and
//     total_epochs.
//
// Metric names are lower-case as printed, whole: the words of a field
// before its key, up to four, make the name ("learning rate" is
// learning_rate, "Val Loss" val_loss), '|' separates fields, and a unit in
// parentheses before the colon is dropped ("iter time (s)" is iter_time).
// A unit after '/' makes a rate: "samples/sec" is samples_per_sec; a time
// per item ("s/it") is no metric. A line about a split ("Test: [ 10/48]",
// "Epoch(val)", fairseq's "| valid |") puts it first: test_loss.
//
// Values are float64; nan, NaN, inf, Infinity and -inf come through as NaN
// and ±Inf points. Numbers
// inside tensor(0.5, device='cuda:0') and np.float64(0.5) are read; "95%"
// is 95. A value followed by a unit ("3s", "12ms/step"), a clock
// ("0:01:23") or a date is not a value.
//
// Not metrics: progress bar percentages and rates (it/s), elapsed and ETA,
// timestamps and logging prefixes ("2024-05-01 12:00:01,123 - INFO -",
// "train.py:42"), Lightning's v_num, seed, rank, pid, device and other
// bookkeeping numbers (see keyClasses), parameter counts, configuration
// echoes such as batch_size, warmup_steps or "Num examples = 25,000", and
// pairs inside object reprs: argparse's Namespace(lr=0.01, epochs=10), a
// printed model (Linear(in_features=4, …)) and multi-line reprs from a line
// ending with '(' to a line starting with ')' (an optimizer's "SGD (",
// Hugging Face's "TrainingArguments("); only totals are read from those
// (epochs=10), and from other configuration (see inBlock and scan): dumps
// announced by "… config:", dicts printed after "name = {", lines that
// name configuration or set options to True/False/None. Learning rates
// are metrics (lr, learning_rate).
//
// # Steps
//
// Every point carries a global step: the position in the whole run, not
// within an epoch.
//
//   - "step 100", "global step 100", step=100 and a JSON "step" (also
//     global_step, iter, iteration, num_updates; DeepSpeed's "steps: 100"
//     beside metrics) are the global step as printed, except
//     with an integer epoch on the same line ("Epoch: 2, Step: 50"): then
//     the step counts within the epoch when the training loop's counter
//     says how long an epoch is and the step fits in it, or, with no
//     counter, when the step starts over as the epoch changes (an epoch is
//     then as long as the largest step printed before that).
//   - A counter n/N ("Step [100/600]", Keras' "469/469", tqdm's "| 50/100 [",
//     PyTorch's "[640/60000 (1%)]") counts within an epoch when an integer
//     epoch applies to it, from the same line ("Epoch [2/10], Step
//     [100/600]", Lightning's "Epoch 1: … 50/100") or from the last epoch
//     header ("Epoch 2/10" before Keras' counters). The global step is then
//     epochs_before*N + n, and the total is N times the total epochs when
//     those are known. If the counter does not restart when the epoch
//     changes, it is read as global after all.
//   - Epochs may count from 0 (Lightning, "Epoch 0/9" of Rich) or from 1
//     (Keras, the classic loop): the first integer epoch seen decides.
//     Epochs are reported as printed: Lightning's first epoch is 0.
//   - Without an epoch, a counter that restarts after reaching N starts the
//     next pass: the global step is passes*N + n.
//   - A counter whose N equals the known total steps is the global step
//     ("Interrupted at step 490/1500").
//   - Loops inside the training loop are not the training loop: a bar
//     labelled validation, eval, test, sanity or predict is ignored, and so
//     is a counter with another N once metrics have been reported under the
//     first (Hugging Face's evaluation bar, Keras' evaluate()). Before that,
//     a finished counter (a "Loading checkpoint shards 2/2" bar) or a
//     smaller one (an outer epochs bar) gives way to the next. tqdm bars
//     count only when their rate is in it/s or s/it (not examples/s or
//     MB/s), and a bare counter ("[1/8]", Keras' "1/8") only on a line
//     with metrics or an epoch.
//   - Hugging Face's fractional epoch ('epoch': 0.25, epochs completed) and
//     any epoch printed with a decimal point is reported, never used to
//     place a counter.
//   - A line with metrics and no step attaches to the latest step: an eval
//     dict, a JSON line from TRAINBOT_METRICS_FILE, an epoch summary.
//   - When the script has printed no step at all, the parser counts: a line
//     starts a new step when it repeats a metric name already reported at
//     the current step, so "loss" then "val_loss" share step 1 and the next
//     "loss" is step 2. Counted steps start at 1; printed steps are as
//     printed (0 included).
//   - A progress bar redraws the same values many times: a bar's postfix
//     metric is reported only when its value changed since the last bar.
//
// Totals come from n/N counters, from "Epoch 1/10", and from keys that say
// so: max_steps, total_steps, num_epochs, max_epochs, "Total optimization
// steps = 9,375", "Num Epochs = 3"; an explicit total wins over a derived one.
//
// # Ranks
//
// In a distributed run every rank prints; launchers prefix lines with the
// rank (torchrun's "[default0]:", OpenMPI's "[1,0]<stdout>:", srun's "0: ").
// Each metric is read from one rank, rank 0 or the lowest that prints it,
// and each rank has its own step (see rank.go); AllRanks keeps the others
// as "rank1/loss".
//
// Everything here is a pure function of the lines given; the package does no

// Why this file is long (~1,150 lines): a third of it is the package doc,
// the table of every format the parser reads with an example line each;
// the rest is the Parser's one state machine (detection, the progress and
// epoch tracks, points out), which the format files feed.
// I/O, so it is table-tested against real logs in testdata/.
package logparse

import (
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxLineLen is the longest line the parser looks at; longer lines are cut
// to this length before parsing (the run log keeps them whole).
const MaxLineLen = 64 << 10

// maxNameLen bounds a metric name; longer names are not metrics.
const maxNameLen = 128

// maxInterned bounds the names a parser remembers (garbage input must not
// grow it without limit); names beyond it are allocated per point.
const maxInterned = 4096

// Point is one metric value at one step.
type Point struct {
	Step  int64   // global step; counted from 1 by the parser when the script prints none
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
// ready to use. A Parser is for one goroutine at a time, like a
// bufio.Scanner: the supervisor's observer feeds it a run's output lines
// and TRAINBOT_METRICS_FILE lines, one at a time, in the order it reads
// them, and it is the only one that asks its progress (what others see of
// it, the observer copies under the run's own lock). A lock here cost two
// atomic operations per line for nothing.
type Parser struct {
	custom   []*regexp.Regexp
	allRanks bool

	track                  // rank 0, and lines without a rank prefix
	ranks map[int32]*track // other ranks, from their line prefixes
	srun  srunLabels

	li       lineInfo
	scratch  []byte // lower-case keys
	nameBuf  []byte // built names
	labelBuf []byte
	path     []byte // object scanning
	arena    []byte
	members  []member
	spaced   []spacedPair
	fieldBuf []string         // table fields
	rowVals  []float64        // table values
	names    map[string]int32 // interned names, index into owners
	nameOf   []string
	owners   []int32 // per interned name: the rank its values are read from
	pending  []int32 // per interned name: a rank that reported it once

	shapes   shapes  // learned line shapes (fast.go)
	slab     []Point // room for the points of lines (points), used up to slabUsed
	slabUsed int
}

// track is where one rank's output stands: its step, epoch, totals, the
// counters it has shown and the blocks it is in. Ranks print at their own
// pace, so each has its own.
type track struct {
	step     int64
	explicit bool     // the script has printed a step or a counter
	rowNames []string // counted steps: names reported at the current step

	keyTotal     int64 // total steps from a key ("max_steps", "Total optimization steps")
	derivedTotal int64 // total steps from counters
	totalEpochs  int64

	epoch      float64
	epochKnown bool
	curEpoch   int64 // latest integer epoch that scopes counters
	curEpochOK bool
	base       int64 // 0 or 1: the first integer epoch seen
	baseKnown  bool

	main  mainCounter
	epAbs epochSteps

	reprDepth int  // open multi-line reprs or configuration blocks
	reprLines int  // lines since the innermost one opened
	reprClose byte // what closes the outermost: ')' or '}', 0 for a configuration dump

	barVals []kv   // latest values of progress bar postfix metrics
	table   table  // the table rows are read under
	title   string // "bbox" of a line ending "Evaluation results for bbox:", which may title a table
}

// mainCounter is the n/N counter taken as the training loop.
type mainCounter struct {
	total     int64 // N; 0 before the first counter
	lastN     int64
	lastIdx   int64 // epoch index of the last counter, -1 when none
	passes    int64 // restarts without an epoch
	mode      uint8 // within-epoch or global, once an epoch change has shown which
	confirmed bool  // metrics were reported under it
}

// epochSteps follows "epoch E step S" lines, whose S may restart each epoch.
type epochSteps struct {
	seen     bool
	lastIdx  int64
	lastS    int64
	maxS     int64 // the largest S before the mode was known
	perEpoch int64
	mode     uint8
}

const (
	modeUnknown uint8 = iota
	modeWithin
	modeGlobal
)

// New returns a parser that also tries the given regular expressions on each
// line. Each expression's named groups become metrics ("loss", "acc"…),
// except the groups "step", "epoch", "total_steps" and "total_epochs", which
// set the progress. An expression without named groups is an error.
func New(patterns []string, opts ...Option) (*Parser, error) {
	p := &Parser{}
	for _, o := range opts {
		o(p)
	}
	for _, s := range patterns {
		re, err := CompilePattern(s)
		if err != nil {
			return nil, err
		}
		p.custom = append(p.custom, re)
	}
	p.shapes.off = len(p.custom) > 0
	return p, nil
}

// An Option changes how a Parser reads output.
type Option func(*Parser)

// AllRanks keeps the metrics of every rank of a distributed run: a metric
// of a rank other than the one it is read from (rank 0, or the lowest rank
// that prints it) is reported as "rankN/name" ("rank1/loss") instead of
// being left out.
func AllRanks() Option { return func(p *Parser) { p.allRanks = true } }

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
	t := p.progressTrack()
	pr := Progress{Step: t.step, TotalSteps: t.derivedTotal, Epoch: math.NaN(), TotalEpochs: t.totalEpochs}
	if t.keyTotal > 0 {
		pr.TotalSteps = t.keyTotal
	}
	if t.epochKnown {
		pr.Epoch = t.epoch
	}
	return pr
}

// counterKind says where a line's n/N counter came from; a higher kind wins
// when a line has several.
type counterKind uint8

const (
	noCounter      counterKind = iota
	bracketCounter             // "[640/60000 (1%)]"
	kerasCounter               // "469/469 [====" at the start of the line
	barCounter                 // tqdm's "| 50/100 [00:05<…, 9.5it/s]"
	keyedCounter               // "Step [100/600]", "iter 5/100", a custom (?P<step>)/(?P<total_steps>)
)

// lineInfo is what one line says, before it is folded into the parser state.
type lineInfo struct {
	absStep int64 // "step 100", {"step": 100}
	hasAbs  bool

	n, total  int64 // counter n/N; total 0 for tqdm's "50it [" (unknown N)
	kind      counterKind
	otherLoop bool // the bar is labelled validation, eval…: not the training loop

	epoch       float64
	hasEpoch    bool
	epochScoped bool // printed as an integer in text: it places counters
	epochTotal  int64
	totalSteps  int64

	metrics []kv
	bar     bool // metrics are a progress bar's postfix

	// object "name"/"value" form
	objName  string
	objID    int32
	objValue float64
	objHasV  bool

	config   bool   // a configuration echo: "hyperparameters: lr0=0.01, …"
	literals int    // options set to True, False or None: two make a configuration echo
	label    string // "test" of "Test: [ 10/48]", "val" of "Epoch(val)": names get it as a prefix

	stepsKey    int64 // "steps: 100", a step beside metrics and a total alone
	hasStepsKey bool
}

type kv struct {
	name  string
	id    int32 // interned name index, -1 if none
	value float64
}

func (li *lineInfo) reset() {
	m := li.metrics[:0]
	*li = lineInfo{metrics: m}
}

// Line parses one line of output and returns the points it holds, nil when
// none. A line holding carriage returns or newlines is read as the
// sequence of its segments, as if each had been a line (tqdm's redraws);
// ANSI colour codes and other control characters are ignored. The returned
// slice is the caller's.
func (p *Parser) Line(line string) []Point {
	return p.appendLine(nil, line)
}

// AppendLine parses line as Line does and appends its points to dst. The
// parser keeps nothing of line, so a reader can parse out of its buffer
// without making a string of every line.
func (p *Parser) AppendLine(dst []Point, line []byte) []Point {
	return p.appendLine(dst, unsafe.String(unsafe.SliceData(line), len(line)))
}

// AppendString is AppendLine for a line that is a string already: a
// caller that reuses dst parses without allocating.
func (p *Parser) AppendString(dst []Point, line string) []Point {
	return p.appendLine(dst, line)
}

// LineRead is what AppendRead tells of a line besides its points.
type LineRead struct {
	// Progress is where the run stands after the line (Progress).
	Progress Progress
	// Layout, when not 0, is the learned layout the whole line was read
	// by: the lines of one layout differ only in their digits (their
	// text, signs and points are the same bytes at the same places), so
	// what depends only on a line's other bytes (the words of an
	// out-of-memory error) can be decided once per layout. A parser
	// numbers its layouts from 1 and never gives a number twice.
	Layout uint64
}

// AppendRead is AppendLine that also returns the progress after the line
// and its layout: the supervisor needs both for every line.
func (p *Parser) AppendRead(dst []Point, line []byte) ([]Point, LineRead) {
	dst = p.appendLine(dst, unsafe.String(unsafe.SliceData(line), len(line)))
	return dst, LineRead{Progress: p.Progress(), Layout: p.shapes.lastShape}
}

func (p *Parser) appendLine(out []Point, line string) []Point {
	p.shapes.lastShape = 0
	if len(line) > MaxLineLen {
		line = line[:MaxLineLen]
	}
	if li := p.shapes.direct(&p.li, line, &p.track); li != nil {
		return p.fold(&p.track, 0, li, out)
	}
	if !hasControl(line) {
		// One segment, with no control characters to strip ('\r' and '\n'
		// are control characters): one pass over the line instead of four.
		s := strings.TrimSpace(line)
		return p.parseSegment(s, out, len(s) == len(line))
	}
	if strings.IndexByte(line, '\r') < 0 && strings.IndexByte(line, '\n') < 0 {
		return p.segment(line, out)
	}
	for line != "" {
		i := strings.IndexAny(line, "\r\n")
		if i < 0 {
			return p.segment(line, out)
		}
		out = p.segment(line[:i], out)
		line = line[i+1:]
	}
	return out
}

// segment parses one segment and appends its points to out.
func (p *Parser) segment(raw string, out []Point) []Point {
	return p.parseSegment(cleanSegment(raw), out, false)
}

// parseSegment parses a segment already cleaned and trimmed; whole says
// it is the whole raw line, which shapes.direct has tried.
func (p *Parser) parseSegment(s string, out []Point, whole bool) []Point {
	if s == "" {
		return out
	}
	rank, t := int32(0), &p.track
	if r, rest, ok := p.rankPrefix(s); ok {
		if t = p.rankTrack(r); t == nil {
			return out // more ranks than are followed
		}
		rank, s, whole = r, rest, false
		if s == "" {
			return out
		}
	}
	li := p.scanLine(&p.li, s, t, whole)
	return p.fold(t, rank, li, out)
}

// maxReprLines is how long a block may stay open without its end.
const maxReprLines = 1000

// inBlock follows the multi-line blocks of configuration a script prints
// before it trains, and reports whether s is inside one (where pairs are
// configuration):
//   - reprs, a model's "Sequential(", an optimizer's "SGD (", Hugging
//     Face's "TrainingArguments(": a line ending with '(' opens one, a line
//     starting with ')' closes it;
//   - a dict printed whole after an assignment, DeepSpeed's "json = {", up
//     to the line starting with its '}';
//   - a dump announced by a line ending with ':' that names configuration
//     ("resolved config:", "Config:", "System environment:"), up to the
//     first line that is not more of it (see configLine).
//
// A line that reports progress ends any block (see scan).
func (t *track) inBlock(s string) bool {
	in := t.reprDepth > 0
	if in {
		t.reprLines++
		switch {
		case t.reprLines > maxReprLines:
			t.reprDepth = 0
		case t.reprClose == 0:
			if !configLine(s) {
				t.reprDepth, in = 0, false
			}
		case s[0] == t.reprClose:
			t.reprDepth--
		}
	}
	kind := t.reprClose // what the open block is
	if t.reprDepth == 0 {
		kind = 1 // none
	}
	switch {
	case kind == 0 || t.reprDepth >= maxReprDepth:
		// Reprs inside a dump are part of it.
	case kind != '}' && opensRepr(s):
		t.openBlock(')')
	case kind != ')' && opensDict(s, kind == '}'):
		t.openBlock('}')
	case kind == 1 && opensConfig(s):
		t.openBlock(0)
	}
	return in
}

func (t *track) openBlock(close byte) {
	if t.reprDepth == 0 {
		t.reprClose = close
	}
	t.reprDepth++
	t.reprLines = 0
}

// maxReprDepth bounds nested repr blocks.
const maxReprDepth = 4

// opensRepr reports whether a line starts a multi-line repr: printable
// text whose last word is a name followed by '(' ("Sequential(",
// "model = Net(", "SGD ("). A line of binary garbage that happens to end
// with '(' does not.
func opensRepr(s string) bool {
	n := len(s)
	if n < 2 || s[n-1] != '(' || !printable(s) {
		return false
	}
	j := n - 2
	if s[j] == ' ' && j > 0 {
		j--
	}
	c := s[j]
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// opensDict reports whether a line starts a dict printed over several
// lines as configuration: "json = {" (DeepSpeed's user config), or, inside
// one, a nested '"optimizer": {'. A '{' alone opens no block: that is how
// a JSON object of metrics is pretty-printed.
func opensDict(s string, inside bool) bool {
	n := len(s)
	if n < 3 || s[n-1] != '{' || !printable(s) {
		return false
	}
	j := n - 2
	for j > 0 && s[j] == ' ' {
		j--
	}
	return s[j] == '=' || (inside && s[j] == ':')
}

// opensConfig reports whether a line announces a configuration dump: it
// ends with ':' and names configuration ("Running … with resolved
// config:", "Overriding config with config/train.py:", "Data processing
// configuration for current model + dataset:", "System environment:").
func opensConfig(s string) bool {
	n := len(s)
	if n < 4 || s[n-1] != ':' || n > 200 {
		return false
	}
	for i := 0; i < n; {
		if !isLetter(s[i]) {
			i++
			continue
		}
		j := i
		for j < n && isLetter(s[j]) {
			j++
		}
		if (i == 0 || !isWordChar(s[i-1])) && (j == n || !isWordChar(s[j])) && anyWord(s[i:j], configWords) {
			return true
		}
		i = j
	}
	return false
}

// configWords name a configuration dump or echo.
var configWords = newWordSet("config", "configuration", "configs", "arguments", "args", "hyperparameters", "hparams", "hyp", "environment", "settings", "options")

// configLine reports whether a line looks like more of a configuration
// dump: a comment, a YAML list item, or "name: value", "name = value",
// where a name has up to four words ("CUDA available: True").
func configLine(s string) bool {
	if s[0] == '#' || (s[0] == '-' && len(s) > 1 && s[1] == ' ') {
		return true
	}
	i := 0
	for words := 0; words < 4; words++ {
		start := i
		for i < len(s) && (isKeyChar(s[i]) || s[i] == '"' || s[i] == '\'' || s[i] == '[' || s[i] == ']') {
			i++
		}
		if i == start {
			return false
		}
		j := skipSpaces(s, i)
		switch {
		case j < len(s) && s[j] == '=':
			return true
		case j == i && j < len(s) && s[j] == ':':
			return j+1 == len(s) || s[j+1] == ' '
		case j == i+1 && j < len(s) && words < 3:
			i = j // one space: the name goes on
		default:
			return false
		}
	}
	return false
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

// scan fills li from the built-in formats, then the custom patterns. In a
// configuration block or on a configuration line only totals are kept
// from the built-in formats.
func (p *Parser) scan(li *lineInfo, s string, t *track) {
	block := t.inBlock(s)
	if start, ok := p.objectIn(li, s); ok {
		if start > 0 {
			p.fromText(li, s[:start], t)
		}
	} else {
		p.fromText(li, s, t)
	}
	if block && (li.hasAbs || li.kind != noCounter || (li.hasEpoch && li.epochTotal > 0)) {
		// A line that reports progress is training output, not part of a
		// block: whatever opened the block never closed it.
		t.reprDepth, t.reprLines, block = 0, 0, false
	}
	if block || li.config || li.literals >= 2 {
		*li = lineInfo{metrics: li.metrics[:0], totalSteps: li.totalSteps, epochTotal: li.epochTotal}
		p.spaced = p.spaced[:0]
	}
	if li.objName != "" && li.objHasV {
		p.addMetric(li, li.objName, li.objID, li.objValue, true)
	}
	for _, re := range p.custom {
		if m := re.FindStringSubmatchIndex(s); m != nil {
			p.fromRegexp(li, re, s, m)
		}
	}
	p.spacedPairs(li, s) // after the patterns: a step they find counts
	if li.hasStepsKey {
		// "steps: 100 loss: 2.3" (DeepSpeed) is the step; "steps: 1000"
		// alone is the total.
		if len(li.metrics) > 0 && !li.hasAbs && li.kind == noCounter {
			li.setAbsStep(float64(li.stepsKey))
		} else if li.totalSteps == 0 {
			li.setTotalSteps(float64(li.stepsKey))
		}
	}
}

// fold applies a line's information to a rank's track and appends its
// points to out.
func (p *Parser) fold(t *track, rank int32, li *lineInfo, out []Point) []Point {
	if li.hasEpoch {
		t.epoch, t.epochKnown = li.epoch, true
		if li.epochScoped {
			e := int64(li.epoch)
			if !t.baseKnown {
				t.base, t.baseKnown = min(e, 1), true
			}
			t.curEpoch, t.curEpochOK = e, true
		}
	}
	if li.epochTotal > 0 {
		t.totalEpochs = li.epochTotal
	}
	if li.hasEpoch && li.epochScoped && t.base == 0 && t.totalEpochs > 0 && int64(li.epoch) >= t.totalEpochs {
		// "Epoch 9/9" from a 0-based printer: ten epochs.
		t.totalEpochs = int64(li.epoch) + 1
	}
	if li.totalSteps > 0 {
		t.keyTotal = li.totalSteps
	}

	fromMain := false
	switch {
	case li.hasAbs && li.hasEpoch && li.epochScoped:
		t.step = t.epochStep(int64(li.epoch), li.absStep)
		t.explicit = true
	case li.hasAbs:
		t.step = li.absStep
		t.explicit = true
	case li.kind != noCounter && t.usable(li):
		if t.counter(li) {
			t.explicit = true
			fromMain = true
		}
	}
	if len(li.metrics) == 0 {
		return out
	}
	metrics := li.metrics
	if li.bar {
		metrics = t.changedBarValues(metrics)
		if len(metrics) == 0 {
			return out
		}
	}
	if !t.explicit {
		t.countStep(metrics)
	} else if t.main.total > 0 && (fromMain || li.kind == noCounter) {
		t.main.confirmed = true
	}
	epoch := math.NaN()
	if t.epochKnown {
		epoch = t.epoch
	}
	if out == nil {
		out = p.points(len(metrics))
	}
	for _, m := range metrics {
		name := m.name
		if !p.owns(m.id, rank) {
			if name = p.rankName(rank, name); name == "" {
				continue
			}
		}
		out = append(out, Point{Step: t.step, Epoch: epoch, Name: name, Value: m.value})
	}
	return out
}

// pointSlab is how many points Line's results are cut from at a time.
const pointSlab = 32

// points returns an empty slice with room for n points, for Line to
// return: cut from p.slab, which saves an allocation per line. Its capacity
// is n, so that what the caller does with it cannot reach another line's
// points; a caller that keeps it keeps the slab's memory (pointSlab points).
func (p *Parser) points(n int) []Point {
	if n > len(p.slab)-p.slabUsed {
		if n > pointSlab/2 {
			return make([]Point, 0, n)
		}
		p.slab, p.slabUsed = make([]Point, pointSlab), 0
	}
	i := p.slabUsed
	p.slabUsed += n // an index, not a slice: no write barrier per line
	return p.slab[i:i:p.slabUsed]
}

// epochStep places "epoch E step S" (no total): S counts within the epoch
// when the training loop's counter says how long an epoch is and S fits in
// it, or, without a counter, when S starts over as the epoch changes (an
// epoch is then as long as the largest S printed before that); otherwise S
// is the global step.
func (t *track) epochStep(epoch, s int64) int64 {
	if !t.baseKnown {
		t.base, t.baseKnown = min(epoch, 1), true
	}
	idx := max(epoch-t.base, 0)
	if m := &t.main; m.total > 0 {
		if m.mode != modeGlobal && idx >= 1 && s <= m.total {
			return satAdd(satMul(idx, m.total), s)
		}
		return s
	}
	a := &t.epAbs
	if a.seen && a.mode == modeUnknown && idx > a.lastIdx {
		if s > a.lastS {
			a.mode = modeGlobal
		} else {
			a.mode, a.perEpoch = modeWithin, max(a.maxS, 1)
		}
	}
	a.seen, a.lastIdx, a.lastS, a.maxS = true, idx, s, max(a.maxS, s)
	if a.mode == modeWithin {
		return satAdd(satMul(idx, a.perEpoch), s)
	}
	return s
}

// usable reports whether the line's counter may be a training counter: a
// bare "n/N" counts only on a line that also has metrics or an epoch.
func (t *track) usable(li *lineInfo) bool {
	if li.otherLoop {
		return false
	}
	if li.kind == bracketCounter || li.kind == kerasCounter {
		return len(li.metrics) > 0 || li.hasEpoch || (li.objName != "" && li.objHasV)
	}
	return true
}

// counter places an n/N counter; false when it is not the training loop.
func (t *track) counter(li *lineInfo) bool {
	n, total := li.n, li.total
	m := &t.main
	if total == 0 { // tqdm without a total: "50it ["
		if m.total != 0 {
			return false
		}
		t.step = n
		return true
	}
	if total == t.keyTotal || (total == t.derivedTotal && total != m.total) {
		// The counter is the global step ("step 490/1500" of 1500 steps).
		if m.total == 0 {
			*m = mainCounter{total: total, lastIdx: -1}
		}
		if total == m.total {
			m.lastN = n
		}
		t.step = n
		return true
	}
	if n == 0 && total == m.total && m.lastN > 0 && !(li.hasEpoch && li.epochScoped) {
		// A bar drawn before its first step ("0/8" before the epoch is
		// printed) says nothing about where the loop stands.
		return false
	}
	switch {
	case m.total == 0:
		*m = mainCounter{total: total, lastIdx: -1}
	case total == m.total:
	case !m.confirmed && (m.lastN >= m.total || total > m.total):
		*m = mainCounter{total: total, lastIdx: -1}
	default:
		return false
	}
	idx := int64(-1)
	switch {
	case li.hasEpoch && li.epochScoped:
		idx = max(int64(li.epoch)-t.base, 0)
	case t.curEpochOK:
		idx = max(t.curEpoch-t.base, 0)
	}
	if idx >= 0 {
		if m.mode == modeUnknown && m.lastIdx >= 0 && idx > m.lastIdx {
			if n > m.lastN {
				m.mode = modeGlobal
			} else {
				m.mode = modeWithin
			}
		}
		if m.mode == modeGlobal {
			t.step = n
			t.derivedTotal = total
		} else {
			t.step = satAdd(satMul(idx, total), n)
			t.derivedTotal = 0
			if t.totalEpochs > 0 {
				t.derivedTotal = satMul(t.totalEpochs, total)
			}
		}
		m.lastIdx = idx
	} else {
		if n < m.lastN && m.lastN >= total {
			m.passes++
		}
		t.step = satAdd(satMul(m.passes, total), n)
		switch {
		case m.passes == 0:
			t.derivedTotal = total
		case t.totalEpochs > 0:
			t.derivedTotal = satMul(t.totalEpochs, total)
		default:
			t.derivedTotal = 0
		}
	}
	m.lastN = n
	return true
}

const maxStep = 1 << 53

func satMul(a, b int64) int64 {
	if uint64(a)|uint64(b) < 1<<31 {
		// No overflow, and for a, b > 0, a > maxStep/b is a*b > maxStep:
		// the same without a division.
		return min(a*b, maxStep)
	}
	if a == 0 || b == 0 {
		return 0
	}
	if a > maxStep/b {
		return maxStep
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > maxStep-b {
		return maxStep
	}
	return a + b
}

// countStep advances the counted step when a name repeats.
func (t *track) countStep(metrics []kv) {
	repeat := t.step == 0
	for _, m := range metrics {
		for _, n := range t.rowNames {
			if n == m.name {
				repeat = true
			}
		}
	}
	if repeat {
		t.step++
		t.rowNames = t.rowNames[:0]
	}
	for _, m := range metrics {
		if len(t.rowNames) < 256 {
			t.rowNames = append(t.rowNames, m.name)
		}
	}
}

// changedBarValues keeps the postfix metrics whose value changed since the
// last progress bar; it filters in place.
func (t *track) changedBarValues(metrics []kv) []kv {
	keep := metrics[:0]
	for _, m := range metrics {
		found := false
		for i := range t.barVals {
			if t.barVals[i].name != m.name {
				continue
			}
			found = true
			if sameValue(t.barVals[i].value, m.value) {
				break
			}
			t.barVals[i].value = m.value
			keep = append(keep, m)
			break
		}
		if !found {
			if len(t.barVals) < 256 {
				t.barVals = append(t.barVals, m)
			}
			keep = append(keep, m)
		}
	}
	return keep
}

func sameValue(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

// intern returns a stable copy of a name and its index; names beyond
// maxInterned are copied each time and have index -1.
func (p *Parser) intern(b []byte) (string, int32) {
	if id, ok := p.names[string(b)]; ok {
		return p.nameOf[id], id
	}
	s := string(b)
	if len(p.nameOf) >= maxInterned {
		return s, -1
	}
	if p.names == nil {
		p.names = make(map[string]int32)
	}
	id := int32(len(p.nameOf))
	p.names[s] = id
	p.nameOf = append(p.nameOf, s)
	p.owners = append(p.owners, math.MaxInt32)
	p.pending = append(p.pending, -1)
	return s, id
}

// lower writes the lower-case form of s into p.scratch.
func (p *Parser) lower(s string) []byte {
	b := p.scratch[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	p.scratch = b
	return b
}

// validName reports whether b can be a metric name.
func validName(b []byte) bool {
	if len(b) == 0 || len(b) > maxNameLen || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// addMetric records a metric; later values of a custom pattern replace
// earlier ones, otherwise the first value of a name on a line wins
// ("loss: 0.2 (avg loss: 0.3)" keeps 0.2 as loss).
func (p *Parser) addMetric(li *lineInfo, name string, id int32, v float64, replace bool) {
	for i := range li.metrics {
		if li.metrics[i].name == name {
			if replace {
				li.metrics[i].value = v
			}
			return
		}
	}
	if len(li.metrics) < 1024 {
		li.metrics = append(li.metrics, kv{name, id, v})
	}
}

func (li *lineInfo) setAbsStep(v float64) {
	if !(v >= 0 && v <= maxStep) {
		return
	}
	li.absStep, li.hasAbs = int64(v), true
}

func (li *lineInfo) setCounter(n, total int64, kind counterKind) {
	if kind <= li.kind || n < 0 || n > maxStep || total < 0 || total > maxStep {
		return
	}
	li.n, li.total, li.kind = n, total, kind
}

func (li *lineInfo) setEpoch(v float64, scoped bool) {
	if !(v >= 0 && v <= 1e9) {
		return
	}
	li.epoch, li.hasEpoch, li.epochScoped = v, true, scoped && v == math.Trunc(v)
}

func (li *lineInfo) setTotalSteps(v float64) {
	if v >= 1 && v <= maxStep {
		li.totalSteps = int64(v)
	}
}

func (li *lineInfo) setTotalEpochs(v float64) {
	if v >= 1 && v <= 1e9 {
		li.epochTotal = int64(v)
	}
}

// fromRegexp applies a custom pattern's named groups.
func (p *Parser) fromRegexp(li *lineInfo, re *regexp.Regexp, s string, m []int) {
	var step, total float64 = -1, -1
	for i, name := range re.SubexpNames() {
		if name == "" || 2*i+1 >= len(m) || m[2*i] < 0 {
			continue
		}
		v, ok := parseNumber(s[m[2*i]:m[2*i+1]])
		if !ok {
			continue
		}
		b := p.lower(name)
		switch classify(b) {
		case keyStep:
			step = v
		case keyEpoch:
			li.setEpoch(v, !strings.ContainsAny(s[m[2*i]:m[2*i+1]], ".eE"))
		case keyTotalSteps:
			total = v
		case keyTotalEpochs:
			li.setTotalEpochs(v)
		default:
			name, id := p.intern(b)
			p.addMetric(li, name, id, v, true)
		}
	}
	switch {
	case step >= 0 && total >= 1:
		li.kind = noCounter
		li.hasAbs = false
		li.setCounter(int64(step), int64(total), keyedCounter)
	case step >= 0:
		li.kind = noCounter
		li.setAbsStep(step)
	case total >= 1:
		li.setTotalSteps(total)
	}
}

// Clean returns the part of a raw output line the parser reads: the last
// carriage-return segment that has text, without ANSI escape sequences and
// other control characters, trimmed, and cut to MaxLineLen.
func Clean(line string) string {
	if len(line) > MaxLineLen {
		line = line[:MaxLineLen]
	}
	line = strings.TrimRight(line, "\r\n")
	for {
		i := strings.LastIndexAny(line, "\r\n")
		if i < 0 {
			return cleanSegment(line)
		}
		if s := cleanSegment(line[i+1:]); s != "" {
			return s
		}
		line = line[:i]
	}
}

// cleanSegment removes escape sequences and control characters (a
// backspace of Keras' progress bar, a NUL) and trims spaces.
func cleanSegment(s string) string {
	if hasControl(s) {
		s = stripControl(s)
	}
	return strings.TrimSpace(s)
}

// hasControl reports whether s has a byte below 0x20 other than a tab, or
// DEL. It looks at eight bytes at a time: a word none of whose bytes is
// below 0x20 or 0x7f is passed whole (most lines are such words).
func hasControl(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		del := x ^ 0x7f7f7f7f7f7f7f7f
		if ((x-0x20*ones)&^x|(del-ones)&^del)&highs == 0 {
			continue
		}
		for _, c := range []byte(s[i : i+8]) {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return true
			}
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

func stripControl(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
		case (c < 0x20 && c != '\t') || c == 0x7f:
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// skipEscape returns the index of the last byte of the escape sequence
// starting at s[i] == ESC.
func skipEscape(s string, i int) int {
	if i+1 >= len(s) {
		return i
	}
	switch s[i+1] {
	case '[': // CSI: parameters, then a final byte 0x40–0x7e
		j := i + 2
		for j < len(s) && !(s[j] >= 0x40 && s[j] <= 0x7e) {
			j++
		}
		return min(j, len(s)-1)
	case ']': // OSC: up to BEL or ESC '\'
		for j := i + 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 1
			}
		}
		return len(s) - 1
	case '(', ')', '*', '+', '-', '.', '/', '#', '%': // charset designation: ESC ( B
		return min(i+2, len(s)-1)
	default:
		return i + 1
	}
}

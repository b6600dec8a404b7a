package logparse

import (
	"strconv"
	"strings"
)

// keyClass is what a key means.
type keyClass uint8

const (
	keyMetric      keyClass = iota
	keyStep                 // step, global_step, iter…: the global step, or a counter n/N
	keyBatch                // batch: a counter n/N only ("batch 12" alone is an index)
	keyEpoch                // epoch
	keyTotalSteps           // max_steps, steps, iterations…
	keyTotalEpochs          // num_epochs, epochs…
	keyIgnored              // bookkeeping numbers, never metrics
)

var keyClasses = map[string]keyClass{
	"step": keyStep, "global_step": keyStep, "globalstep": keyStep, "iter": keyStep, "iteration": keyStep,
	"train/global_step": keyStep, "trainer/global_step": keyStep, "train/step": keyStep,

	"batch": keyBatch,

	"epoch": keyEpoch, "ep": keyEpoch, "train/epoch": keyEpoch, "trainer/epoch": keyEpoch,

	"total_steps": keyTotalSteps, "max_steps": keyTotalSteps, "num_steps": keyTotalSteps, "total_step": keyTotalSteps,
	"max_iters": keyTotalSteps, "max_iter": keyTotalSteps, "num_iters": keyTotalSteps, "total_iters": keyTotalSteps,
	"num_training_steps": keyTotalSteps, "n_steps": keyTotalSteps, "steps": keyTotalSteps, "iters": keyTotalSteps,
	"iterations": keyTotalSteps,

	"total_epochs": keyTotalEpochs, "num_epochs": keyTotalEpochs, "max_epochs": keyTotalEpochs, "max_epoch": keyTotalEpochs,
	"num_train_epochs": keyTotalEpochs, "n_epochs": keyTotalEpochs, "epochs": keyTotalEpochs, "total_epoch": keyTotalEpochs,

	"v_num": keyIgnored, "seed": keyIgnored, "pid": keyIgnored, "rank": keyIgnored, "local_rank": keyIgnored,
	"world_size": keyIgnored, "gpu": keyIgnored, "gpus": keyIgnored, "device": keyIgnored, "cuda": keyIgnored,
	"port": keyIgnored, "version": keyIgnored, "batch_idx": keyIgnored, "worker": keyIgnored, "workers": keyIgnored,
	"num_workers": keyIgnored, "line": keyIgnored, "lineno": keyIgnored, "id": keyIgnored, "eta": keyIgnored,
	"year": keyIgnored, "month": keyIgnored, "day": keyIgnored, "hour": keyIgnored, "minute": keyIgnored,
	"second": keyIgnored, "timestamp": keyIgnored, "time_stamp": keyIgnored, "_timestamp": keyIgnored,
	"wall_time": keyIgnored, "walltime": keyIgnored, "ts": keyIgnored, "total": keyIgnored, "it": keyIgnored,
	"name": keyIgnored, "pct": keyIgnored, "percent": keyIgnored, "progress": keyIgnored, "using": keyIgnored,
	"params": keyIgnored, "parameters": keyIgnored, "flops": keyIgnored, "macs": keyIgnored,
}

// ignoredSuffixes mark configuration echoes: batch_size, warmup_steps,
// log_every, master_port…
var ignoredSuffixes = []string{"_size", "_every", "_interval", "_workers", "_seed", "_steps", "_epochs", "_iters", "_id", "_idx", "_rank", "_port", "_dim"}

// sourceExts mark "train.py:42" logging prefixes.
var sourceExts = map[string]bool{"py": true, "go": true, "cc": true, "cpp": true, "c": true, "h": true, "hpp": true, "cu": true,
	"rs": true, "jl": true, "lua": true, "js": true, "ts": true, "java": true, "scala": true, "sh": true, "ipynb": true}

// classify says what a lower-case key means.
func classify(b []byte) keyClass {
	if c, ok := keyClasses[string(b)]; ok {
		return c
	}
	s := string(b) // no allocation: used for comparisons only
	for _, suf := range ignoredSuffixes {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			return keyIgnored
		}
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 && sourceExts[s[i+1:]] {
		return keyIgnored
	}
	return keyMetric
}

// isTimestamp reports whether a "time" value is a Unix time in seconds or
// milliseconds (2001–2286): when the line was written, not a metric.
func isTimestamp(name string, v float64) bool {
	return strings.Contains(name, "time") && ((v >= 1e9 && v < 1e10) || (v >= 1e12 && v < 1e13))
}

// Words that change what a key before them means.
var (
	totalWords     = []string{"num", "number", "total", "max", "n"}
	notLoopWords   = []string{"val", "valid", "validation", "validating", "eval", "evaluation", "evaluating", "test", "testing", "sanity", "predict", "predicting", "prediction", "inference", "warmup", "accumulation", "save", "saving", "saved", "checkpoint", "logging", "log", "per", "every"}
	qualifierWords = []string{"train", "training", "val", "valid", "validation", "test", "eval", "evaluation", "dev", "avg", "average", "mean", "running", "total", "best", "final", "top1", "top5"}
	stopWords      = []string{"of", "on", "the", "for", "in", "at", "over", "with", "after"}
	countWords     = []string{"num", "number"}
)

func anyWord(s string, list []string) bool {
	for _, w := range list {
		if strings.EqualFold(s, w) {
			return true
		}
	}
	return false
}

// maxPhrase is how many words before a key are looked at.
const maxPhrase = 12

// phrase is the words right before a key, nearest first.
type phrase struct {
	words [maxPhrase]string
	n     int
	full  bool // more words than fit
}

// phraseBefore collects the words (letters, digits, '_') separated by
// spaces that end right before s[i], not going below floor; any other
// character ends the phrase.
func phraseBefore(s string, i, floor int) phrase {
	var ph phrase
	j := i
	for {
		k := j
		for k > floor && (s[k-1] == ' ' || s[k-1] == '\t') {
			k--
		}
		if k == j && j != i {
			return ph // words must be separated by spaces
		}
		e := k
		for k > floor && isWordChar(s[k-1]) {
			k--
		}
		if k == e {
			return ph
		}
		if ph.n == maxPhrase {
			ph.full = true
			return ph
		}
		ph.words[ph.n] = s[k:e]
		ph.n++
		j = k
	}
}

func (ph *phrase) has(list []string) bool {
	for _, w := range ph.words[:ph.n] {
		if anyWord(w, list) {
			return true
		}
	}
	return false
}

func (ph *phrase) only(list []string) bool {
	for _, w := range ph.words[:ph.n] {
		if !anyWord(w, list) {
			return false
		}
	}
	return !ph.full
}

// role of a progress key given the words before it.
type role uint8

const (
	roleProgress role = iota
	roleTotal
	roleIgnore
)

func progressRole(ph *phrase) role {
	switch {
	case ph.has(totalWords):
		return roleTotal
	case ph.has(notLoopWords):
		return roleIgnore
	}
	return roleProgress
}

// fromText reads counters and "key: value" / "key=value" pairs out of a
// free-form line.
func (p *Parser) fromText(li *lineInfo, s string) {
	if s == "" {
		return
	}
	if c := s[0]; c >= '0' && c <= '9' {
		li.keras(s)
	}
	if strings.IndexByte(s, '|') >= 0 || strings.Contains(s, "it [") {
		li.tqdm(s)
	}
	p.scanKeys(li, s)
}

// scanKeys walks the line for keys followed by a value or a counter, and
// for bare "[n/N]" counters.
func (p *Parser) scanKeys(li *lineInfo, s string) {
	floor := 0 // end of the last thing read: phrases do not reach back past it
	// Inside an object's repr, Linear(in_features=4, …) or argparse's
	// Namespace(lr=0.01, epochs=10, …), pairs are configuration: only
	// totals are read there.
	// A '(' with no ')' left on the line opens nothing: an unclosed
	// parenthesis (or binary garbage) must not silence the rest of it.
	inCall, closers := 0, strings.Count(s, ")")
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '[':
			if n, total, end, ok := scanBracketCounter(s, i); ok {
				li.setCounter(n, total, bracketCounter)
				i, floor = end, end
				continue
			}
			i++
			continue
		case c == '(' && i > 0 && isWordChar(s[i-1]) && closers > inCall:
			inCall++
		case c == ')':
			closers--
			if inCall > 0 {
				inCall--
			}
		}
		if !isIdentStart(c) || (i > 0 && isKeyChar(s[i-1])) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isKeyChar(s[j]) {
			j++
		}
		key := strings.TrimRight(s[i:j], "./-@")
		k := i + len(key)
		if k < len(s) && (s[k] == '"' || s[k] == '\'') && i > 0 && s[i-1] == s[k] {
			k++ // a quoted key: "loss": 0.5
		}
		k = skipSpaces(s, k)
		if k >= len(s) || (strings.IndexByte(":=#[(", s[k]) < 0 && !startsValue(s, k)) {
			i = j // a word, not a key: nothing a key is followed by
			continue
		}
		lkey := p.lower(key)
		class := classify(lkey)
		if inCall > 0 && class != keyTotalSteps && class != keyTotalEpochs {
			i = j
			continue
		}

		if class == keyStep || class == keyBatch || class == keyEpoch || class == keyTotalSteps || class == keyTotalEpochs {
			if n, total, end, ok := scanProgress(s, k); ok {
				ph := phraseBefore(s, i, floor)
				p.applyProgress(li, class, progressRole(&ph), n, total)
				i, floor = end, end
				continue
			}
		}
		// "__main__:train:42" (loguru) is a location, not train=42.
		chained := i > 0 && s[i-1] == ':' && k < len(s) && s[k] == ':' && k+1 < len(s) && s[k+1] != ' '
		if k < len(s) && (s[k] == ':' || s[k] == '=') && !chained {
			if v, end, ok := scanValue(s, k+1); ok {
				ph := phraseBefore(s, i, floor)
				p.applyPair(li, class, lkey, &ph, v)
				i, floor = end, end
				continue
			}
		}
		if k > i+len(key) && k < len(s) && startsValue(s, k) && len(p.spaced) < maxSpaced {
			p.spaced = append(p.spaced, spacedPair{key: i, keyEnd: i + len(key), value: k, floor: floor})
		}
		i = j
	}
}

// maxSpaced bounds the "key value" candidates looked at on one line.
const maxSpaced = 32

// spacedPair is a "key value" candidate: a key, spaces, a number.
type spacedPair struct{ key, keyEnd, value, floor int }

// spacedPairs reads "loss 2.4567, time 123.45ms, mfu 12.34%" (nanoGPT) and
// "Loss 6.8534e+00 (6.9012e+00)" (the PyTorch ImageNet example): on a line
// that has a step, a counter or an epoch, a key followed by spaces and a
// number that ends cleanly is a pair, when the key starts a field (only
// qualifiers such as "train" or "val" before it) and is not a verb.
// Elsewhere this form is prose ("Python 3.10", "took 3.5 s", "'val_loss'
// reached 0.498 (best 0.498), saving model … as top 1").
func (p *Parser) spacedPairs(li *lineInfo, s string) {
	defer func() { p.spaced = p.spaced[:0] }()
	if !li.hasAbs && li.kind == noCounter && !li.hasEpoch {
		return
	}
	for _, c := range p.spaced {
		if !spacedKey(s, c.key, c.keyEnd) {
			continue
		}
		lkey := p.lower(s[c.key:c.keyEnd])
		class := classify(lkey)
		if class != keyMetric {
			continue
		}
		v, end, ok := scanValue(s, c.value)
		if !ok || !pairEnds(s, end) {
			continue
		}
		ph := phraseBefore(s, c.key, c.floor)
		if !ph.only(qualifierWords) {
			continue // "… saving model to '…' as top 1" is prose
		}
		p.applyPair(li, class, lkey, &ph, v)
	}
}

// spacedKey reports whether s[i:end] may be the key of a "key value" pair:
// not a verb of a message ("'val_loss' reached 0.498", "using 0 TPU
// cores") and not the start of a parenthetical ("(best 0.498)").
func spacedKey(s string, i, end int) bool {
	w := strings.ToLower(s[i:end])
	if (strings.HasSuffix(w, "ed") && w != "speed") || strings.HasSuffix(w, "ing") {
		return false
	}
	return i == 0 || s[i-1] != '('
}

// startsValue reports whether s[i:] starts with a number or a call of one:
// "0.5", "nan", "tensor(0.5, grad_fn=<NllLossBackward0>)".
func startsValue(s string, i int) bool {
	if startsNumber(s, i) {
		return true
	}
	j := i
	for j < len(s) && (isWordChar(s[j]) || s[j] == '.') && j-i < 32 {
		j++
	}
	return j > i && j < len(s) && s[j] == '(' && isIdentStart(s[i]) && startsNumber(s, skipSpaces(s, j+1))
}

// startsNumber reports whether s[i:] starts with a number or nan/inf.
func startsNumber(s string, i int) bool {
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] >= '0' && s[i] <= '9' {
		return true
	}
	return isNumberWord(wordAt(s, i))
}

// pairEnds reports whether a space-separated value ends cleanly at s[j]:
// at the end, before punctuation or a tab, or before the next pair.
func pairEnds(s string, j int) bool {
	if j >= len(s) || strings.IndexByte(",;|()[]\t", s[j]) >= 0 {
		return true
	}
	k := skipSpaces(s, j)
	if k == len(s) || strings.IndexByte(",;|()[]", s[k]) >= 0 || (s[k] == '-' && k+1 < len(s) && s[k+1] == ' ') {
		return true
	}
	for w := 0; w < 3 && k < len(s) && isIdentStart(s[k]); w++ {
		for k < len(s) && isKeyChar(s[k]) {
			k++
		}
		k = skipSpaces(s, k)
		if k < len(s) && (s[k] == ':' || s[k] == '=' || startsNumber(s, k)) {
			return true
		}
	}
	return false
}

// applyProgress records "Epoch [1/10]", "step 100", "Num Epochs = 3".
func (p *Parser) applyProgress(li *lineInfo, class keyClass, r role, n, total uint64) {
	if r == roleIgnore {
		return
	}
	if class == keyTotalSteps || class == keyTotalEpochs {
		r = roleTotal // "epochs: 10", "steps=1000"
	}
	switch class {
	case keyEpoch, keyTotalEpochs:
		if r == roleTotal {
			li.setTotalEpochs(float64(n))
			return
		}
		li.setEpoch(float64(n), true)
		if total > 0 {
			li.setTotalEpochs(float64(total))
		}
	case keyStep, keyBatch, keyTotalSteps:
		switch {
		case r == roleTotal:
			li.setTotalSteps(float64(n))
		case total > 0:
			li.setCounter(int64(n), int64(total), keyedCounter)
		case class == keyStep:
			li.setAbsStep(float64(n))
		}
	}
}

// applyPair records "key: value".
func (p *Parser) applyPair(li *lineInfo, class keyClass, lkey []byte, ph *phrase, v float64) {
	switch class {
	case keyStep:
		if progressRole(ph) == roleProgress && v == float64(int64(v)) {
			li.setAbsStep(v)
		}
		return
	case keyEpoch:
		if progressRole(ph) == roleProgress {
			li.setEpoch(v, false)
		}
		return
	case keyTotalSteps:
		if progressRole(ph) != roleIgnore {
			li.setTotalSteps(v)
		}
		return
	case keyTotalEpochs:
		if progressRole(ph) != roleIgnore {
			li.setTotalEpochs(v)
		}
		return
	case keyBatch, keyIgnored:
		return
	}
	if ph.has(countWords) {
		return // "Num examples = 25,000": a configuration echo
	}
	name := p.metricName(lkey, ph)
	if name != "" && !isTimestamp(name, v) {
		p.addMetric(li, name, v, false)
	}
}

// metricName names a key given the words before it: "Val Loss" is
// val_loss; in prose, "Test Accuracy of the model on the 10000 test
// images" is test_accuracy.
func (p *Parser) metricName(lkey []byte, ph *phrase) string {
	if ph.n >= 3 && !ph.full {
		// The words read from the first to the first stop word name it.
		first := -1
		for w := ph.n - 1; w >= 0; w-- {
			if anyWord(ph.words[w], stopWords) {
				first = w
				break
			}
		}
		if first >= 0 && first < ph.n-1 {
			b := p.nameBuf[:0]
			for w := ph.n - 1; w > first && w >= ph.n-3; w-- {
				if len(b) > 0 {
					b = append(b, '_')
				}
				b = appendLower(b, ph.words[w])
			}
			p.nameBuf = b
			if validName(b) {
				return p.intern(b)
			}
			return ""
		}
	}
	if ph.n > 0 && anyWord(ph.words[0], qualifierWords) && !anyWord(string(lkey), qualifierWords) {
		b := append(appendLower(p.nameBuf[:0], ph.words[0]), '_')
		b = append(b, lkey...)
		p.nameBuf = b
		if validName(b) {
			return p.intern(b)
		}
		return ""
	}
	if !validName(lkey) {
		return ""
	}
	return p.intern(lkey)
}

func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// keras reads Keras' "469/469 [====…] - 3s 6ms/step - loss: …" counter (also
// Keras 3's "━━━━" bar and verbose=2's "469/469 - 3s - …").
func (li *lineInfo) keras(s string) {
	n, j, ok := scanUint(s, 0)
	if !ok || j >= len(s) || s[j] != '/' {
		return
	}
	total, k, ok := scanUint(s, j+1)
	if !ok || k >= len(s) || s[k] != ' ' {
		return
	}
	k = skipSpaces(s, k)
	if k < len(s) && (s[k] == '[' || s[k] == '-' || strings.HasPrefix(s[k:], "━")) {
		li.setCounter(int64(n), int64(total), kerasCounter)
	}
}

// tqdm reads tqdm's "desc: 10%|█    | 50/500 [00:10<01:30, 4.97it/s, …]" and
// "desc: 50it [00:05, 9.50it/s, …]". A bar counts only when its rate is in
// iterations (not examples/s or MB/s); a bar whose label says validation,
// eval, test, sanity or predict is marked as not the training loop.
func (li *lineInfo) tqdm(s string) {
	firstBar := strings.IndexByte(s, '|')
	for off := 0; firstBar >= 0; {
		j := strings.IndexByte(s[off:], '|')
		if j < 0 {
			break
		}
		j += off
		off = j + 1
		k := skipSpaces(s, j+1)
		n, k2, ok := scanUint(s, k)
		if !ok || k2 >= len(s) || s[k2] != '/' {
			continue
		}
		var total uint64
		k3 := k2 + 1
		if k3 < len(s) && s[k3] == '?' {
			k3++
		} else if total, k3, ok = scanUint(s, k3); !ok {
			continue
		}
		k4 := skipSpaces(s, k3)
		if k4 < len(s) && s[k4] == '[' && iterationRate(s[k4:]) {
			li.bar = true
			li.otherLoop = li.otherLoop || isNotLoopLabel(s[:firstBar])
			li.setCounter(int64(n), int64(total), barCounter)
			return
		}
	}
	for off := 0; ; {
		j := strings.Index(s[off:], "it [")
		if j < 0 {
			return
		}
		j += off
		off = j + 1
		d := j
		for d > 0 && s[d-1] >= '0' && s[d-1] <= '9' {
			d--
		}
		if d == j || (d > 0 && s[d-1] != ' ' && s[d-1] != ':' && s[d-1] != '|') {
			continue
		}
		n, _, ok := scanUint(s, d)
		if ok && iterationRate(s[j+3:]) {
			li.bar = true
			li.otherLoop = li.otherLoop || isNotLoopLabel(s[:d])
			li.setCounter(int64(n), 0, barCounter)
			return
		}
	}
}

// iterationRate reports whether a tqdm bracket "[00:10<01:30, 4.97it/s…"
// gives its rate in iterations: it/s, s/it, or no rate at all.
func iterationRate(b string) bool {
	end := strings.IndexByte(b, ']')
	if end < 0 {
		end = len(b)
	}
	b = b[:end]
	c := strings.IndexByte(b, ',')
	if c < 0 {
		return true
	}
	rate := strings.TrimSpace(b[c+1:])
	if e := strings.IndexByte(rate, ','); e >= 0 {
		rate = rate[:e]
	}
	for _, unit := range []string{"it/s", "s/it"} {
		if strings.HasSuffix(rate, unit) {
			num := rate[:len(rate)-len(unit)]
			return num == "?" || (num != "" && strings.Trim(num, "0123456789.") == "")
		}
	}
	return false
}

// isNotLoopLabel reports whether a bar's label names a loop that is not
// training: "Validation DataLoader 0", "Sanity Checking", "Evaluating".
func isNotLoopLabel(label string) bool {
	for i := 0; i < len(label); {
		if !isLetter(label[i]) {
			i++
			continue
		}
		j := i
		for j < len(label) && isLetter(label[j]) {
			j++
		}
		if anyWord(label[i:j], notLoopWords) || anyWord(label[i:j], []string{"checking", "tested", "predicting"}) {
			return true
		}
		i = j
	}
	return false
}

// scanBracketCounter reads "[640/60000 (1%)]", "[ 100/5005]" at s[i] == '['.
func scanBracketCounter(s string, i int) (n, total int64, end int, ok bool) {
	j := skipSpaces(s, i+1)
	a, j, ok := scanUint(s, j)
	if !ok {
		return 0, 0, i, false
	}
	j = skipSpaces(s, j)
	if j >= len(s) || s[j] != '/' {
		return 0, 0, i, false
	}
	b, j, ok := scanUint(s, skipSpaces(s, j+1))
	if !ok || b == 0 {
		return 0, 0, i, false
	}
	j = skipSpaces(s, j)
	if j < len(s) && s[j] == '(' {
		k := j + 1
		for k < len(s) && k-j < 12 && ((s[k] >= '0' && s[k] <= '9') || s[k] == '.' || s[k] == '%') {
			k++
		}
		if k >= len(s) || s[k] != ')' {
			return 0, 0, i, false
		}
		j = skipSpaces(s, k+1)
	}
	if j >= len(s) || s[j] != ']' {
		return 0, 0, i, false
	}
	return int64(a), int64(b), j + 1, true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func isIdentStart(c byte) bool { return c == '_' || isLetter(c) }

func isWordChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isKeyChar(c byte) bool {
	return isWordChar(c) || c == '.' || c == '/' || c == '-' || c == '@'
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// scanProgress reads what follows a progress key: "[1/10]", ": 3", "= 3",
// " 5/100", "#3", "3 of 10", "(3/10)", "1/?".
func scanProgress(s string, i int) (n, total uint64, end int, ok bool) {
	if i < len(s) && (s[i] == ':' || s[i] == '=' || s[i] == '#') {
		i = skipSpaces(s, i+1)
	}
	var closer byte
	if i < len(s) && (s[i] == '[' || s[i] == '(') {
		closer = ']'
		if s[i] == '(' {
			closer = ')'
		}
		i = skipSpaces(s, i+1)
	}
	n, j, ok := scanUint(s, i)
	if !ok {
		return 0, 0, i, false
	}
	k := skipSpaces(s, j)
	switch {
	case k < len(s) && s[k] == '/':
		k = skipSpaces(s, k+1)
		if k < len(s) && s[k] == '?' {
			j = k + 1
			break
		}
		t, j2, ok := scanUint(s, k)
		if !ok {
			return 0, 0, i, false
		}
		total, j = t, j2
	case j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E'):
		return 0, 0, i, false // "epoch: 0.5" is a value, read as a pair
	case k > j && strings.HasPrefix(s[k:], "of "):
		if t, j2, ok := scanUint(s, skipSpaces(s, k+3)); ok {
			total, j = t, j2
		}
	}
	if j < len(s) && s[j] == '%' {
		return 0, 0, i, false // "Steps:  10%|█": a bar's percentage
	}
	if closer != 0 {
		k = skipSpaces(s, j)
		if k >= len(s) || s[k] != closer {
			return 0, 0, i, false
		}
		j = k + 1
	}
	if j < len(s) && isKeyChar(s[j]) {
		return 0, 0, i, false // "epoch=0-step=63.ckpt", "step 100ms"
	}
	return n, total, j, true
}

// scanUint reads a decimal integer, with thousands separators ("9,375").
func scanUint(s string, i int) (uint64, int, bool) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 16 {
		j++
	}
	if j == i || (j < len(s) && s[j] >= '0' && s[j] <= '9') {
		return 0, i, false
	}
	if j-i <= 3 && isThousands(s, j) {
		var buf [32]byte
		b := append(buf[:0], s[i:j]...)
		for isThousands(s, j) && len(b) < 16 {
			b = append(b, s[j+1:j+4]...)
			j += 4
		}
		v, err := strconv.ParseUint(string(b), 10, 64)
		return v, j, err == nil
	}
	v, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		return 0, i, false
	}
	return v, j, true
}

// isThousands reports whether s[j:] is ",ddd" followed by a non-digit.
func isThousands(s string, j int) bool {
	if j+4 > len(s) || s[j] != ',' {
		return false
	}
	for k := j + 1; k < j+4; k++ {
		if s[k] < '0' || s[k] > '9' {
			return false
		}
	}
	return j+4 == len(s) || s[j+4] < '0' || s[j+4] > '9'
}

// scanValue reads a number after "key:" or "key=". It allows a trailing '%'
// or sentence-ending '.', thousands separators, and a call such as
// tensor(0.53, device='cuda:0') or np.float64(0.5), and requires the number
// to end at a boundary: "eta: 0:01:23", "time: 3s" and "lr: 1e-3x" are not
// values.
func scanValue(s string, i int) (float64, int, bool) {
	i = skipSpaces(s, i)
	call := -1
	if i < len(s) && isIdentStart(s[i]) {
		j := i
		for j < len(s) && (isWordChar(s[j]) || s[j] == '.') {
			j++
		}
		if j < len(s) && s[j] == '(' && !isNumberWord(s[i:j]) {
			call = j
			i = skipSpaces(s, j+1)
		}
	}
	v, j, ok := scanNumber(s, i)
	if !ok {
		return 0, i, false
	}
	if call >= 0 {
		k := skipSpaces(s, j)
		if k >= len(s) || (s[k] != ',' && s[k] != ')') {
			return 0, i, false
		}
		end, ok := closeParen(s, call)
		if !ok {
			return 0, i, false
		}
		return v, end, true
	}
	if isThousands(s, j) && !strings.ContainsAny(s[i:j], ".eE") && j-i <= 3+boolInt(s[i] == '-' || s[i] == '+') {
		v, j = scanThousands(s, i)
	}
	if j < len(s) && s[j] == '%' {
		if j+1 < len(s) && s[j+1] == '|' {
			return 0, i, false // a progress bar's "Map: 100%|██"
		}
		j++
	}
	if j < len(s) {
		c := s[j]
		if c == '.' && (j+1 == len(s) || s[j+1] == ' ' || s[j+1] == '\t') {
			return v, j + 1, true
		}
		if isKeyChar(c) || c == ':' {
			return 0, i, false
		}
		if c == ' ' && countNounAt(s, j+1) {
			return 0, i, false // "Training finished: 300 steps" is a count
		}
	}
	return v, j, true
}

// countNouns follow a number that counts things rather than measures.
var countNouns = []string{"step", "steps", "epoch", "epochs", "iteration", "iterations", "iter", "iters", "batch", "batches",
	"example", "examples", "sample", "samples", "image", "images", "token", "tokens", "item", "items", "file", "files",
	"record", "records", "sequence", "sequences", "core", "cores", "gpu", "gpus", "tpu", "hpu", "hpus", "param", "params",
	"parameters", "worker", "workers", "node", "nodes", "device", "devices"}

// countNounAt reports whether s[i:] starts with a count noun that ends
// there: "300 steps" but not "1234.5 samples/s" or "0.5 steps: 3".
func countNounAt(s string, i int) bool {
	w := wordAt(s, i)
	if w == "" {
		return false
	}
	if e := i + len(w); e < len(s) && (isKeyChar(s[e]) || s[e] == ':' || s[e] == '=') {
		return false
	}
	return anyWord(w, countNouns)
}

// scanThousands reads "1,234" or "-1,234,567.5" at s[i:], known to start
// with up to three digits and a ",ddd" group.
func scanThousands(s string, i int) (float64, int) {
	var buf [40]byte
	b := buf[:0]
	j := i
	if s[j] == '-' || s[j] == '+' {
		b = append(b, s[j])
		j++
	}
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		b = append(b, s[j])
		j++
	}
	for isThousands(s, j) && len(b) < 20 {
		b = append(b, s[j+1:j+4]...)
		j += 4
	}
	if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		b = append(b, '.')
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' && len(b) < len(buf) {
			b = append(b, s[j])
			j++
		}
	}
	v, _ := strconv.ParseFloat(string(b), 64)
	return v, j
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// closeParen returns the index after the ')' matching s[open] == '('.
func closeParen(s string, open int) (int, bool) {
	depth := 0
	for k := open; k < len(s); k++ {
		switch s[k] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return k + 1, true
			}
		}
	}
	return 0, false
}

func isNumberWord(w string) bool {
	return strings.EqualFold(w, "nan") || strings.EqualFold(w, "inf") || strings.EqualFold(w, "infinity")
}

// scanNumber reads a decimal float or nan/inf/infinity at s[i:].
func scanNumber(s string, i int) (float64, int, bool) {
	j := i
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	if j < len(s) && isLetter(s[j]) {
		w := wordAt(s, j)
		if !isNumberWord(w) {
			return 0, i, false
		}
		v, err := strconv.ParseFloat(s[i:j+len(w)], 64)
		if err != nil {
			return 0, i, false
		}
		return v, j + len(w), true
	}
	digits := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			digits++
		}
	}
	if digits == 0 || digits > 400 {
		return 0, i, false
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '-' || s[k] == '+') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	v, err := strconv.ParseFloat(s[i:j], 64)
	if err != nil {
		return 0, i, false // out of range
	}
	return v, j, true
}

func wordAt(s string, i int) string {
	j := i
	for j < len(s) && isLetter(s[j]) {
		j++
	}
	return s[i:j]
}

// parseNumber parses a whole string as a number (custom pattern groups,
// object values): "0.5", "nan", "95%", "tensor(0.5, device='cuda:0')".
func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	v, j, ok := scanValue(s, 0)
	return v, ok && j == len(s)
}

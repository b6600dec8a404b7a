package logparse

// Why this file is long (~1,500 lines): it is the free-text reader, one
// hand-written scanner over a line's bytes. Classifying keys, reading the
// phrase before a number, splitting pairs and naming metrics all work on
// the scanner's state (lineInfo, phrase) on the hot path (bench/logparse.sh);
// cut by concern they would hand that state around without any part
// reading well alone. The structured formats have their own files.

import (
	"bytes"
	"math"
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
	"train/global_step": keyStep, "trainer/global_step": keyStep, "train/step": keyStep, "num_updates": keyStep,

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
	// counts and sizes of the data and the job, not measures of training
	"size":  keyIgnored,
	"n_gpu": keyIgnored, "nnodes": keyIgnored, "num_nodes": keyIgnored, "num_gpus": keyIgnored, "nproc_per_node": keyIgnored,
	"num_local_procs": keyIgnored, "num_proc": keyIgnored, "capability": keyIgnored, "capabilities": keyIgnored, "maxdets": keyIgnored,
	// fairseq: seconds since the start, and the epoch with its fraction
	"wall": keyIgnored, "update": keyIgnored, "nc": keyIgnored,
	// DeepSpeed's pipeline stages and steps skipped on overflow
	"stage": keyIgnored, "layers": keyIgnored, "skipped": keyIgnored,
	// "tokens per iteration will be: 16,384" is a sentence
	"be": keyIgnored, "is": keyIgnored, "are": keyIgnored, "was": keyIgnored, "were": keyIgnored,
}

// Keys ending in an ignored suffix are configuration echoes: batch_size,
// warmup_steps, log_every, master_port, fairseq's train_wall (see
// ignoredSuffix).

// sourceExts mark "train.py:42" logging prefixes.
var sourceExts = map[string]bool{"py": true, "go": true, "cc": true, "cpp": true, "c": true, "h": true, "hpp": true, "cu": true,
	"rs": true, "jl": true, "lua": true, "js": true, "ts": true, "java": true, "scala": true, "sh": true, "ipynb": true}

// classify says what a lower-case key means.
func classify(b []byte) keyClass {
	if c, ok := keyClasses[string(b)]; ok {
		return c
	}
	s := string(b) // no allocation: used for comparisons only
	if i := strings.LastIndexByte(s, '_'); i > 0 && ignoredSuffix(s[i:]) {
		return keyIgnored
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 && sourceExts[s[i+1:]] {
		return keyIgnored
	}
	// fairseq's "train_num_updates", "valid_num_updates": the step;
	// PaddleOCR's "best_epoch": bookkeeping.
	if i := strings.IndexByte(s, '_'); i > 0 {
		var c keyClass
		switch s[i+1:] {
		case "step", "global_step", "iter", "iteration", "num_updates":
			c = keyStep
		case "epoch":
			c = keyEpoch
		default:
			return keyMetric
		}
		switch {
		case anyWord(s[:i], splitWords):
			return c
		case anyWord(s[:i], qualifierWords):
			return keyIgnored
		}
	}
	return keyMetric
}

// ignoredSuffix reports whether a key ending in suf ("_size") is a
// configuration echo.
func ignoredSuffix(suf string) bool {
	switch suf {
	case "_size", "_every", "_interval", "_workers", "_seed", "_steps", "_epochs", "_iters", "_id", "_idx", "_rank", "_port", "_dim", "_wall",
		"_params", "_parameters":
		return true
	}
	return false
}

// isTimestamp reports whether a "time" value is a Unix time in seconds or
// milliseconds (2001–2286): when the line was written, not a metric.
func isTimestamp(name string, v float64) bool {
	return strings.Contains(name, "time") && ((v >= 1e9 && v < 1e10) || (v >= 1e12 && v < 1e13))
}

// Words that change what a key before them means.
var (
	totalWords     = newWordSet("num", "number", "total", "max", "n")
	notLoopWords   = newWordSet("val", "valid", "validation", "validating", "eval", "evaluation", "evaluating", "test", "testing", "sanity", "predict", "predicting", "prediction", "inference", "warmup", "accumulation", "save", "saving", "saved", "checkpoint", "logging", "log", "per", "every")
	qualifierWords = newWordSet("train", "training", "val", "valid", "validation", "test", "eval", "evaluation", "dev", "avg", "average", "mean", "running", "total", "best", "final", "top1", "top5")
	stopWords      = newWordSet("of", "on", "the", "for", "in", "at", "over", "with", "after")
)

// wordSet is a small set of lower-case words matched without regard to
// case; the first letters and the longest length reject most words
// without comparing.
type wordSet struct {
	words  []string
	first  uint32 // bit c-'a' for each first letter
	lens   uint32 // bit n for each length n
	digits bool   // a word starts with a digit
}

func newWordSet(words ...string) *wordSet {
	ws := &wordSet{words: words}
	for _, w := range words {
		if c := w[0]; c >= 'a' && c <= 'z' {
			ws.first |= 1 << (c - 'a')
		} else {
			ws.digits = true
		}
		if len(w) >= 32 {
			panic("logparse: word too long for a wordSet: " + w)
		}
		ws.lens |= 1 << len(w)
	}
	return ws
}

// anyWord reports whether s is one of the words of set, in any case.
func anyWord(s string, set *wordSet) bool {
	if len(s) >= 32 || set.lens&(1<<len(s)) == 0 {
		return false
	}
	if c := s[0] | 0x20; c >= 'a' && c <= 'z' {
		if set.first&(1<<(c-'a')) == 0 {
			return false
		}
	} else if !set.digits {
		return false
	}
	for _, w := range set.words {
		if len(w) == len(s) && strings.EqualFold(s, w) {
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
	open  bool // it starts a field: after a separator, not glued to a word ("model.yaml")
}

// fieldEdge reports whether c separates fields: a phrase after it starts a
// field.
func fieldEdge(c byte) bool {
	switch c {
	case '|', ',', ';', '(', '[', '{', ']', ')', '}', ':', '-', '>', '\t':
		return true
	}
	return false
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
			// Words must be separated by spaces: "model.yaml nc" is no name.
			ph.open = j == floor || fieldEdge(s[j-1])
			return ph
		}
		e := k
		for k > floor && isWordChar(s[k-1]) {
			k--
		}
		if k == e && k > floor+3 && s[k-1] == '.' && (s[k-4:k] == "num." || s[k-3:k] == "no.") {
			// fairseq's "num. trained: 39,469,056"
			ph.words[ph.n] = "num"
			ph.n++
			return ph
		}
		if k == e {
			ph.open = k == floor || fieldEdge(s[k-1])
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

func (ph *phrase) has(list *wordSet) bool {
	for _, w := range ph.words[:ph.n] {
		if anyWord(w, list) {
			return true
		}
	}
	return false
}

func (ph *phrase) only(list *wordSet) bool {
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

// fromText reads tables, counters and "key: value" / "key=value" pairs
// out of a free-form line.
func (p *Parser) fromText(li *lineInfo, s string, t *track) {
	if s == "" {
		return
	}
	if len(t.table.cols) > 0 || s[0] == '|' || isLetter(s[0]) {
		if rest, ok := p.tableLine(li, s, t); ok {
			t.title = ""
			if rest != "" {
				li.bars(rest)
			}
			return
		}
	}
	if c := s[0]; c >= '0' && c <= '9' {
		li.keras(s)
	}
	li.bars(s)
	p.scanKeys(li, s)
	if title := lineTitle(s); title != t.title {
		t.title = strings.Clone(title) // s may be the caller's buffer (AppendLine)
	}
}

// lineTitle is what a line ending "Evaluation results for bbox:" says the
// table under it is about: "bbox".
func lineTitle(s string) string {
	n := len(s)
	if n < 2 || s[n-1] != ':' {
		return ""
	}
	i := n - 1
	for i > 0 && isWordChar(s[i-1]) {
		i--
	}
	if i == n-1 || n-1-i > 16 || (i > 0 && s[i-1] != ' ') || !isLetter(s[i]) {
		return ""
	}
	w := s[i : n-1]
	if anyWord(w, configWords) {
		return ""
	}
	return strings.ToLower(w)
}

// bars reads the progress bars of a line: tqdm's, YOLOv5's and
// ultralytics' own.
func (li *lineInfo) bars(s string) {
	if strings.IndexByte(s, '|') >= 0 || strings.Contains(s, "it [") {
		li.tqdm(s)
	}
	if li.kind < barCounter {
		if i := strings.IndexByte(s, 0xe2); i >= 0 {
			li.richBar(s, i)
		}
	}
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
		if charClass[c]&(chLetter|chUnderscore|chScan) == 0 {
			i++ // most bytes: spaces, digits, punctuation
			continue
		}
		switch {
		case c == '[':
			if n, total, end, ok := scanBracketCounter(s, i); ok {
				li.setCounter(n, total, bracketCounter)
				i, floor = end, end
				continue
			}
			i++
			continue
		case c == '@' && i+1 < len(s) && s[i+1] == '[':
			// pycocotools' "Average Precision (AP) @[ IoU=0.50 | area= all |
			// maxDets=100 ] = 0.709": the conditions of a result, not pairs.
			if e := strings.IndexByte(s[i:], ']'); e > 0 {
				i, floor = i+e+1, i+e+1
				continue
			}
		case c == '(' && i > 0 && isWordChar(s[i-1]) && closers > inCall:
			inCall++
		case c == ')':
			closers--
			if inCall > 0 {
				inCall--
			}
		}
		if !isIdentStart(c) || (i > 0 && (isKeyChar(s[i-1]) || s[i-1] == '=')) {
			i++ // "--rdzv_endpoint=localhost:0": a value, not a key
			continue
		}
		j := i + 1
		for j < len(s) && isKeyChar(s[j]) {
			j++
		}
		key := trimKeyEnd(s[i:j])
		k := i + len(key)
		quoted := byte(0) // 'lr0=0.01' is a quoted word, not a pair
		if k < len(s) && (s[k] == '"' || s[k] == '\'') && i > 0 && s[i-1] == s[k] {
			k++ // a quoted key: "loss": 0.5
		} else if i > 0 && (s[i-1] == '\'' || s[i-1] == '"') {
			quoted = s[i-1]
		}
		if k < len(s) && s[k] == '(' && quoted == 0 {
			// mmengine's "Epoch(train) [1][50/100]", "Epoch(val)": a label.
			if w, e := parenWord(s, k); w != "" && isSplitWord(w) {
				if !isTrainWord(w) {
					li.setLabel(w)
				}
				inCall, closers = 0, strings.Count(s[e:], ")")
				k = e
			}
		}
		kw := k // right after the key
		k = skipSpaces(s, k)
		unit := false
		if k < len(s) && s[k] == '(' && k > kw {
			// "iter time (s): 0.512", "throughput per GPU (TFLOP/s/GPU): 105.3"
			if e := unitParen(s, k); e > 0 {
				k, unit = e, true
			}
		}
		if k >= len(s) || (!keyFollower(s[k]) && !startsValue(s, k)) {
			// A word, not a key: nothing a key is followed by. A split
			// word may label the line.
			switch {
			case k < len(s) && s[k] == '|' && isSplitWord(key) && aloneInField(s, i, j):
				li.setLabel(key) // fairseq's "| valid |", "| train |"
				floor = j
			case i == 0 && j < len(s) && s[j] == ' ' && j+1 < len(s) && isLetter(s[j+1]) && isSplitWord(key) && !isTrainWord(key):
				li.setLabel(key) // Megatron's "validation loss at iteration 50 | lm loss value: …"
			}
			i = j
			continue
		}
		lkey := p.lower(key)
		class := classify(lkey)
		if inCall > 0 && class != keyTotalSteps && class != keyTotalEpochs {
			i = j
			continue
		}
		if class == keyMetric && quoted == 0 && !unit && isMemoryKey(lkey) {
			// "Memory: 14222.125 MB", "MemAllocated=3.2GB", "gpu_mem 14.2 GiB"
			if v, end, ok := scanByteSize(s, kw); ok {
				ph := phraseBefore(s, i, floor)
				if !ph.has(capacityWords) && !bytes.Contains(lkey, []byte("total")) {
					p.applyPair(li, class, lkey, &ph, v)
				}
				i, floor = end, end
				continue
			}
		}

		if (class == keyStep || class == keyBatch || class == keyEpoch || class == keyTotalSteps || class == keyTotalEpochs) && !unit {
			if n, total, end, ok := scanProgress(s, k); ok {
				ph := phraseBefore(s, i, floor)
				r := progressRole(&ph)
				if class == keyTotalSteps && r == roleProgress && total == 0 && string(lkey) == "steps" {
					li.stepsKey, li.hasStepsKey = int64(min(n, maxStep)), true
				} else {
					p.applyProgress(li, class, r, n, total)
				}
				if class == keyEpoch && total == 0 {
					// fairseq's "epoch 001:    100 / 1102", "| epoch 010  2000 / 8223"
					if n2, t2, e2, ok := epochCounter(s, end); ok {
						li.setCounter(n2, t2, keyedCounter)
						end = e2
					}
				}
				i, floor = end, end
				continue
			}
		}
		// "__main__:train:42" (loguru) and "llamafactory.data.loader:157"
		// are locations, not train=42.
		chained := k < len(s) && s[k] == ':' && k+1 < len(s) && s[k+1] >= '0' && s[k+1] <= '9' &&
			((i > 0 && s[i-1] == ':') || strings.IndexByte(key, '.') > 0)
		if k < len(s) && (s[k] == ':' || s[k] == '=') && !chained {
			if s[k] == ':' && k > kw && !unit {
				// "epoch_num : 3" (PaddleOCR's configuration dump): read
				// only on a line that reports progress, as "key value".
				if len(p.spaced) < maxSpaced {
					p.spaced = append(p.spaced, spacedPair{key: i, keyEnd: i + len(key), value: skipSpaces(s, k+1), floor: floor})
				}
				i = j
				continue
			}
			v, end, ok := scanValue(s, k+1)
			if ok && quoted != 0 && end < len(s) && s[end] == quoted {
				ok = false // 'lr0=0.01'
			}
			if ok && nextIsNumber(s, end) {
				ok = false // "bbox_mAP_copypaste: 0.024 0.059 …" is a list
			}
			if !ok {
				v, end, ok = scanList(s, k+1)
			}
			if ok && torchvisionMaxMem(s, i) {
				v *= mib
			}
			if ok {
				if isSplitWord(key) {
					p.splitPair(li, key, v, end, s)
				} else {
					ph := phraseBefore(s, i, floor)
					if ph.n > 0 && ph.n <= 3 && wholeName(&ph) && ph.has(perWords) {
						// "elapsed time per iteration (ms)", "throughput
						// per GPU": the whole name says what it is.
						b := joinName(p.labelBuf[:0], &ph, lkey)
						p.labelBuf = b
						class = classify(b)
					}
					p.applyPair(li, class, lkey, &ph, v)
				}
				i, floor = end, end
				continue
			}
			w := wordAt(s, skipSpaces(s, k+1))
			switch {
			case w == "True" || w == "False" || w == "None" || w == "true" || w == "false" || w == "null":
				li.literals++
			case s[k] == ':' && anyWord(key, configWords) && w != "":
				li.config = true // "hyperparameters: lr0=0.01, lrf=0.01, …"
			case s[k] == ':' && isSplitWord(key) && !isTrainWord(key):
				li.setLabel(key) // timm's and torchvision's "Test: [ 10/48]"
			}
		}
		if k > kw && k < len(s) && startsValue(s, k) && len(p.spaced) < maxSpaced {
			p.spaced = append(p.spaced, spacedPair{key: i, keyEnd: i + len(key), value: k, floor: floor})
		}
		i = j
	}
}

// splitPair reads a pair whose key is only a split word: "Train: 3
// [ 100/1251" is timm's epoch; "train: 12800" (a dataset size) is no
// metric.
func (p *Parser) splitPair(li *lineInfo, key string, v float64, end int, s string) {
	if isTrainWord(key) && v == math.Trunc(v) {
		if k := skipSpaces(s, end); k < len(s) && s[k] == '[' {
			li.setEpoch(v, true)
		}
	}
}

func (li *lineInfo) setLabel(w string) {
	if li.label != "" || len(w) > 16 {
		return
	}
	li.label = w
	if !isTrainWord(w) {
		li.otherLoop = true
	}
}

// Words that name a split of the data: a line labelled with one is about
// that split.
var (
	splitWords = newWordSet("train", "training", "val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev")
	trainWords = newWordSet("train", "training")
)

func isSplitWord(w string) bool { return anyWord(w, splitWords) }
func isTrainWord(w string) bool { return anyWord(w, trainWords) }

// parenWord reads "(train)" at s[i] == '(' and returns the word and the
// index after ')'.
func parenWord(s string, i int) (string, int) {
	j := i + 1
	for j < len(s) && isLetter(s[j]) && j-i < 16 {
		j++
	}
	if j == i+1 || j >= len(s) || s[j] != ')' {
		return "", i
	}
	return s[i+1 : j], j + 1
}

// unitParen reads a unit in parentheses before a colon, "(s):",
// "(TFLOP/s/GPU):", at s[i] == '(' and returns the index of the colon, or
// 0 when there is none.
func unitParen(s string, i int) int {
	j := i + 1
	for j < len(s) && j-i < 20 && s[j] != ')' && s[j] != ' ' && s[j] != '(' {
		j++
	}
	if j == i+1 || j+1 >= len(s) || s[j] != ')' || s[j+1] != ':' {
		return 0
	}
	return j + 1
}

// aloneInField reports whether s[i:j] is the only word between two '|'
// (or a '|' and the end): "… | valid | epoch 001 | …".
func aloneInField(s string, i, j int) bool {
	a := i
	for a > 0 && s[a-1] == ' ' {
		a--
	}
	b := skipSpaces(s, j)
	return a > 0 && s[a-1] == '|' && (b == len(s) || s[b] == '|')
}

// epochCounter reads the counter after an epoch header: ":    100 / 1102"
// or "  2000 / 8223", followed by a space or the end.
func epochCounter(s string, i int) (n, total int64, end int, ok bool) {
	if i < len(s) && s[i] == ':' {
		i++
	}
	k := skipSpaces(s, i)
	if k == i {
		return 0, 0, i, false
	}
	a, j, ok := scanUint(s, k)
	if !ok {
		return 0, 0, i, false
	}
	j = skipSpaces(s, j)
	if j >= len(s) || s[j] != '/' {
		return 0, 0, i, false
	}
	b, e, ok := scanUint(s, skipSpaces(s, j+1))
	if !ok || b == 0 || (e < len(s) && s[e] != ' ' && s[e] != ',') {
		return 0, 0, i, false
	}
	return int64(min(a, maxStep)), int64(min(b, maxStep)), e, true
}

// nextIsNumber reports whether a value at s[:j] is followed by another bare
// number: "0.024 0.059", a list rather than a value.
func nextIsNumber(s string, j int) bool {
	k := skipSpaces(s, j)
	if k == j || k >= len(s) || !startsNumber(s, k) {
		return false
	}
	_, e, ok := scanNumber(s, k)
	return ok && (e == len(s) || s[e] == ' ')
}

// scanList reads a list of one number, or of equal numbers, after "key="
// or "key:": DeepSpeed's "lr=[0.001]", "lr=[5e-05, 5e-05]".
func scanList(s string, i int) (float64, int, bool) {
	i = skipSpaces(s, i)
	if i >= len(s) || s[i] != '[' {
		return 0, i, false
	}
	var v float64
	n := 0
	for j := i + 1; j < len(s); {
		j = skipSpaces(s, j)
		x, e, ok := scanNumber(s, j)
		if !ok || (n > 0 && !sameValue(x, v)) || n > 64 || !strings.ContainsAny(s[j:e], ".eE") {
			return 0, i, false
		}
		v, n = x, n+1
		e = skipSpaces(s, e)
		switch {
		case e < len(s) && s[e] == ']':
			return v, e + 1, true
		case e < len(s) && s[e] == ',':
			j = e + 1
		default:
			return 0, i, false
		}
	}
	return 0, i, false
}

// keyFollower reports whether c may follow a key: "loss:", "lr=", "#3",
// "Step [", "Epoch(".
func keyFollower(c byte) bool {
	return c == ':' || c == '=' || c == '#' || c == '[' || c == '('
}

// trimKeyEnd removes the '.', '/', '-' and '@' a key may not end with.
func trimKeyEnd(k string) string {
	n := len(k)
	for n > 0 && (k[n-1] == '.' || k[n-1] == '/' || k[n-1] == '-' || k[n-1] == '@') {
		n--
	}
	return k[:n]
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
	if !li.hasAbs && li.kind == noCounter && !li.hasEpoch && li.label == "" {
		return
	}
	last := 0 // end of the last pair read: "Acc@1 5.732 Acc@5 16.904"
	for _, c := range p.spaced {
		if !spacedKey(s, c.key, c.keyEnd) {
			continue
		}
		c.floor = max(c.floor, last)
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
		last = end
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
	if ph.has(notMeasureWords) || anyWord(string(lkey), configCountWords) {
		return // "Num examples = 25,000": a configuration echo
	}
	name, id := p.metricName(lkey, ph, li.label)
	if name != "" && !isTimestamp(name, v) {
		p.addMetric(li, name, id, v, false)
	}
}

// configCountWords before a key make it a count of the model, not a
// measure of training: "Peak FLOPS used for computing MFU: 9.89e+14".
var configCountWords = newWordSet("flops", "params", "param", "parameter", "parameters")

// notMeasureWords before a key make it a count or a count of the model.
var notMeasureWords = newWordSet("num", "number", "flops", "params", "param", "parameter", "parameters")

// logLevels are logging prefixes, never part of a name.
var logLevels = newWordSet("info", "debug", "warning", "warn", "error", "critical", "trace", "notice")

// metricName names a key given the words before it in its field: the
// whole name when it has up to four words ("learning rate" is
// learning_rate, "Val Loss" val_loss, "max mem" max_mem, Megatron's "lm
// loss value" lm_loss); in prose, "Test Accuracy of the model on the 10000
// test images" is test_accuracy. A unit after '/' makes a rate:
// "samples/sec" is samples_per_sec, "s/checkpoint" (time per thing) is no
// metric. A line's label comes first: "test_loss" on timm's "Test: [
// 10/48] … Loss: …".
func (p *Parser) metricName(lkey []byte, ph *phrase, label string) (string, int32) {
	if ph.n == 0 && label == "" && bytes.IndexByte(lkey, '/') < 0 {
		if !validName(lkey) {
			return "", -1
		}
		return p.intern(lkey)
	}
	b := p.nameBuf[:0]
	first := -1 // the farthest stop word: the words before it name the key
	if ph.n >= 3 && !ph.full {
		for w := ph.n - 1; w >= 0; w-- {
			if anyWord(ph.words[w], stopWords) {
				first = w
				break
			}
		}
	}
	switch {
	case first >= 0 && first < ph.n-1:
		for w := ph.n - 1; w > first && w >= ph.n-3; w-- {
			if len(b) > 0 {
				b = append(b, '_')
			}
			b = appendLower(b, ph.words[w])
		}
	case ph.n > 0 && ph.n <= 3 && !ph.full && wholeName(ph):
		for w := ph.n - 1; w >= 0; w-- {
			b = append(appendLower(b, ph.words[w]), '_')
		}
		if string(lkey) == "value" {
			b = b[:len(b)-1] // "lm loss value: 7.1" is lm_loss
		} else {
			b = append(b, lkey...)
		}
	case ph.n > 0 && anyWord(ph.words[0], qualifierWords) && !anyWord(string(lkey), qualifierWords):
		b = append(appendLower(b, ph.words[0]), '_')
		b = append(b, lkey...)
	default:
		b = append(b, lkey...)
	}
	b, ok := rateName(b)
	if !ok {
		p.nameBuf = b
		return "", -1
	}
	p.nameBuf = b
	if label != "" && !bytes.ContainsRune(b, '/') && !qualified(b) {
		l := append(appendLower(p.labelBuf[:0], label), '_')
		b = append(l, b...)
		p.labelBuf = b
	}
	if !validName(b) {
		return "", -1
	}
	return p.intern(b)
}

// joinName writes the whole name of a key and the words before it, lower
// case, into b: "elapsed_time_per_iteration".
func joinName(b []byte, ph *phrase, lkey []byte) []byte {
	for w := ph.n - 1; w >= 0; w-- {
		b = append(appendLower(b, ph.words[w]), '_')
	}
	return append(b, lkey...)
}

// perWords make a name a rate, "throughput per GPU": its last word is a
// unit, not what the name measures.
var perWords = newWordSet("per")

// wholeName reports whether the words before a key are part of its name:
// they start a field, are words of letters, with no stop word and no
// logging level.
func wholeName(ph *phrase) bool {
	if !ph.open {
		return false
	}
	for _, w := range ph.words[:ph.n] {
		if !isLetter(w[0]) || anyWord(w, stopWords) || anyWord(w, logLevels) {
			return false
		}
	}
	return true
}

// qualified reports whether a name starts with a split or qualifier word:
// "valid_loss", "test_acc".
func qualified(b []byte) bool {
	i := bytes.IndexByte(b, '_')
	return i > 0 && (anyWord(string(b[:i]), qualifierWords) || anyWord(string(b[:i]), splitWords))
}

// Units after '/' in a name.
var (
	timeUnits = newWordSet("s", "sec", "secs", "second", "seconds", "ms", "min", "h", "hr", "hour")
	perUnits  = newWordSet("batch", "step", "it", "iter", "iteration", "epoch", "gpu", "device", "image", "img", "sample", "token", "example")
)

// rateName turns a name with a unit after its only '/' into a rate:
// "samples/sec" is samples_per_sec, "words/batch" words_per_batch; a time
// per thing ("s/checkpoint", "sec/step") is not a metric (false). Other
// names with '/' ("train/loss") are kept.
func rateName(b []byte) ([]byte, bool) {
	i := bytes.IndexByte(b, '/')
	if i <= 0 || i == len(b)-1 || bytes.IndexByte(b[i+1:], '/') >= 0 {
		return b, true
	}
	num, den := string(b[:i]), string(b[i+1:])
	switch {
	case anyWord(num, timeUnits):
		return b, false
	case anyWord(den, timeUnits) && den != "ms" && den != "min" && den != "h" && den != "hr" && den != "hour":
		return append(b[:i], "_per_sec"...), true
	case anyWord(den, perUnits):
		rest := append([]byte(nil), b[i+1:]...)
		return append(append(b[:i], "_per_"...), rest...), true
	}
	return b, true
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
		if (k4 < len(s) && s[k4] == '[' && iterationRate(s[k4:])) || (k4 > k3 && clockEnds(s, k4)) {
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

// clockEnds reports whether s[i:] is an elapsed time that ends the line:
// YOLOv5's bars end "| 8/8 00:03".
func clockEnds(s string, i int) bool {
	return isClock(strings.TrimRight(s[i:], " "))
}

// richBar reads the bars of ultralytics 8.3: "…: 12% ━╸────────── 1/8
// 2.5it/s 0.4s<2.8s", at the first 0xe2 byte of s (i).
func (li *lineInfo) richBar(s string, i int) {
	for j := i; i >= 0 && i < len(s); i = nextByte(s, j, 0xe2) {
		j = i
		for j+3 <= len(s) && isBarRune(s[j:j+3]) {
			j += 3
		}
		if j == i {
			j = i + 1
			continue
		}
		if j >= len(s) || s[j] != ' ' {
			continue
		}
		n, k, ok := scanUint(s, j+1)
		if !ok || k >= len(s) || s[k] != '/' {
			continue
		}
		total, k2, ok := scanUint(s, k+1)
		if !ok || k2 >= len(s) || s[k2] != ' ' {
			continue
		}
		rate := s[k2+1:]
		if e := strings.IndexByte(rate, ' '); e >= 0 {
			rate = rate[:e]
		}
		if !barRate(rate) {
			continue
		}
		li.bar = true
		li.otherLoop = li.otherLoop || isNotLoopLabel(s[:i])
		li.setCounter(int64(n), int64(total), barCounter)
		return
	}
}

func nextByte(s string, from int, c byte) int {
	if from >= len(s) {
		return -1
	}
	if k := strings.IndexByte(s[from:], c); k >= 0 {
		return from + k
	}
	return -1
}

// isBarRune reports whether b is a rune of ultralytics' bar: ━ ─ ╸ ╺.
func isBarRune(b string) bool {
	return b == "━" || b == "─" || b == "╸" || b == "╺"
}

// barRate reports whether an ultralytics bar's rate is in iterations:
// "2.5it/s", "4.1Kit/s", "1.2s/it".
func barRate(r string) bool {
	switch {
	case strings.HasSuffix(r, "it/s"):
		r = strings.TrimRight(r[:len(r)-4], "KMG")
	case strings.HasSuffix(r, "s/it"):
		r = r[:len(r)-4]
	default:
		return false
	}
	return r != "" && strings.Trim(r, "0123456789.") == ""
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

var notLoopLabels = newWordSet("checking", "tested", "predicting")

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
		if anyWord(label[i:j], notLoopWords) || anyWord(label[i:j], notLoopLabels) {
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
		k := skipSpaces(s, j+1) // timm pads: "(  8%)"
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

// Character classes, looked up: the scanners ask for every byte.
const (
	chLetter uint8 = 1 << iota
	chDigit
	chUnderscore
	chKeyPunct // . / - @
	chScan     // [ ( ) @: what scanKeys looks at besides keys
)

var charClass = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= chLetter
		t[c-'a'+'A'] |= chLetter
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= chDigit
	}
	t['_'] |= chUnderscore
	for _, c := range "./-@" {
		t[c] |= chKeyPunct
	}
	for _, c := range "[()@" {
		t[c] |= chScan
	}
	return t
}()

func isLetter(c byte) bool { return charClass[c]&chLetter != 0 }

func isIdentStart(c byte) bool { return charClass[c]&(chLetter|chUnderscore) != 0 }

func isWordChar(c byte) bool { return charClass[c]&(chLetter|chDigit|chUnderscore) != 0 }

func isKeyChar(c byte) bool {
	return charClass[c]&(chLetter|chDigit|chUnderscore|chKeyPunct) != 0
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
		if j+1 < len(s) && s[j+1] == '|' || (j+2 < len(s) && s[j+1] == ' ' && s[j+2] == 0xe2) {
			return 0, i, false // a progress bar's "Map: 100%|██", ultralytics' "100% ━━━"
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
		if c == ' ' && ((v == math.Trunc(v) && countNounAt(s, j+1)) || unitAt(s, j+1)) {
			return 0, i, false // "Training finished: 300 steps" is a count, "6177 MB" a size
		}
		if c == ',' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' {
			return 0, i, false // "70.9157,86.5672,…" is a row of values
		}
	}
	return v, j, true
}

// units follow a number, after a space, that measures a size or a time:
// "6177 MB", "2.33 GiB", "0.04 s".
var units = newWordSet("b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "s", "ms", "sec", "secs", "seconds", "min", "mins", "minutes", "h", "hours")

// unitAt reports whether s[i:] starts with a unit that ends there: a
// size or time, or a ratio that is not per time ("4.27 anchors/target";
// "1,234.5 samples/s" is a rate, a value).
func unitAt(s string, i int) bool {
	w := wordAt(s, i)
	if e := i + len(w); w != "" && e+1 < len(s) && s[e] == '/' {
		d := wordAt(s, e+1)
		return d != "" && !anyWord(d, timeUnits)
	}
	if w == "" || len(w) > 7 {
		return false
	}
	if e := i + len(w); e < len(s) && (isKeyChar(s[e]) || s[e] == ':' || s[e] == '=') {
		return false
	}
	return anyWord(w, units)
}

// countNouns follow a number that counts things rather than measures.
var countNouns = newWordSet("step", "steps", "epoch", "epochs", "iteration", "iterations", "iter", "iters", "batch", "batches",
	"example", "examples", "sample", "samples", "image", "images", "token", "tokens", "item", "items", "file", "files",
	"record", "records", "sequence", "sequences", "core", "cores", "gpu", "gpus", "tpu", "hpu", "hpus", "param", "params",
	"parameters", "worker", "workers", "node", "nodes", "device", "devices", "layer", "layers", "gradient", "gradients",
	"type", "types", "word", "words", "sentence", "sentences")

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

package logparse

import (
	"strconv"
	"strings"
)

// fromText reads "key: value", "key=value", "Epoch [1/10]", "Step 5/100" and
// tqdm's "| 450/1000 [" out of a free-form line.
func (li *lineInfo) fromText(s string) {
	li.tqdm(s)
	prevWord := ""
	prevEnd := -1
	for i := 0; i < len(s); {
		c := s[i]
		if !isIdentStart(c) || (i > 0 && isKeyChar(s[i-1])) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isKeyChar(s[j]) {
			j++
		}
		key := strings.TrimRight(s[i:j], "./-")
		end := i + len(key)
		lkey := strings.ToLower(key)
		k := skipSpaces(s, end)

		if isProgressKey(lkey) {
			if n, total, stop, ok := scanProgress(s, k); ok {
				switch {
				case isEpochKey(lkey):
					li.setEpoch(float64(n), total)
				case lkey == "batch" && total == 0:
					// "batch 12" alone is an index, not progress.
				default:
					li.setStep(float64(n), total)
				}
				prevWord, prevEnd = "", -1
				i = stop
				continue
			}
		}
		if k < len(s) && (s[k] == ':' || s[k] == '=') {
			v, stop, ok := scanValue(s, k+1)
			if ok {
				name := lkey
				if prevWord != "" && prevEnd == i-1 && s[i-1] == ' ' {
					name = prevWord + "_" + lkey
				}
				li.add(name, v)
				prevWord, prevEnd = "", -1
				i = stop
				continue
			}
		}
		if isQualifier(lkey) {
			prevWord, prevEnd = lkey, end
		} else {
			prevWord, prevEnd = "", -1
		}
		i = j
	}
}

// tqdm finds tqdm's "| 450/1000 [" progress counter.
func (li *lineInfo) tqdm(s string) {
	bar := strings.LastIndexByte(s, '|')
	if bar < 0 {
		return
	}
	k := skipSpaces(s, bar+1)
	n, k2, ok := scanUint(s, k)
	if !ok || k2 >= len(s) || s[k2] != '/' {
		return
	}
	total, k3, ok := scanUint(s, k2+1)
	if !ok {
		return
	}
	k3 = skipSpaces(s, k3)
	if k3 < len(s) && s[k3] == '[' {
		li.setStep(float64(n), int64(total))
	}
}

func isProgressKey(k string) bool {
	return isStepKey(k) || isEpochKey(k) || k == "batch"
}

// isQualifier words join the next key: "Val Loss: 0.3" is val_loss.
func isQualifier(k string) bool {
	switch k {
	case "train", "training", "val", "valid", "validation", "test", "eval", "evaluation", "dev",
		"avg", "average", "mean", "running", "total", "best", "top1", "top5":
		return true
	}
	return false
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isKeyChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '/' || c == '-'
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// scanProgress reads "[1/10]", ": 3", "= 3", " 5/100" after a progress key.
func scanProgress(s string, i int) (n, total int64, end int, ok bool) {
	bracket := false
	if i < len(s) && (s[i] == '[' || s[i] == '(') {
		bracket = true
		i = skipSpaces(s, i+1)
	} else if i < len(s) && (s[i] == ':' || s[i] == '=' || s[i] == '#') {
		i = skipSpaces(s, i+1)
	}
	u, j, ok := scanUint(s, i)
	if !ok {
		return 0, 0, i, false
	}
	n = int64(u)
	k := skipSpaces(s, j)
	if k < len(s) && s[k] == '/' {
		t, j2, ok2 := scanUint(s, skipSpaces(s, k+1))
		if !ok2 {
			return 0, 0, i, false
		}
		total = int64(t)
		j = j2
	} else if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, 0, i, false // "epoch: 0.5" is a value, handled as a pair
	}
	k = skipSpaces(s, j)
	if bracket && k < len(s) && (s[k] == ']' || s[k] == ')') {
		j = k + 1
	}
	if j < len(s) && isIdentStart(s[j]) {
		return 0, 0, i, false
	}
	return n, total, j, true
}

func scanUint(s string, i int) (uint64, int, bool) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 16 {
		j++
	}
	if j == i || (j < len(s) && s[j] >= '0' && s[j] <= '9') {
		return 0, i, false
	}
	v, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		return 0, i, false
	}
	return v, j, true
}

// scanValue reads a number after "key:" or "key=", allowing PyTorch's
// "tensor(0.53, ...)" and a trailing '%'. The number must end at a boundary:
// "eta: 0:01:23" and "time: 3s" are not values.
func scanValue(s string, i int) (float64, int, bool) {
	i = skipSpaces(s, i)
	if strings.HasPrefix(s[i:], "tensor(") {
		i += len("tensor(")
	}
	v, j, ok := scanNumber(s, i)
	if !ok {
		return 0, i, false
	}
	if j < len(s) && s[j] == '%' {
		j++
	}
	if j < len(s) {
		c := s[j]
		if isKeyChar(c) || c == ':' {
			return 0, i, false
		}
	}
	return v, j, true
}

// scanNumber reads a decimal float or nan/inf at s[i:].
func scanNumber(s string, i int) (float64, int, bool) {
	j := i
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	if w := wordAt(s, j); w != "" {
		switch strings.ToLower(w) {
		case "nan", "inf", "infinity":
			v, err := strconv.ParseFloat(s[i:j+len(w)], 64)
			if err != nil {
				return 0, i, false
			}
			return v, j + len(w), true
		}
		return 0, i, false
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
	if digits == 0 {
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
	for j < len(s) && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z')) {
		j++
	}
	return s[i:j]
}

// parseNumber parses a whole string as a number (custom pattern groups).
func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	v, j, ok := scanNumber(s, 0)
	if !ok || (j != len(s) && !(j == len(s)-1 && s[j] == '%')) {
		return 0, false
	}
	return v, true
}

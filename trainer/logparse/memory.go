package logparse

import (
	"bytes"
	"strings"

	bytesize "github.com/trainbot/trainbot/internal/units"
)

// Memory a script prints is memory: a value with a byte unit on a name
// that says memory ("Memory: 14222.125 MB", DeepSpeed's
// "MemAllocated=3.2GB", "gpu_mem 14.2 GiB", detectron2's "max_mem: 2433M")
// is a point in bytes, named as printed ("memory", "memallocated",
// "gpu_mem", "max_mem"). Units are internal/units.ParseBytes's: K, M, G,
// KB, MB, GB powers of 1000, KiB, MiB, GiB of 1024. A number with a unit on
// any other name stays what it was: no metric.

// memoryWords are the parts of a name that say it measures memory.
var memoryWords = []string{"mem", "allocated", "reserved"}

// IsMemoryName reports whether a metric name says it measures memory:
// memory, max_mem, gpu_mem, memallocated, max_mem_reserved. Charts draw
// such a metric in binary units when its values are byte counts.
func IsMemoryName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range memoryWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// capacityWords before a memory name make it the device's size, not what
// the run uses: fairseq's "total memory = 39.586 GB".
var capacityWords = newWordSet("total", "capacity", "device", "available", "free")

// isMemoryKey is IsMemoryName for a lower-case key.
func isMemoryKey(lkey []byte) bool {
	for _, w := range memoryWords {
		if bytes.Contains(lkey, []byte(w)) {
			return true
		}
	}
	return false
}

// scanByteSize reads, at s[i:] right after a key, an optional ':' or '=',
// a number and a byte unit, glued to it or after one space ("3.2GB",
// ": 14222.125 MB", " 14.2 GiB"), and returns the size in bytes and where
// it ends. The unit must end at a boundary: "3 MBit" is no size.
func scanByteSize(s string, i int) (float64, int, bool) {
	k := skipSpaces(s, i)
	if k < len(s) && (s[k] == ':' || s[k] == '=') {
		k = skipSpaces(s, k+1)
	}
	if k == i && k < len(s) && s[k] != ' ' {
		return 0, i, false // glued to the key: not a pair
	}
	start := k
	if k < len(s) && s[k] == '-' {
		return 0, i, false
	}
	_, e, ok := scanNumber(s, k)
	if !ok || e == start || (e < len(s) && s[e] == '.') {
		return 0, i, false
	}
	num := s[start:e]
	if num[0] < '0' || num[0] > '9' {
		return 0, i, false // nan, inf
	}
	u := e
	if u < len(s) && s[u] == ' ' {
		u++
	}
	w := wordAt(s, u)
	end := u + len(w)
	if w == "" || len(w) > 5 || (end < len(s) && !sizeBoundary(s[end])) {
		return 0, i, false
	}
	v, ok := bytesize.ParseBytes(num, w)
	if !ok {
		return 0, i, false
	}
	return v, end, true
}

// sizeBoundary reports whether c may follow a size's unit: torchtitan's
// "memory: 1.41GiB(1.79%)", "4.1GB," and the end of a field.
func sizeBoundary(c byte) bool {
	switch c {
	case ' ', '\t', ',', ';', '|', ')', '(', ']', '}', '\r', '\n':
		return true
	}
	return false
}

// mib is torchvision's MB: its MetricLogger prints "max mem: 3021",
// torch.cuda.max_memory_allocated() / (1024 * 1024), with no unit.
const mib = 1 << 20

// torchvisionMaxMem reports whether the pair whose key starts at s[i] is
// torchvision's "max mem: N" (the two words, one space, a colon): its bare
// number is MB by that format's convention. A bare number after any other
// memory name keeps its value as printed.
func torchvisionMaxMem(s string, i int) bool {
	return strings.HasPrefix(s[i:], "mem:") && i >= 4 && s[i-4:i] == "max " && (i == 4 || s[i-5] == ' ')
}

// Package units prints the numbers trainbot shows people: byte counts,
// durations, metric values and compact axis numbers. It is the one
// implementation of these rules: the chat texts (bot/render re-exports it
// as render.Format*), the charts' labels (plots) and the supervisor's own
// detail strings (trainer) all call it, so "1.50 GiB" or "2h04m" reads the
// same in a message, a chart and a log line.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bytes prints a byte count in binary units with two decimals: "512 B",
// "1.50 GiB", "80.00 GiB".
func Bytes(n int64) string {
	const unit = 1024
	neg := n < 0
	a := n
	if neg {
		a = -n
	}
	if a < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := a / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(a) / float64(div)
	if neg {
		v = -v
	}
	return fmt.Sprintf("%.2f %ciB", v, "KMGTP"[exp])
}

// Duration prints a duration compactly, leaving out parts that are zero:
// "45s", "3m05s", "12m", "2h04m", "2h", "1d6h", "-30s". It rounds to the
// second.
func Duration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	s := int64(d.Round(time.Second) / time.Second)
	var out string
	switch dd, h, m, ss := s/86400, s%86400/3600, s%3600/60, s%60; {
	case s < 60:
		out = fmt.Sprintf("%ds", ss)
	case s < 3600 && ss == 0:
		out = fmt.Sprintf("%dm", m)
	case s < 3600:
		out = fmt.Sprintf("%dm%02ds", m, ss)
	case s < 86400 && m == 0:
		out = fmt.Sprintf("%dh", h)
	case s < 86400:
		out = fmt.Sprintf("%dh%02dm", h, m)
	case h == 0:
		out = fmt.Sprintf("%dd", dd)
	default:
		out = fmt.Sprintf("%dd%dh", dd, h)
	}
	if neg && s != 0 {
		out = "-" + out
	}
	return out
}

// Seconds is Duration for a number of seconds (chart axes); "?" for NaN
// and infinities.
func Seconds(sec float64) string {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) > float64(math.MaxInt64/int64(time.Second)) {
		return "?"
	}
	return Duration(time.Duration(math.Round(sec)) * time.Second)
}

// Value prints a metric value: four decimals, or three significant
// digits in exponent form when it is very small or very large: "0.0686",
// "3.000e-05", "NaN".
func Value(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e6):
		return fmt.Sprintf("%.3e", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// SI prints a number compactly with an SI suffix: 950, 12k, 1.5M, 0.25,
// 3e-05 (chart ticks, run counts in titles).
func SI(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case a >= 1e12:
		return TrimZeros(fmt.Sprintf("%.2f", v/1e12)) + "T"
	case a >= 1e9:
		return TrimZeros(fmt.Sprintf("%.2f", v/1e9)) + "G"
	case a >= 1e6:
		return TrimZeros(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e4:
		return TrimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 1:
		return TrimZeros(fmt.Sprintf("%.2f", v))
	case a >= 1e-3:
		return TrimZeros(fmt.Sprintf("%.4f", v))
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// TrimZeros drops the zeros after a decimal point, and the point: "1.50"
// → "1.5", "2.00" → "2", "-0" → "0".
func TrimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// byteUnits are the units ParseBytes reads: a decimal one is applied to
// the number's text (exp), a binary one by a product (mult).
var byteUnits = map[string]struct {
	exp  string
	mult float64
}{
	"B": {"", 1}, "BYTES": {"", 1},
	"K": {"e3", 1e3}, "KB": {"e3", 1e3}, "M": {"e6", 1e6}, "MB": {"e6", 1e6}, "G": {"e9", 1e9}, "GB": {"e9", 1e9},
	"T": {"e12", 1e12}, "TB": {"e12", 1e12}, "P": {"e15", 1e15}, "PB": {"e15", 1e15},
	"KIB": {"", 1 << 10}, "MIB": {"", 1 << 20}, "GIB": {"", 1 << 30}, "TIB": {"", 1 << 40}, "PIB": {"", 1 << 50},
}

// ParseBytes reads a size given as a number and its unit, in bytes: B and
// "bytes"; K, KB, M, MB, G, GB, T, TB, P, PB are powers of 1000 (as
// ultralytics and YOLOv5 print memory); KiB, MiB, GiB, TiB, PiB powers of
// 1024. Units are read without regard to case. A decimal unit is applied
// to the number's text ("2.61" GB is exactly 2.61e9), not by a product.
func ParseBytes(num, unit string) (float64, bool) {
	u, ok := byteUnits[strings.ToUpper(unit)]
	if !ok {
		return 0, false
	}
	if u.exp != "" && !strings.ContainsAny(num, "eE") {
		num, u.mult = num+u.exp, 1
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	return x * u.mult, true
}

// bytesWords are the words of a metric's name that say it counts memory;
// otherUnits the words that say it is in another unit than bytes (a
// percentage, megabytes) even so.
var (
	bytesWords = map[string]bool{"mem": true, "memory": true, "vram": true, "bytes": true, "rss": true, "hwm": true}
	otherUnits = map[string]bool{"kb": true, "kib": true, "mb": true, "mib": true, "gb": true, "gib": true, "tb": true,
		"pct": true, "percent": true, "util": true, "utilization": true, "frac": true, "fraction": true, "ratio": true, "share": true}
)

// IsBytes reports whether a metric named name whose value is v is a byte
// count: a word of its name says memory (mem, memory, vram, bytes, rss:
// gpu_mem, max_memory_allocated, torch/cuda.memory), none says another
// unit (mem_mb, memory_pct), and v is at least 1 MiB, as byte counts of
// a training are (a value in megabytes that large would be a terabyte).
func IsBytes(name string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) < 1<<20 {
		return false
	}
	found := false
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) {
		if otherUnits[w] {
			return false
		}
		found = found || bytesWords[w]
	}
	return found
}

// Metric prints the value of the metric name: a byte count in binary
// units ("240.04 MiB", IsBytes), any other value as Value does.
func Metric(name string, v float64) string {
	if IsBytes(name, v) {
		return Bytes(int64(math.Round(v)))
	}
	return Value(v)
}

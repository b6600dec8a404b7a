package units

import (
	"math"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {512, "512 B"}, {1536, "1.50 KiB"}, {1536 << 20, "1.50 GiB"}, {80 << 30, "80.00 GiB"}, {-2048, "-2.00 KiB"}} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {45 * time.Second, "45s"}, {90 * time.Second, "1m30s"}, {185 * time.Second, "3m05s"},
		{12 * time.Minute, "12m"}, {7440 * time.Second, "2h04m"}, {2 * time.Hour, "2h"},
		{30 * time.Hour, "1d6h"}, {48 * time.Hour, "2d"}, {-30 * time.Second, "-30s"}, {1499 * time.Millisecond, "1s"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
	if got := Seconds(5400); got != "1h30m" {
		t.Errorf("Seconds(5400) = %q", got)
	}
	if got := Seconds(math.NaN()); got != "?" {
		t.Errorf("Seconds(NaN) = %q", got)
	}
}

func TestValueAndSI(t *testing.T) {
	for v, want := range map[float64]string{0.0686: "0.0686", 3e-5: "3.000e-05", 2e6: "2.000e+06", 0: "0.0000"} {
		if got := Value(v); got != want {
			t.Errorf("Value(%g) = %q, want %q", v, got, want)
		}
	}
	if Value(math.NaN()) != "NaN" || Value(math.Inf(-1)) != "-Inf" {
		t.Error("NaN and Inf")
	}
	for v, want := range map[float64]string{950: "950", 12000: "12k", 1.5e6: "1.5M", 0.25: "0.25", 3e-5: "3e-05"} {
		if got := SI(v); got != want {
			t.Errorf("SI(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		num, unit string
		want      float64
		ok        bool
	}{
		{"2.61", "G", 2.61e9, true}, {"2.00", "GiB", 2 << 30, true}, {"512", "bytes", 512, true},
		{"1.5", "mb", 1.5e6, true}, {"1e3", "KB", 1e6, true}, {"3", "furlongs", 0, false},
	} {
		if got, ok := ParseBytes(c.num, c.unit); got != c.want || ok != c.ok {
			t.Errorf("ParseBytes(%q, %q) = %v %v, want %v %v", c.num, c.unit, got, ok, c.want, c.ok)
		}
	}
}

// A metric that counts bytes is shown in binary units wherever a value is
// printed: 状态 showed "memory 2.517e+08" for torch's byte count.
func TestMetricInBinaryUnits(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float64
		want string
	}{
		{"memory", 2.517e8, "240.04 MiB"},
		{"gpu_mem", 21.5 * (1 << 30), "21.50 GiB"},
		{"max_memory_allocated", 3 << 20, "3.00 MiB"},
		{"torch/cuda.memory", 1 << 30, "1.00 GiB"},
		{"peak_rss", 5e8, "476.84 MiB"},
		{"mem_mb", 24000000, "2.400e+07"}, // megabytes, by its name
		{"memory_pct", 2e6, "2.000e+06"},
		{"memory", 0.73, "0.7300"}, // a fraction: not a byte count
		{"loss", 2.517e8, "2.517e+08"},
		{"val_loss", 0.0686, "0.0686"},
		{"memory", math.NaN(), "NaN"},
		{"lr_memory", 3e-4, "3.000e-04"},
	} {
		if got := Metric(c.name, c.v); got != c.want {
			t.Errorf("Metric(%q, %g) = %q, want %q", c.name, c.v, got, c.want)
		}
	}
}

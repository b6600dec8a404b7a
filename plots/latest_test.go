package plots

import "testing"

// The value written at a line's end is in binary units on a chart in
// bytes (the memory overlay wrote "2.757e+07" on an axis in MiB), and for
// a byte-valued metric on a loss chart.
func TestLatestLabelOfBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		v     float64
		bytes bool
		want  string
	}{
		{"#4", 2.757e7, true, "26.29 MiB"},
		{"#5", 2.829e8, true, "269.79 MiB"},
		{"gpu_mem", 2.829e8, false, "269.79 MiB"},
		{"loss", 0.09774, false, "0.09774"},
		{"val_loss", 2.2932, false, "2.293"},
	} {
		if got := formatLatest(c.name, c.v, c.bytes); got != c.want {
			t.Errorf("formatLatest(%q, %g, %v) = %q, want %q", c.name, c.v, c.bytes, got, c.want)
		}
	}
}

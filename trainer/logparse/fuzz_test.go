package logparse

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary output to a parser: nothing may panic, every
// point must be well formed, parsing must not depend on how the output is
// cut into lines at '\r', and every point must read back from its
// `trainbot parse --json` form as itself.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, seg := range segments(string(b)) {
			f.Add(seg)
		}
		f.Add(string(b))
	}
	for _, s := range []string{
		"", "\r", "{", "}", "{}", "{'a':", `{"step": 1e999}`, "loss=", "loss: -", "step [", "[1/", "| 1/2 [",
		"Epoch 0/0", "1/0 [==] - loss: 1", "\x1b[", "\x1b]", "tensor(", "x=np.float64(", "1,000,", "loss: 1,",
		"Epoch [18446744073709551615/1], Step [1/1], Loss: 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := newParser(t, `(?P<step>\d+)/(?P<total_steps>\d+) (?P<custom>\S+)`)
		var pts []Point
		for _, line := range strings.Split(s, "\n") {
			pts = append(pts, p.Line(line)...)
		}
		for _, pt := range pts {
			checkPoint(t, pt)
		}
		checkProgress(t, p.Progress())

		if len(s) < MaxLineLen {
			q := newParser(t, `(?P<step>\d+)/(?P<total_steps>\d+) (?P<custom>\S+)`)
			var again []Point
			for _, seg := range segments(s) {
				again = append(again, q.Line(seg)...)
			}
			if !samePoints(pts, again) {
				t.Fatalf("split at \\r: got %v, want %v", again, pts)
			}
		}

		for _, pt := range pts {
			roundTrip(t, pt)
		}

		c := Clean(s)
		for i := 0; i < len(c); i++ {
			if (c[i] < 0x20 && c[i] != '\t') || c[i] == 0x7f {
				t.Fatalf("Clean(%q) = %q: control byte %#x", s, c, c[i])
			}
		}
	})
}

func checkPoint(t *testing.T, pt Point) {
	t.Helper()
	if pt.Name == "" || len(pt.Name) > maxNameLen || !utf8.ValidString(pt.Name) || !validName([]byte(pt.Name)) {
		t.Fatalf("bad name %q", pt.Name)
	}
	if pt.Step < 0 || pt.Step > maxStep {
		t.Fatalf("%s: bad step %d", pt.Name, pt.Step)
	}
	if pt.HasEpoch() && (pt.Epoch < 0 || pt.Epoch > 1e9) {
		t.Fatalf("%s: bad epoch %v", pt.Name, pt.Epoch)
	}
}

func checkProgress(t *testing.T, pr Progress) {
	t.Helper()
	if pr.Step < 0 || pr.Step > maxStep || pr.TotalSteps < 0 || pr.TotalSteps > maxStep || pr.TotalEpochs < 0 {
		t.Fatalf("bad progress %+v", pr)
	}
	if !math.IsNaN(pr.Epoch) && (pr.Epoch < 0 || pr.Epoch > 1e9) {
		t.Fatalf("bad progress epoch %+v", pr)
	}
}

func samePoints(a, b []Point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Step != b[i].Step || a[i].Name != b[i].Name || !sameValue(a[i].Value, b[i].Value) || !sameValue(a[i].Epoch, b[i].Epoch) {
			return false
		}
	}
	return true
}

// roundTrip writes a point the way `trainbot parse --json` does and reads
// it back with a fresh parser.
func roundTrip(t *testing.T, pt Point) {
	t.Helper()
	obj := map[string]any{"step": pt.Step, "name": pt.Name, "value": pt.Value}
	switch {
	case math.IsNaN(pt.Value):
		obj["value"] = "NaN"
	case math.IsInf(pt.Value, 1):
		obj["value"] = "Inf"
	case math.IsInf(pt.Value, -1):
		obj["value"] = "-Inf"
	}
	if pt.HasEpoch() {
		obj["epoch"] = pt.Epoch
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	got := (&Parser{}).Line(string(b))
	if !samePoints(got, []Point{pt}) {
		t.Fatalf("round trip of %v through %s: got %v", pt, b, got)
	}
}

// TestRoundTrip checks every point of the testdata logs against its JSON
// form (the fuzz test does the same for arbitrary input).
func TestRoundTrip(t *testing.T) {
	for _, tc := range allFileCases() {
		p := newParser(t, tc.patterns...)
		for _, line := range strings.Split(readTestdata(t, tc.file), "\n") {
			for _, pt := range p.Line(line) {
				roundTrip(t, pt)
			}
		}
	}
}

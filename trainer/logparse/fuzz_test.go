package logparse

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary output to a parser: nothing may panic, every
// point must be well formed, parsing must not depend on how the output is
// cut into lines at '\r', and every point must read back from its
// `trainbot parse --json` form as itself. It also checks the fast path
// (learned line shapes, fast.go) against scan: the same points and
// progress after every line, with the lines repeated with other digits so
// that shapes are learned and then used.
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
		differential(t, s)
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

// differential parses the lines of s three times over, then with their
// digits changed (1→2, 2→3, … 9→0, and 0→1 at a line's odd digits), with
// the fast path and without, and fails at the first line where the points
// or the progress differ.
func differential(t *testing.T, s string) (fed, fastLines int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) > 2000 {
		lines = lines[:2000]
	}
	var feed []string
	for range 3 {
		feed = append(feed, lines...)
	}
	for _, rot := range []func(byte, int) byte{
		func(c byte, _ int) byte { return '0' + (c-'0'+1)%10 },
		func(c byte, i int) byte {
			if i%2 == 1 {
				return '0' + (c-'0'+7)%10
			}
			return c
		},
	} {
		for _, l := range lines {
			b := []byte(l)
			n := 0
			for i, c := range b {
				if c >= '0' && c <= '9' {
					b[i] = rot(c, n)
					n++
				}
			}
			feed = append(feed, string(b), string(b))
		}
	}
	fast, slow := &Parser{}, &Parser{}
	slow.shapes.noFast = true
	for i, l := range feed {
		got, want := fast.Line(l), slow.Line(l)
		if !samePoints(got, want) {
			t.Fatalf("line %d %q: fast path gave %v, scan %v", i, l, got, want)
		}
		if gp, wp := fast.Progress(), slow.Progress(); !sameProgress(gp, wp) {
			t.Fatalf("line %d %q: fast path progress %+v, scan %+v", i, l, gp, wp)
		}
	}
	return len(feed), fast.shapes.hits
}

func sameProgress(a, b Progress) bool {
	return a.Step == b.Step && a.TotalSteps == b.TotalSteps && a.TotalEpochs == b.TotalEpochs && sameValue(a.Epoch, b.Epoch)
}

// TestFastPathSameAsScan runs the differential check over every testdata
// log, and counts how many lines the fast path read.
func TestFastPathSameAsScan(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	total, fast := 0, 0
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			n, f := differential(t, readTestdata(t, filepath.Base(name)))
			total, fast = total+n, fast+f
			t.Logf("%d of %d lines by the fast path", f, n)
		})
	}
	t.Logf("%d of %d lines by the fast path (%.0f%%)", fast, total, 100*float64(fast)/float64(max(total, 1)))
	if fast == 0 {
		t.Error("the fast path read no line")
	}
}

// FuzzNumberClass checks lexNumber against strconv: the same value, and the
// value tests of its class the same as valueClass of that value.
func FuzzNumberClass(f *testing.F) {
	for _, s := range []string{"0", "-0", "0.0", "1", "1.0", "0.5", "1000000000", "1000000000.5", "999999999.99",
		"0999999999", "01000000000", "9999999999", "1234567890123", "-3", "1e9", "2.5e-3", "7E+10", "123456789012345",
		"1.0000000000000000001", "0.30000000000000004", "9007199254740993", "12.000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || !(isDigit(s[0]) || s[0] == '-' && len(s) > 1 && isDigit(s[1])) {
			return
		}
		end, cls, v, ok := lexNumber(s, 0)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s[:end], 64)
		if err != nil || want != v {
			t.Fatalf("lexNumber(%q) = %v, strconv %v (%v)", s[:end], v, want, err)
		}
		const tests = clsWhole | clsZero | clsGE1 | clsLE1e9 | clsUnix | clsInt64OK
		if got, want := cls&tests, valueClass(v); got != want {
			t.Fatalf("lexNumber(%q): value tests %#x, want %#x", s[:end], got, want)
		}
	})
}

// FuzzHasControl holds the word-at-a-time test to the byte loop.
func FuzzHasControl(f *testing.F) {
	for _, s := range []string{"", "plain text of a line", "tab\there", "bell\a", "del\x7f", "é ü 中文 ok", "\x1b[31mred", "\xff\xfe\x80\x9f", "12345678\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := false
		for i := 0; i < len(s); i++ {
			if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				want = true
			}
		}
		if got := hasControl(s); got != want {
			t.Fatalf("hasControl(%q) = %v, want %v", s, got, want)
		}
	})
}

// TestFastPathRawLines holds the fast path's reading of whole raw lines
// (shapes.direct) to scan on lines that are almost a learned shape's: with
// spaces around, a rank prefix, a control character, a longer number, a
// number run on into a word or a point.
func TestFastPathRawLines(t *testing.T) {
	shape := "Epoch [1/10], Step [100/600], Loss: 0.2300"
	for _, l := range []string{
		" " + shape, shape + " ", "\t" + shape, shape + "\t", "\u00a0" + shape, shape + "\u00a0", shape + "\r",
		"[rank1]: " + shape, "[1,0]<stdout>: " + shape, "0: " + shape, shape + "\x1b[0m",
		"Epoch [1/10], Step [1000/600], Loss: 0.2300", "Epoch [1/10], Step [100/600], Loss: 0.23001",
		"Epoch [1/10], Step [100/600], Loss: 0.2300x", "Epoch [1/10], Step [100/600], Loss: 0.2300.",
		"Epoch [1/10], Step [100/600], Loss: 1.2300", "Epoch [1/10], Step [100/600], Loss: -0.2300",
		"Epoch [1/10], Step [100/600], Loss: 0.2300e3", "Epoch [01/10], Step [100/600], Loss: 0.2300",
		"Epoch [1/10], Step [100/600], Loss: 0.0000", "Epoch [1/10], Step [100/600], Loss: 0.230",
		"Epoch [1/10], Step [100/600], Loss: 0.2300 ", "Epoch [1/10], Step [100/600], Loss: ",
		"Epoch [1/10], Step [100/600]", "Epoch [1/10], Step [1a0/600], Loss: 0.2300",
		"Epoch [1/10], Step [100/600], Loss: 1234567890.2300", "Epoch [1/10], Step [100/600], Loss: 9999999999",
		"loss: 1", "loss: 12", "  loss: 12", "loss: 1000000000", "loss: 1000000001", "loss: 1700000000",
		"loss: -1700000000", "loss: 1000000000.5", "loss: 0999999999", "x 1.5 y -2 z 3.25e-2",
	} {
		var s strings.Builder
		for range 3 {
			s.WriteString(shape + "\n" + l + "\n")
		}
		differential(t, s.String())
		differential(t, strings.Repeat(l+"\n", 4)+shape)
	}
	// Shapes learned from what follows a rank prefix, which a raw line can
	// have too: "[rank1]: loss 0.7" is rank 1's, " loss 0.7" is "loss 0.7".
	differential(t, strings.Repeat("[rank0]: [rank1]: loss 0.5\n", 3)+strings.Repeat("[rank1]: loss 0.7\n", 3))
	differential(t, "1: a\n0: a\n1: a\n0: a\n1: a\n0: a\n"+strings.Repeat("0:  loss 0.5\n", 3)+strings.Repeat(" loss 0.7\n", 3)+
		strings.Repeat("1: loss 0.5 \u00a0\n", 3)+strings.Repeat("loss 0.7 \u00a0\n", 3))
}

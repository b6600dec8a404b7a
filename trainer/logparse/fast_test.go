package logparse

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestDigits8 reads every length of digits at every place of a line,
// the last eight bytes included (where digits8 loads before them).
func TestDigits8(t *testing.T) {
	line := "x=12345678;y=90123456.0"
	for i := range len(line) {
		for n := 1; n <= 8 && i+n <= len(line); n++ {
			d := line[i : i+n]
			want, err := strconv.ParseUint(d, 10, 64)
			if err != nil {
				continue
			}
			if got := digits8(line, digitsAtOf(i, n, len(line))); got != want {
				t.Errorf("digits8 of %q at %d: %d, want %d", d, i, got, want)
			}
		}
	}
	for _, d := range []string{"0", "00000000", "99999999", "10000000", "09", "1"} {
		s := "ab" + d + "cdefgh"
		want, _ := strconv.ParseUint(d, 10, 64)
		if got := digits8(s, digitsAtOf(2, len(d), len(s))); got != want {
			t.Errorf("digits8 of %q: %d, want %d", d, got, want)
		}
	}
}

// TestSatMul holds satMul's fast case to the division it replaces.
func TestSatMul(t *testing.T) {
	slow := func(a, b int64) int64 {
		if a == 0 || b == 0 {
			return 0
		}
		if a > maxStep/b {
			return maxStep
		}
		return a * b
	}
	vals := []int64{0, 1, 2, 3, 9, 10, 600, 20000, 1<<26 - 1, 1 << 26, 1<<27 + 1, 94906265, 94906266, 1<<31 - 1, 1 << 31, 1 << 40, maxStep - 1, maxStep, math.MaxInt64, -1, -20000, math.MinInt64}
	for _, a := range vals {
		for _, b := range vals {
			if got, want := satMul(a, b), slow(a, b); got != want {
				t.Errorf("satMul(%d, %d) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestLayoutUsed checks that the classic line's shape is read by its
// layout, and that lines of its length that are not of it are not.
func TestLayoutUsed(t *testing.T) {
	p := &Parser{}
	for range 3 {
		p.Line("Epoch [1/10], Step [100/600], Loss: 0.2300")
	}
	tp := p.shapes.recent[0]
	if tp == nil || tp.words == nil || !tp.raw {
		t.Fatalf("classic line: template %+v, want a raw one with a layout", tp)
	}
	for _, l := range []string{
		"Epoch [1/10], Step [100/600], Loss: 0.2301", "Epoch [2/10], Step [999/600], Loss: 0.9999",
	} {
		if !p.shapes.matchDirect(l, tp) {
			t.Errorf("%q: not matched", l)
		}
	}
	for _, l := range []string{
		"Epoch [1/10], Step [100/600], Loss: 1.2300", "Epoch [1/10], Step [100/600], Loss: 0,2300",
		"Epoch [1/10], Step [1x0/600], Loss: 0.2300", "Epoch [1/10], Step [100/600], Loss: 0.230\xff",
		"Epoch [1/10], Step [100/600], Loss: 0.230:", "Epoch [1/10], Step [100/600], Loss: 0.230/",
		"Epoch [1/10], Step [100/600], Loss: 0.23000", "Epoch [1/10], Step [100/600], loss: 0.2300",
		"Epoch [0/10], Step [100/600], Loss: 0.2300", "Epoch [1/10], Step [100/600], Loss: 0.0000", "Epoch [1/01], Step [100/600], Loss: 0.2300",
	} {
		if p.shapes.matchDirect(l, tp) {
			t.Errorf("%q: matched", l)
		}
	}
}

// TestAppendSameAsLine parses every testdata log with Line, AppendLine and
// AppendString (each reusing its slice, as the supervisor does): the same
// points and progress after every line.
func TestAppendSameAsLine(t *testing.T) {
	for _, tc := range allFileCases() {
		a, b, c := newParser(t, tc.patterns...), newParser(t, tc.patterns...), newParser(t, tc.patterns...)
		var bp, cp []Point
		for i, line := range strings.Split(readTestdata(t, tc.file), "\n") {
			want := a.Line(line)
			bp = b.AppendLine(bp[:0], []byte(line))
			cp = c.AppendString(cp[:0], line)
			if !samePoints(bp, want) || !samePoints(cp, want) {
				t.Fatalf("%s:%d %q: AppendLine %v, AppendString %v, Line %v", tc.file, i+1, line, bp, cp, want)
			}
			if !sameProgress(b.Progress(), a.Progress()) || !sameProgress(c.Progress(), a.Progress()) {
				t.Fatalf("%s:%d %q: progress differs", tc.file, i+1, line)
			}
		}
	}
}

// AppendLine keeps nothing of its line: the supervisor parses out of the
// log tail's buffer, which the next read overwrites. Names (the metrics
// map's keys downstream) and the progress must not change when the bytes
// they came from do.
func TestAppendLineKeepsNothingOfItsBuffer(t *testing.T) {
	for _, tc := range allFileCases() {
		a, b := newParser(t, tc.patterns...), newParser(t, tc.patterns...)
		var want, got []Point
		buf := make([]byte, 0, 1<<16)
		for _, line := range strings.Split(readTestdata(t, tc.file), "\n") {
			want = append(want, a.Line(line)...)
			buf = append(buf[:0], line...)
			got = b.AppendLine(got, buf)
			for i := range buf {
				buf[i] = 'X' // the next read
			}
		}
		if !samePoints(got, want) {
			t.Errorf("%s: %d points from an overwritten buffer differ from Line's %d", tc.file, len(got), len(want))
		}
		if !sameProgress(b.Progress(), a.Progress()) {
			t.Errorf("%s: the progress differs once the buffer was overwritten", tc.file)
		}
	}
}

// TestAppendRead holds AppendRead to AppendLine and Progress, and its
// Layout to what it promises: lines read with one layout differ only in
// their digits, a layout is numbered once, and a line no layout read has
// none.
func TestAppendRead(t *testing.T) {
	lines := []string{
		"Epoch [1/10], Step [5/600], Loss: 0.2345",
		"step=12 loss=0.5 lr=0.001",
		`{"step": 3, "loss": 0.25}`,
		"step=1e3 loss=0.5", // an exponent: no layout
		"\rtrain:  50%|█████     | 50/100 [00:05<00:05, 9.50it/s, loss=0.31]",
		"Epoch [1/10], Step [15/600], Loss: 0.2345", // another width of step: another layout
		"step=12 loss=-0.5 lr=0.001",                // a sign: another layout
		"step=12 loss=0.5",
		"   step=12 loss=0.5",      // spaces around: not the layout's whole line
		"\x1b[32mstep=12 loss=0.5", // a colour: neither
	}
	vary := func(s string, i int) string { // the same text, other digits
		b := []byte(s)
		for k := range b {
			if isDigit(b[k]) && k > 0 && isDigit(b[k-1]) {
				b[k] = byte('0' + (int(b[k]-'0')+i*7+k)%10)
			}
		}
		return string(b)
	}
	ref, p := &Parser{}, &Parser{}
	byLayout := map[uint64]string{}
	layoutOf := map[string]uint64{}
	for i := range 40 {
		for _, l := range lines {
			line := vary(l, i)
			want := ref.Line(line)
			got, rd := p.AppendRead(nil, []byte(line))
			if !samePoints(got, want) {
				t.Fatalf("AppendRead(%q): %v, AppendLine %v", line, got, want)
			}
			if pr := ref.Progress(); !sameProgress(rd.Progress, pr) {
				t.Fatalf("AppendRead(%q): progress %+v, Progress %+v", line, rd.Progress, pr)
			}
			if rd.Layout == 0 {
				continue
			}
			if prev, ok := byLayout[rd.Layout]; ok {
				if len(prev) != len(line) {
					t.Fatalf("layout %d read %q and %q", rd.Layout, prev, line)
				}
				for k := range line {
					if line[k] != prev[k] && !(isDigit(line[k]) && isDigit(prev[k])) {
						t.Fatalf("layout %d read %q and %q: they differ at byte %d", rd.Layout, prev, line, k)
					}
				}
			}
			byLayout[rd.Layout] = line
			layoutOf[l] = rd.Layout
		}
	}
	for _, l := range []string{lines[0], lines[1], lines[2], lines[5], lines[6]} {
		if layoutOf[l] == 0 {
			t.Errorf("%q never read with a layout", l)
		}
	}
	for _, l := range []string{lines[3]} {
		if layoutOf[l] != 0 {
			t.Errorf("%q read with layout %d, want none", l, layoutOf[l])
		}
	}
	if len(byLayout) < 4 {
		t.Errorf("%d layouts, want one per shape: %v", len(byLayout), byLayout)
	}
}

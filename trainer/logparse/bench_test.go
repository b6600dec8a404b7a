package logparse

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// mixedLog is every testdata log, one after the other, repeated to about
// 4 MB: progress bars, dicts, JSON, key=value and plain lines as they come.
func mixedLog(b testing.TB) ([]byte, int) {
	b.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil {
		b.Fatal(err)
	}
	sort.Strings(files)
	var one bytes.Buffer
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		one.Write(data)
	}
	var log bytes.Buffer
	for log.Len() < 4<<20 {
		log.Write(one.Bytes())
	}
	lines := 0
	sc := newSegmentScanner(log.Bytes())
	for sc.Scan() {
		lines++
	}
	return log.Bytes(), lines
}

// newSegmentScanner splits at '\n' and '\r' as trainbot's capture does.
func newSegmentScanner(data []byte) *bufio.Scanner {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxLineLen)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	return sc
}

// BenchmarkSplitBaseline only splits the mixed log into lines and makes
// each a string, as BenchmarkParse does before parsing: the floor it is
// measured against (bench/logparse.sh prints the ratio).
func BenchmarkSplitBaseline(b *testing.B) {
	data, lines := mixedLog(b)
	benchSplit(b, data, lines)
}

// BenchmarkParse splits the mixed log and parses every line.
func BenchmarkParse(b *testing.B) {
	data, lines := mixedLog(b)
	benchParse(b, false, data, lines)
}

// classicLog is the log of issue #16's measurement: 200,000 lines of the
// classic loop, "Epoch [e/10], Step [s/20000], Loss: x".
func classicLog(testing.TB) ([]byte, int) {
	const lines, perEpoch = 200_000, 20_000
	var b bytes.Buffer
	x := uint64(1)
	for i := 0; i < lines; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		loss := 2*math.Pow(0.99999, float64(i)) + float64(x>>40)/float64(1<<24)*0.1
		fmt.Fprintf(&b, "Epoch [%d/10], Step [%d/%d], Loss: %.4f\n", i/perEpoch+1, i%perEpoch+1, perEpoch, loss)
	}
	return b.Bytes(), lines
}

// BenchmarkSplitClassic splits the classic log into lines, as
// BenchmarkSplitBaseline does the mixed one.
func BenchmarkSplitClassic(b *testing.B) {
	data, lines := classicLog(b)
	benchSplit(b, data, lines)
}

// BenchmarkParseClassic parses the classic log line by line (the fast path
// reads all but the first two lines).
func BenchmarkParseClassic(b *testing.B) {
	data, lines := classicLog(b)
	benchParse(b, false, data, lines)
}

// BenchmarkParseClassicScan is BenchmarkParseClassic without the fast path:
// what scan alone costs.
func BenchmarkParseClassicScan(b *testing.B) {
	data, lines := classicLog(b)
	benchParse(b, true, data, lines)
}

// BenchmarkAppendClassic parses the classic log out of the scanner's
// buffer with AppendLine: no string and no slice per line.
func BenchmarkAppendClassic(b *testing.B) {
	data, lines := classicLog(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	points := 0
	var pts []Point
	for i := 0; i < b.N; i++ {
		p := &Parser{}
		sc := newSegmentScanner(data)
		for sc.Scan() {
			pts = p.AppendLine(pts[:0], sc.Bytes())
			points += len(pts)
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(points)/float64(b.N), "points/op")
}

func benchSplit(b *testing.B, data []byte, lines int) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		sc := newSegmentScanner(data)
		for sc.Scan() {
			s := string(sc.Bytes())
			n += len(s) & 1
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	_ = n
}

func benchParse(b *testing.B, noFast bool, data []byte, lines int) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	points := 0
	for i := 0; i < b.N; i++ {
		p := &Parser{}
		p.shapes.noFast = noFast
		sc := newSegmentScanner(data)
		for sc.Scan() {
			points += len(p.Line(string(sc.Bytes())))
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(points)/float64(b.N), "points/op")
}

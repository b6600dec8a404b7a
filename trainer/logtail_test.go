package trainer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The log is cut into the same lines, with the same offsets and '\r'
// marks, however the reads split it: "\r" progress bars between "\n"
// lines, "\r\n" ends, an unended last line.
func TestLogTailCutsLinesAtEveryReadSplit(t *testing.T) {
	text := "start\n\rbar 1\rbar 2\rbar 3\r\nepoch 1 loss=0.5\n\r\r\nx\ry\rz\nlast"
	type got struct {
		text string
		end  int64
		cr   bool
	}
	want := []got{{"start", 6, false}, {"bar 1", 13, false}, {"bar 2", 19, true}, {"bar 3", 25, true},
		{"epoch 1 loss=0.5", 43, false}, {"x", 48, false}, {"y", 50, true}, {"z", 52, true}, {"last", 56, false}}
	path := filepath.Join(t.TempDir(), "output.log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for chunk := 1; chunk <= len(text); chunk++ {
		lt, err := openLogTail(path)
		if err != nil {
			t.Fatal(err)
		}
		lt.buf = make([]byte, chunk)
		var lines []got
		fn := func(l line) { lines = append(lines, got(l)) }
		if _, err := lt.read(len(text)+chunk, fn); err != nil {
			t.Fatal(err)
		}
		lt.flush(fn)
		lt.close()
		if !slices.Equal(lines, want) {
			t.Fatalf("reads of %d bytes: got %+v, want %+v", chunk, lines, want)
		}
	}
	if strings.Count(text, "\n") != 5 {
		t.Fatal("the text changed: fix the offsets")
	}
}

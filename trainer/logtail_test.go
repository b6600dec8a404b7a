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
		fn := func(l line) { lines = append(lines, got{string(l.text), l.end, l.cr}) }
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

// The tail ring copies each line into a slot it reuses, and shows it as
// shown would: a slot that held a longer line shows the shorter one
// only, a long line is cut with "…", bytes that are not UTF-8 are
// replaced.
func TestRingCopiesAndShowsLines(t *testing.T) {
	r := newRing(2)
	buf := []byte("a longer line")
	r.put(buf, false)
	copy(buf, "XXXXXXXX") // the caller's buffer is reused
	r.put([]byte("b"), false)
	r.put([]byte("c"), false)                // over the longer line's slot
	long := strings.Repeat("é", tailLineMax) // 2 bytes each
	r.put([]byte(long), false)
	if got := r.last(5); len(got) != 0 {
		t.Fatalf("before publish: got %q", got)
	}
	r.publish()
	want := []string{"c", shown(long)}
	if got := r.last(5); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.put([]byte("ok \xff"), false)
	r.publish()
	if got := r.last(1); !slices.Equal(got, []string{"ok \uFFFD"}) {
		t.Fatalf("got %q", got)
	}
	r2 := newRing(2)
	r2.put(buf[:6], false)
	copy(buf, "ZZZZZZ")
	r2.publish()
	if got := r2.last(1); !slices.Equal(got, []string{"XXXXXX"}) {
		t.Fatalf("the ring kept the caller's buffer: got %q", got)
	}
	if s := shown(long); !strings.HasSuffix(s, "…") || len(s) != tailLineMax+len("…") {
		t.Fatalf("shown(long) = %d bytes", len(s))
	}
}

// Published at any point, the ring shows what a plain list of the lines
// put (a '\r' line replacing the newest) ends with.
func TestRingPublishesWhatWasPut(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7} {
		r := newRing(size)
		var all []string
		for i := range 500 {
			s := strings.Repeat("x", i%5) + string(rune('a'+i%26))
			replace := i%3 == 1
			r.put([]byte(s), replace)
			if replace && len(all) > 0 {
				all[len(all)-1] = s
			} else {
				all = append(all, s)
			}
			if (i*7)%5 == 0 {
				r.publish()
				want := all[max(len(all)-size, 0):]
				if got := r.last(0); !slices.Equal(got, want) {
					t.Fatalf("size %d, line %d: got %q, want %q", size, i, got, want)
				}
			}
		}
	}
}

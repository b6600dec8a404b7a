package shim

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

func TestTailRing(t *testing.T) {
	long := strings.Repeat("é", 1500) // 3000 bytes
	tests := []struct {
		name  string
		feeds []string
		want  []string
	}{
		{"lines", []string{"a\nb\n", "c"}, []string{"a", "b", "c"}},
		{"split across reads", []string{"hel", "lo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"progress bar", []string{"epoch 1\n10%\r20%\r", "30%\r\n", "done\n"}, []string{"epoch 1", "30%", "done"}},
		{"empty lines", []string{"\n\na\n\n"}, []string{"a"}},
		{"cut and valid", []string{long + "\n"}, []string{strings.Repeat("é", 1024)}},
		{"invalid utf-8", []string{"a\xffb\n"}, []string{"a\uFFFDb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r tailRing
			for _, f := range tt.feeds {
				r.feed([]byte(f))
			}
			r.flush()
			if got := r.last(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	var r tailRing
	for i := range 100 {
		r.feed([]byte(strings.Repeat("x", i) + "\n"))
	}
	if got := r.last(); len(got) != tailLines || len(got[0]) != 60 || len(got[39]) != 99 {
		t.Errorf("kept %d lines from %d to %d bytes, want the last 40", len(got), len(got[0]), len(got[len(got)-1]))
	}
}

func TestReadIndexIgnoresAPartialRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), shimctl.IndexFile)
	var b []byte
	for i := int64(1); i <= 3; i++ {
		b = binary.LittleEndian.AppendUint64(b, uint64(i*100))
		b = binary.LittleEndian.AppendUint64(b, uint64(time.Unix(1700000000+i, 0).UnixNano()))
	}
	b = append(b, 1, 2, 3) // a record being written
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := shimctl.ReadIndex(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []shimctl.IndexEntry{{Offset: 200, Time: time.Unix(1700000002, 0)}, {Offset: 300, Time: time.Unix(1700000003, 0)}}
	if len(got) != 2 || got[0].Offset != want[0].Offset || !got[1].Time.Equal(want[1].Time) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := shimctl.ReadIndex(path, 3); err != nil || len(got) != 0 {
		t.Errorf("past the end: %v, %v", got, err)
	}
}

// TestQueueMarksTheGap: output dropped while the queue is full is marked
// once, where it was lost, and lines stay whole.
func TestQueueMarksTheGap(t *testing.T) {
	q := newQueue(100)
	now := time.Now()
	q.put([]byte(strings.Repeat("w", 94)+"\n"), now)
	q.put([]byte("lost 1\n"), now)
	q.put([]byte("lost 2\n"), now)
	if st := q.stats(); st.dropped != 14 || st.reason != reasonStalled || st.read != 109 {
		t.Fatalf("stats %+v", st)
	}
	var w writer
	w.q, w.errf = q, func(string, error) {}
	if !w.take() {
		t.Fatal("nothing to take")
	}
	w.wrote(len(w.cur), nil) // the marker follows what was written
	q.put([]byte("after\n"), now)
	q.close("end")
	var out bytes.Buffer
	for w.take() {
		out.Write(w.cur)
		w.wrote(len(w.cur), nil)
	}
	want := "[trainbot] 14 bytes of output were dropped: " + reasonStalled + "\nafter\n[trainbot] end\n"
	if out.String() != want || q.stats().buffered != 0 {
		t.Errorf("got %q (buffered %d), want %q", out.String(), q.stats().buffered, want)
	}
}

// A note after a last line without a newline starts a line of its own.
func TestNoteAfterAnUnendedLine(t *testing.T) {
	q := newQueue(1 << 20)
	q.put([]byte("epoch 3 loss 0.1"), time.Now())
	q.close("the command exited with status 0")
	var w writer
	w.q, w.errf = q, func(string, error) {}
	var out bytes.Buffer
	for w.take() {
		out.Write(w.cur)
		w.wrote(len(w.cur), nil)
	}
	if want := "epoch 3 loss 0.1\n[trainbot] the command exited with status 0\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

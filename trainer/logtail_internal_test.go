package trainer

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Lines the shim's index does not cover yet get the time they were read:
// one clock reading for up to nowLines of them, never going back, and a
// fresh one after each refresh (each read of the log).
func TestUncoveredLinesShareAClockReading(t *testing.T) {
	lt := &lineTimes{path: filepath.Join(t.TempDir(), "output.idx")} // no index yet
	before := time.Now()
	distinct := map[time.Time]bool{}
	var last time.Time
	const lines = 10*nowLines + nowLines/2 // the last reading not used up
	for i := range lines {
		at := lt.at(int64(i+1) * 20)
		if at.Before(last) {
			t.Fatalf("line %d at %v, before the line above (%v)", i, at, last)
		}
		last = at
		distinct[at] = true
		time.Sleep(time.Microsecond) // the clock moves between lines
	}
	if after := time.Now(); last.Before(before) || last.After(after) {
		t.Fatalf("last line at %v, not read between %v and %v", last, before, after)
	}
	if most := (lines + nowLines - 1) / nowLines; len(distinct) > most {
		t.Errorf("%d lines got %d times: one clock reading per %d lines gives at most %d", lines, len(distinct), nowLines, most)
	}
	if len(distinct) < 2 {
		t.Errorf("%d lines over ~%d µs got one time: the clock is read again after %d lines", lines, lines, nowLines)
	}
	lt.refresh()
	time.Sleep(time.Millisecond)
	if at := lt.at(lines*20 + 20); !at.After(last) {
		t.Errorf("the first line after a refresh at %v, not after the last before it (%v): a read of the log reads the clock again", at, last)
	}
}

// The index is opened once it exists and followed as the shim appends to
// it, through the one descriptor: lines get the times of the records that
// cover them, records written after the first read included.
func TestLineTimesFollowTheIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), shimctl.IndexFile)
	lt := &lineTimes{path: path}
	defer lt.close()
	if at := lt.at(10); at.IsZero() || lt.f != nil {
		t.Fatalf("with no index: at %v, index open %v; want the clock's time and nothing open", at, lt.f != nil)
	}
	base := time.Now().Add(time.Hour) // after the clock reading above: times never go back
	appendRecords := func(offsets ...int64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, off := range offsets {
			b = binary.LittleEndian.AppendUint64(b, uint64(off))
			b = binary.LittleEndian.AppendUint64(b, uint64(base.Add(time.Duration(off)*time.Second).UnixNano()))
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	appendRecords(100, 200)
	lt.refresh()
	if at := lt.at(150); !at.Equal(base.Add(200 * time.Second)) {
		t.Errorf("line ending at 150: %v, want the record of offset 200 (%v)", at, base.Add(200*time.Second))
	}
	f := lt.f
	if f == nil {
		t.Fatal("the index is not kept open")
	}
	appendRecords(300, 400)
	lt.refresh()
	if at := lt.at(350); !at.Equal(base.Add(400 * time.Second)) {
		t.Errorf("line ending at 350, after the index grew: %v, want %v", at, base.Add(400*time.Second))
	}
	if lt.f != f {
		t.Error("the index was opened again for a read of the log")
	}
}

package trainer

import (
	"path/filepath"
	"testing"
	"time"
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

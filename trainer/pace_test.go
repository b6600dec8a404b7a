package trainer

import (
	"runtime"
	"testing"
	"time"
)

// TestPace: a backlog of a running run that the bot is less than pacedLag
// behind waits nine times what its read took (a tenth of the time); far
// behind, before any line, or once the log says the run ended, none.
func TestPace(t *testing.T) {
	now := time.Now()
	a := &active{}
	if got := a.pace(10*time.Millisecond, now.Add(-time.Second), now); got != 90*time.Millisecond {
		t.Errorf("1 s behind: wait %v, want 90ms", got)
	}
	if got := a.pace(10*time.Millisecond, now.Add(-pacedLag-time.Second), now); got != 0 {
		t.Errorf("%v behind: wait %v, want none", pacedLag+time.Second, got)
	}
	if got := a.pace(10*time.Millisecond, time.Time{}, now); got != 0 {
		t.Errorf("no line read yet: wait %v, want none", got)
	}
	a.ending = true
	if got := a.pace(10*time.Millisecond, now.Add(-time.Second), now); got != 0 {
		t.Errorf("the run ended: wait %v, want none", got)
	}
}

// TestThreadCPU counts this thread's work, not the time it slept.
func TestThreadCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	time.Sleep(50 * time.Millisecond)
	slept := threadCPU() - start
	x, spin := 0, time.Now()
	for time.Since(spin) < 30*time.Millisecond {
		x++
	}
	worked := threadCPU() - start - slept
	if start == 0 || slept > 20*time.Millisecond || worked < 5*time.Millisecond {
		t.Errorf("thread CPU: %v at the start, %v while sleeping 50ms, %v while spinning 30ms (%d)", start, slept, worked, x)
	}
}

package nice

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLowerThread: the thread that asked runs at nice 10, and the test's
// own thread keeps its nice value. (That the lowered thread ends with its
// goroutine is Go's rule for a locked thread — or, if it was the process's
// main thread, that it is parked for good — and is not retested here: when
// the thread goes is up to the runtime.)
func TestLowerThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	if before >= Background {
		t.Skipf("the test runs at nice %d already", before)
	}
	type result struct {
		tid, nice int
		ok        bool
	}
	done := make(chan result)
	go func() {
		ok := LowerThread()
		n, _ := threadNice()
		done <- result{unix.Gettid(), n, ok}
	}()
	r := <-done
	if !r.ok || r.nice != Background {
		t.Fatalf("LowerThread: ok %v, nice %d; want nice %d", r.ok, r.nice, Background)
	}
	if now, _ := threadNice(); now != before {
		t.Errorf("the test's own thread went from nice %d to %d", before, now)
	}
}

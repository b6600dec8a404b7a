package nice

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLowerThread: the thread that asked runs at nice 10 (as /proc says),
// the other threads of the process keep theirs, and the thread ends with
// its goroutine, so no lowered thread serves other goroutines later.
func TestLowerThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := Thread()
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
		n, _ := Thread()
		done <- result{unix.Gettid(), n, ok}
	}()
	r := <-done
	if !r.ok || r.nice != Background {
		t.Fatalf("LowerThread: ok %v, nice %d; want nice %d", r.ok, r.nice, Background)
	}
	if now, _ := Thread(); now != before {
		t.Errorf("the test's own thread went from nice %d to %d", before, now)
	}
	// The locked thread exits with its goroutine: its /proc entry goes.
	task := filepath.Join("/proc/self/task", strconv.Itoa(r.tid))
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			return
		}
		runtime.Gosched()
		b, _ := os.ReadFile(filepath.Join(task, "stat"))
		if len(b) == 0 || strings.Contains(string(b), ") Z ") || strings.Contains(string(b), ") X ") {
			return
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 5e6}, nil)
	}
	t.Errorf("thread %d still runs after its goroutine returned", r.tid)
}

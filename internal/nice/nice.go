// Package nice lowers the CPU priority of the threads that do trainbot's
// bookkeeping of a run (reading, parsing and storing its output), so that
// on a machine whose cores are all busy the training keeps its CPU time.
package nice

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Background is the nice value of bookkeeping threads. The runs' own
// processes keep the priority they were started with. A burst of output
// costs the bot CPU time (parsing, SQLite); at nice 10 it gets about a
// tenth of a core that the training also wants, and catches up once the
// burst is over: the log is read at the bot's own pace, so nothing is lost.
const Background = 10

// LowerThread locks the calling goroutine to its OS thread and lowers that
// thread's priority to Background (never raising it: a trainbot started
// with a higher nice value keeps it). The goroutine must not unlock the
// thread: when it returns, Go ends the thread (or parks it for good, if it
// was the process's main thread), so the lower priority never reaches
// other goroutines. It reports whether the thread runs at
// Background or lower priority.
func LowerThread() bool {
	runtime.LockOSThread()
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid) // the kernel's 20 - nice
	if err != nil {
		return false
	}
	if 20-prio >= Background {
		return true
	}
	return unix.Setpriority(unix.PRIO_PROCESS, tid, Background) == nil
}

// threadNice returns the nice value of the calling goroutine's thread (the
// caller should hold it with runtime.LockOSThread to ask about its own).
func threadNice() (int, error) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	return 20 - prio, err
}

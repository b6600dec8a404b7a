package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
)

// fileLock is an flock(2) lock held for the life of a run, so that two
// trainbot processes sharing a data directory never run the same job lock.
type fileLock struct{ f *os.File }

func lockFileName(lock string) string {
	var b strings.Builder
	for _, r := range lock {
		if r == '/' || r == 0 || r == '\\' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String() + ".lock"
}

func acquireLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "unknown"
			}
			return nil, &BusyError{Other: filepath.Base(path) + " is held by " + who}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "trainbot pid %d since %s\n", os.Getpid(), time.Now().Format(time.RFC3339))
	return &fileLock{f: f}, nil
}

// describe replaces what the lock file says about its holder.
func (l *fileLock) describe(holder string) {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	l.f.WriteAt([]byte(holder+"\n"), 0)
}

// ObserverLock is the file in a run directory whose flock the trainbot
// that observes the run holds: one trainbot reads, stores and reports a
// run at a time; another one attaches when that one is gone.
const ObserverLock = "observer.lock"

func acquireObserver(runDir string) (*fileLock, error) {
	l, err := acquireLock(filepath.Join(runDir, ObserverLock))
	if err != nil {
		return nil, err
	}
	l.describe(fmt.Sprintf("trainbot pid %d since %s", os.Getpid(), time.Now().Format(time.RFC3339)))
	return l, nil
}

// Observer says which trainbot observes the run whose directory is runDir:
// ok is false when none does; holder is what its lock file says.
func Observer(runDir string) (holder string, ok bool) {
	path := filepath.Join(runDir, ObserverLock)
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return "", false
	}
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b)), true
}

func (l *fileLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// processStartedBefore reports whether pid is alive and started before t
// (so it is not a newer process that reused the pid).
func processStartedBefore(pid int, t time.Time) bool {
	if pid <= 0 {
		return false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || st.State == 'Z' {
		return false
	}
	boot, err := procfs.BootTime()
	if err != nil {
		return true // cannot tell; assume alive
	}
	return !procfs.StartTime(boot, st.Start).After(t.Add(2 * time.Second)) // btime has 1 s resolution
}

package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// countGroup counts the live processes of a process group (from /proc).
func countGroup(pgid int) int {
	if pgid <= 0 {
		return 0
	}
	procs, err := procfs.ReadProcs()
	if err != nil {
		return 0
	}
	return procs.GroupSize(pgid)
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

// cgroupOOMKills returns how many processes the kernel's OOM killer has
// killed in trainbot's memory cgroup (runs inherit it), or -1 when it
// cannot be read. cgroup v2 ("0::/path", memory.events; also mounted at
// /sys/fs/cgroup/unified on hybrid hosts) and v1 (the memory controller's
// memory.oom_control) are both read.
func cgroupOOMKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var files []string
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = []string{filepath.Join("/sys/fs/cgroup", parts[2], "memory.events"),
				filepath.Join("/sys/fs/cgroup/unified", parts[2], "memory.events")}
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			files = []string{filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control")}
		}
		for _, f := range files {
			if n, ok := readOOMKill(f); ok {
				return n
			}
		}
	}
	return -1
}

// readOOMKill reads the "oom_kill N" line of memory.events or memory.oom_control.
func readOOMKill(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

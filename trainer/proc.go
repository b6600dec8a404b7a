package trainer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
			return nil, &BusyError{Other: "another trainbot process holds " + filepath.Base(path) + " (" + who + ")"}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "trainbot pid %d since %s\n", os.Getpid(), time.Now().Format(time.RFC3339))
	return &fileLock{f: f}, nil
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err == nil && st.pgid == pgid && st.state != 'Z' {
			n++
		}
	}
	return n
}

type procStat struct {
	state     byte
	ppid      int
	pgid      int
	startTick uint64
	rssPages  int64
}

// readStat parses /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (procStat, error) {
	// The command name is in parentheses and may contain anything: split at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); starttime is field 22, rss field 24.
	if len(f) < 22 {
		return procStat{}, errors.New("short stat")
	}
	var st procStat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	st.startTick, _ = strconv.ParseUint(f[19], 10, 64)
	st.rssPages, _ = strconv.ParseInt(f[21], 10, 64)
	return st, nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}

// processStartedBefore reports whether pid is alive and started before t
// (so it is not a newer process that reused the pid).
func processStartedBefore(pid int, t time.Time) bool {
	if pid <= 0 {
		return false
	}
	st, err := readStat(pid)
	if err != nil || st.state == 'Z' {
		return false
	}
	boot, err := bootTime()
	if err != nil {
		return true // cannot tell; assume alive
	}
	started := boot.Add(time.Duration(st.startTick) * time.Second / clockTicks)
	return !started.After(t.Add(2 * time.Second)) // btime has 1 s resolution
}

// cgroupOOMKills returns the oom_kill count of trainbot's own cgroup
// (runs inherit it), or -1 when it cannot be read.
func cgroupOOMKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	// cgroup v2: "0::/path"
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			ev, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", p, "memory.events"))
			if err != nil {
				return -1
			}
			for _, l := range strings.Split(string(ev), "\n") {
				if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
					n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					if err != nil {
						return -1
					}
					return n
				}
			}
		}
	}
	return -1
}

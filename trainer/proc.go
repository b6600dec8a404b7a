package trainer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/trainer/shimctl"
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
			who := parseHolder(holder).What
			if who == "" {
				who = "unknown"
			}
			return nil, &BusyError{Other: filepath.Base(path) + " is held by " + who}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &fileLock{f: f}
	l.describe(lockHolder{What: fmt.Sprintf("trainbot pid %d since %s", os.Getpid(), time.Now().Format(time.RFC3339))})
	return l, nil
}

// acquireJobLock takes a job's lock: its flock, and then only when no
// process of the run that held it last is alive. The flock goes with the
// process that holds it (a run's shim); when the shim was killed, the run
// it supervised may live on, unsupervised, and a second run of the lock
// must not start beside it.
func acquireJobLock(path string) (*fileLock, error) {
	prev, _ := os.ReadFile(path) // what the last holder wrote; read before acquireLock rewrites it
	l, err := acquireLock(path)
	if err != nil {
		return nil, err
	}
	h := parseHolder(prev)
	if h.RunDir == "" {
		return l, nil
	}
	pgid := h.PGID
	if st, err := shimctl.ReadState(h.RunDir); err == nil {
		if st.Ended {
			return l, nil
		}
		pgid = cmp.Or(pgid, st.PID)
	} else if errors.Is(err, fs.ErrNotExist) && pgid == 0 {
		return l, nil // its shim never started its command
	}
	pids, known := runProcesses(h.RunDir, pgid)
	switch {
	case !known:
		l.giveBack(prev)
		return nil, &BusyError{Other: fmt.Sprintf("%s: cannot tell whether processes of run #%d are still alive (the process table cannot be read); try again", filepath.Base(path), h.Run)}
	case len(pids) > 0:
		l.giveBack(prev)
		return nil, &BusyError{Other: fmt.Sprintf("%s: %d process(es) of run #%d (process group %d) are still alive, unsupervised: its supervisor died; 停止 %d (/stop %d) ends them",
			filepath.Base(path), len(pids), h.Run, pgid, h.Run, h.Run), Orphan: &Unsupervised{RunID: h.Run, PGID: pgid, Processes: len(pids)}}
	}
	return l, nil
}

// lockHolder is what a lock file says of its holder (one JSON line): for
// a job's lock, the run that holds it, so that a later taker can look for
// what is left of that run.
type lockHolder struct {
	What   string `json:"what"`              // for people: "run #5 (train), started … by trainbot pid 42"
	Run    int64  `json:"run,omitempty"`     // the run
	RunDir string `json:"run_dir,omitempty"` // its directory
	PGID   int    `json:"pgid,omitempty"`    // its process group, when known
}

// parseHolder reads a lock file's holder; a file of an earlier trainbot
// (plain text) is its What.
func parseHolder(b []byte) lockHolder {
	var h lockHolder
	if err := json.Unmarshal(b, &h); err != nil {
		return lockHolder{What: strings.TrimSpace(string(b))}
	}
	return h
}

// describe replaces what the lock file says about its holder.
func (l *fileLock) describe(h lockHolder) {
	if l == nil || l.f == nil {
		return
	}
	b, _ := json.Marshal(h)
	l.rewrite(append(b, '\n'))
}

// rewrite replaces the lock file's content with b.
func (l *fileLock) rewrite(b []byte) {
	l.f.Truncate(0)
	l.f.WriteAt(b, 0)
}

// giveBack releases a lock taken only to be refused, with the holder it
// named before put back (it still says what holds the job).
func (l *fileLock) giveBack(prev []byte) {
	l.rewrite(prev)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// runIDOf is the run id of a run directory (DATA/runs/ID); 0 when it is
// not one.
func runIDOf(runDir string) int64 {
	id, _ := strconv.ParseInt(filepath.Base(runDir), 10, 64)
	return id
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
	return parseHolder(b).What, true
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

// liveness is what is known of whether a process lives: only positive
// evidence makes it gone (kill(2) says there is no such process, /proc has
// no entry, a zombie, or a newer process reused the pid). A failure to
// look — descriptors exhausted, a permission, a timeout — is unknown, and
// unknown is never taken for dead.
type liveness int

const (
	livenessUnknown liveness = iota
	processAlive
	processGone
)

// processLiveness tells whether pid is alive and started before t (so it
// is not a newer process that reused the pid).
func processLiveness(pid int, t time.Time) liveness {
	if pid <= 0 {
		return processGone
	}
	switch err := syscall.Kill(pid, 0); {
	case errors.Is(err, syscall.ESRCH):
		return processGone
	case err != nil && !errors.Is(err, syscall.EPERM):
		return livenessUnknown
	}
	st, err := procfs.ReadStat(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return processGone
	case err != nil:
		return livenessUnknown
	case st.State == 'Z':
		return processGone
	}
	boot, err := procfs.BootTime()
	if err != nil {
		return processAlive // it lives; whether it is the same process cannot be told
	}
	if procfs.StartTime(boot, st.Start).After(t.Add(2 * time.Second)) { // btime has 1 s resolution
		return processGone
	}
	return processAlive
}

// processStartedBefore reports whether pid may be alive and started before
// t: true unless it is known to be gone.
func processStartedBefore(pid int, t time.Time) bool {
	return processLiveness(pid, t) != processGone
}

// groupLiveness tells whether any process of the process group pgid lives.
func groupLiveness(pgid int) liveness {
	if pgid <= 0 {
		return processGone
	}
	switch err := syscall.Kill(-pgid, 0); {
	case err == nil, errors.Is(err, syscall.EPERM):
		return processAlive
	case errors.Is(err, syscall.ESRCH):
		return processGone
	}
	return livenessUnknown
}

// runProcesses finds the processes of the run whose directory is runDir,
// once its supervisor is gone: the members of its process group pgid and
// every process that carries the run's TRAINBOT_RUN_DIR in its environment
// (those that left the group with setsid). known is false when the process
// table could not be read: then nothing may be concluded.
func runProcesses(runDir string, pgid int) (pids []int, known bool) {
	byEnv, err := procfs.WithEnv(EnvRunDir, runDir)
	if err != nil {
		return nil, false
	}
	if groupLiveness(pgid) == processAlive && !slices.Contains(byEnv, pgid) {
		// The group lives (its leader may be gone); a member that cleared
		// its environment is still the run's.
		byEnv = append(byEnv, pgid)
	}
	return byEnv, true
}

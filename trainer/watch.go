package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunnerWatch is the runner of runs that trainbot watches but did not
// start (trainbot watch, 关注): a log file it follows and, optionally, the
// process that writes it.
const RunnerWatch = "watch"

// OutcomeEnded is how a watched run ends when its process exited without
// the log saying why, or when it is no longer watched: the exit status of
// a process that is not trainbot's child is not known.
const OutcomeEnded Outcome = "ended"

// WatchRequest asks to watch a run trainbot did not start.
type WatchRequest struct {
	LogPath string // the file the run writes its output to
	PID     int    // the process that writes it (0: none known; the watch ends on 停止 only)
	Name    string // the run's name in the history ("" : the log's base name)
	By      string // who asked
	Origin  string // the chat that asked
}

// ErrNotWatched is returned by StopWatched for a run trainbot started.
var ErrNotWatched = errors.New("not a watched run")

// Watch starts watching a log (and a process): a run with runner "watch",
// parsed, charted and alerted on like any other, that ends when the
// process exits or when StopWatched is asked.
func (s *Supervisor) Watch(ctx context.Context, req WatchRequest) (*Run, error) {
	run, err := NewWatchedRun(req)
	if err != nil {
		return nil, err
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, ErrClosed
	}
	ctx = context.WithoutCancel(ctx)
	id, err := s.recordRun(ctx, run)
	if err != nil {
		return nil, err
	}
	runDir := RunDir(s.opts.DataDir, id)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, err
	}
	if err := writeRunFile(runDir, run); err != nil {
		s.log.Warn("write the run's record in its directory", "run", id, "err", err)
	}
	obs, err := acquireObserver(runDir)
	if err != nil {
		return nil, err
	}
	a := newActive(s, watchJob(run), run, runDir)
	a.runner = newWatchRunner(a)
	a.obs = obs
	s.log.Info("watching a run", "run", id, "log", run.LogPath, "pid", run.PID)
	return s.register(a), nil
}

// NewWatchedRun checks a watch request and returns the run to record
// (without an id): trainbot watch records it for the trainbot that serves
// the data directory, which attaches to it.
func NewWatchedRun(req WatchRequest) (*Run, error) {
	path, err := filepath.Abs(req.LogPath)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("watch: %s is not a regular file", path)
	}
	if req.PID < 0 {
		return nil, fmt.Errorf("watch: pid %d: want a process id", req.PID)
	}
	if req.PID > 0 && syscall.Kill(req.PID, 0) != nil && !errors.Is(syscall.Kill(req.PID, 0), syscall.EPERM) {
		return nil, fmt.Errorf("watch: there is no process %d", req.PID)
	}
	name := req.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		name = strings.Trim(badNameChars.ReplaceAllString(name, "-"), "-.")
		if name == "" || ReadsAsValue(name) {
			name = "watch"
		}
	}
	if !validName.MatchString(name) || ReadsAsValue(name) {
		return nil, fmt.Errorf("watch: name %q: want letters, digits, '-', '_' or '.', not a number", name)
	}
	cmd := []string{"(watched)", path}
	if req.PID > 0 {
		cmd = append(cmd, "pid "+strconv.Itoa(req.PID))
	}
	return &Run{Job: name, Runner: RunnerWatch, LogPath: path, PID: req.PID, Command: cmd, State: StateRunning,
		Outcome: OutcomeRunning, StartedAt: time.Now(), StartedBy: req.By, Origin: req.Origin}, nil
}

var badNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// RunDir is a run's directory in the data directory.
func RunDir(dataDir string, id int64) string {
	return filepath.Join(dataDir, "runs", strconv.FormatInt(id, 10))
}

// watchJob is the job of a watched run: its name, a lock of its own.
func watchJob(r *Run) *Job {
	j := &Job{Name: r.Job, Command: []string{"(watched)"}, Lock: fmt.Sprintf("watch#%d", r.ID)}
	if err := j.Normalize(); err != nil {
		j = &Job{Name: r.Job, Lock: j.Lock, StopGrace: DefaultStopGrace, KillGrace: DefaultKillGrace, TailLines: DefaultTailLines, NaNAfter: DefaultNaNAfter}
	}
	return j
}

// StopWatched ends the watch of run runID: with killProcess, its process
// is stopped as a local run would be (SIGINT, SIGTERM after stop_grace,
// SIGKILL after kill_grace) and the run ends when it has exited; without,
// the process goes on and the run ends at once, "no longer watched".
func (s *Supervisor) StopWatched(runID int64, by string, killProcess bool) (*Run, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	if _, ok := a.runner.(*watchRunner); !ok {
		return nil, fmt.Errorf("run %d: %w", runID, ErrNotWatched)
	}
	return s.stop(runID, stopRequest{by: by, reason: OutcomeStopped, killWatched: killProcess})
}

// watchRunner follows a process trainbot did not start.
type watchRunner struct {
	pid     int
	since   time.Time // the watch began: a process with this pid that started later is another one
	logPath string
	stopG   time.Duration
	killG   time.Duration
	tail    func(n int) []string

	unwatchBy string    // 停止 without killing: the watch ends
	killBy    string    // 停止 … kill: the process is being stopped
	killAt    time.Time // when SIGINT was sent
	signals   int       // signals sent so far: 1 INT, 2 TERM, 3 KILL
}

func newWatchRunner(a *active) *watchRunner {
	return &watchRunner{pid: a.run.PID, since: a.run.StartedAt, logPath: a.run.LogPath, stopG: a.job.StopGrace, killG: a.job.KillGrace,
		tail: a.tail.last}
}

func (r *watchRunner) alive() bool {
	return r.pid > 0 && processStartedBefore(r.pid, r.since)
}

func (r *watchRunner) poll(now time.Time) (*runEnd, runLive, bool) {
	var live runLive
	if fi, err := os.Stat(r.logPath); err == nil {
		live.lastOutput = fi.ModTime()
	}
	switch {
	case r.unwatchBy != "":
		f := &EndFacts{Why: WhyUnwatched, StoppedBy: r.unwatchBy, PID: r.pid, GoesOn: r.alive()}
		return &runEnd{outcome: OutcomeEnded, facts: f, endedAt: now, e: ending{exitCode: -1, oomKills: -1}}, live, false
	case r.pid > 0 && !r.alive():
		return r.ended(now), live, false
	case r.killBy != "":
		// Escalate as a local run's supervisor does.
		switch {
		case r.signals == 1 && now.Sub(r.killAt) >= r.stopG:
			r.signal(syscall.SIGTERM)
		case r.signals == 2 && now.Sub(r.killAt) >= r.stopG+r.killG:
			r.signal(syscall.SIGKILL)
		}
	}
	return nil, live, false
}

func (r *watchRunner) signal(sig syscall.Signal) {
	if err := syscall.Kill(r.pid, sig); err == nil || errors.Is(err, syscall.ESRCH) {
		r.signals++
	}
}

// ended says how the watched process ended, from the log's last lines:
// its exit status is not known (it is not trainbot's child).
func (r *watchRunner) ended(now time.Time) *runEnd {
	end := &runEnd{endedAt: now, e: ending{exitCode: -1, oomKills: -1}}
	lines := r.tail(30)
	for i := len(lines) - 1; i >= 0; i-- {
		if o, ok := DetectOOM(lines[i]); ok {
			end.outcome, end.oom = OutcomeOOM, o
			end.facts = &EndFacts{Why: WhyWatchExit, PID: r.pid, OOM: o}
			return end
		}
	}
	if r.killBy != "" {
		end.outcome = OutcomeStopped
		end.e.stopBy, end.e.stopReason = r.killBy, OutcomeStopped
		end.facts = &EndFacts{Why: WhyStopped, StoppedBy: r.killBy, StopHow: StopSignalled, PID: r.pid}
		return end
	}
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-10; i-- {
		if failureLine.MatchString(lines[i]) {
			end.outcome = OutcomeFailed
			end.facts = &EndFacts{Why: WhyWatchExit, PID: r.pid, ErrorLine: strings.TrimSpace(lines[i])}
			return end
		}
	}
	end.outcome = OutcomeEnded
	end.facts = &EndFacts{Why: WhyWatchExit, PID: r.pid}
	return end
}

// failureLine is a last line that says the script failed.
var failureLine = regexp.MustCompile(`^(Traceback \(most recent call last\)|\w*(Error|Exception)\b.*|Killed$|Segmentation fault|.*core dumped.*)`)

func (r *watchRunner) stop(req stopRequest) error {
	switch {
	case req.killWatched && r.pid > 0 && r.alive():
		if r.killBy == "" {
			r.killBy, r.killAt = req.by, time.Now()
			r.signal(syscall.SIGINT)
		}
	default:
		if r.unwatchBy == "" {
			r.unwatchBy = req.by
		}
	}
	return nil
}

func (r *watchRunner) gone() (*EndFacts, time.Time) {
	return &EndFacts{Why: WhyInterrupted, Interrupted: InterruptWatchEnded}, time.Time{}
}

func (r *watchRunner) done() {}

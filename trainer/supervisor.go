package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// Recorder stores runs and their metric points. The store package
// implements it; the supervisor never blocks on it for long.
type Recorder interface {
	// CreateRun stores a new run and returns its id.
	CreateRun(ctx context.Context, r *Run) (int64, error)
	// UpdateRun stores the run's current fields.
	UpdateRun(ctx context.Context, r *Run) error
	// AddPoints queues metric points of a run for writing; it does not wait
	// for the disk.
	AddPoints(runID int64, pts []TimedPoint)
	// ThinPoints queues, after the points queued before it, the thinning of
	// a metric's stored points to buckets of width steps: of each bucket
	// only the first, minimum, maximum and last finite points stay (NaN
	// and ±Inf points always stay). It does not wait for the disk.
	ThinPoints(runID int64, name string, width int64)
	// Flush writes every queued point.
	Flush(ctx context.Context) error
	// RunningRuns returns the runs recorded as running.
	RunningRuns(ctx context.Context) ([]*Run, error)
}

// Errors returned by the supervisor.
var (
	ErrUnknownJob = errors.New("unknown job")
	ErrNoJob      = errors.New("no job named")
	ErrNotRunning = errors.New("no run is active")
	ErrAmbiguous  = errors.New("several runs are active")
	ErrClosed     = errors.New("supervisor is shutting down")
	ErrBusy       = errors.New("a run is already active")
)

// BusyError is returned by Start when the job's lock is held.
type BusyError struct {
	Active *Status // the active run of this trainbot, nil when Other is set
	Other  string  // the lock is held by another trainbot process
}

func (e *BusyError) Error() string {
	if e.Active == nil {
		return "a run is already active: " + e.Other
	}
	return fmt.Sprintf("run #%d (%s) is already running: %s", e.Active.Run.ID, e.Active.Run.Job, e.Active.Brief())
}

// Unwrap makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Unwrap() error { return ErrBusy }

// StartError is returned when a run was recorded but its command could not
// be started; Run holds the failed run.
type StartError struct {
	Run *Run
	Err error
}

func (e *StartError) Error() string { return fmt.Sprintf("start run %d: %v", e.Run.ID, e.Err) }
func (e *StartError) Unwrap() error { return e.Err }

// EventKind says what happened.
type EventKind string

// Event kinds.
const (
	EventStarted EventKind = "started"
	EventAlert   EventKind = "alert"
	EventEnded   EventKind = "ended"
)

// Event is published to listeners when a run starts, raises an alert while
// it runs, or ends.
type Event struct {
	Kind   EventKind
	Run    *Run    // a copy
	Alert  *Alert  // EventAlert only
	Status *Status // EventEnded: the final status (metrics, rate); EventStarted: the first
	At     time.Time
	Job    *Job   // the run's job (shared: read only); set by the supervisor
	Retry  *Retry // EventEnded of a job with on_oom: what it did; nil otherwise
	OOM    *OOM   // EventEnded out of memory: what the output said; nil when it said nothing
}

// Alert is raised while a run is still going.
type Alert struct {
	Kind Outcome // OutcomeOOM, OutcomeNaN or OutcomeStalled
	Text string
	OOM  *OOM // for OutcomeOOM
}

// Listener receives events. It is called synchronously from supervision
// goroutines and must return quickly (queue the work).
type Listener func(Event)

// StartRequest asks for a run.
type StartRequest struct {
	Job    string            // "" for the only job
	Params map[string]string // name=value as typed by the user
	By     string            // who asked, for the record
	Origin string            // the chat that asked ("telegram:123"), for notices

	// RetryOf is the run that ran out of memory and is retried (on_oom).
	RetryOf int64
	attempt int // the how-manieth on_oom retry this is
}

// Options configure a Supervisor.
type Options struct {
	Jobs     []*Job
	Recorder Recorder
	// DataDir holds run directories (runs/<id>/output.log) and lock files.
	DataDir string
	Logger  *slog.Logger
	// DrainTimeout is how long to wait, after the main process exits, for
	// the rest of its process group to close the output; then the group is
	// killed. Default 2 s.
	DrainTimeout time.Duration
}

// Supervisor starts, watches and stops runs. At most one run holds each
// job lock at a time, within this process (a map) and across trainbot
// processes sharing the data directory (a lock file).
type Supervisor struct {
	opts Options
	jobs map[string]*Job
	log  *slog.Logger

	startMu   sync.Mutex // serialises Start
	mu        sync.Mutex
	active    map[string]*active // by lock name
	closing   bool
	listeners []Listener
	wg        sync.WaitGroup
	retries   int           // on_oom retries decided but not started yet
	noRetries chan struct{} // closed when retries drops to 0
}

// New checks the jobs, marks runs left "running" by a trainbot process that
// is gone as interrupted, and returns a supervisor.
func New(ctx context.Context, opts Options) (*Supervisor, error) {
	if opts.Recorder == nil {
		return nil, errors.New("supervisor: no recorder")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 2 * time.Second
	}
	s := &Supervisor{opts: opts, jobs: map[string]*Job{}, active: map[string]*active{}, log: opts.Logger}
	for _, j := range opts.Jobs {
		if err := j.Normalize(); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
		if _, dup := s.jobs[j.Name]; dup {
			return nil, fmt.Errorf("job %s: defined twice", j.Name)
		}
		s.jobs[j.Name] = j
	}
	for _, dir := range []string{filepath.Join(opts.DataDir, "runs"), filepath.Join(opts.DataDir, "locks")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if err := s.recoverInterrupted(ctx); err != nil {
		return nil, fmt.Errorf("find interrupted runs: %w", err)
	}
	return s, nil
}

// Subscribe adds a listener for run events.
func (s *Supervisor) Subscribe(l Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, l)
}

func (s *Supervisor) publish(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Job == nil && e.Run != nil {
		e.Job = s.jobs[e.Run.Job]
	}
	s.mu.Lock()
	ls := slices.Clone(s.listeners)
	s.mu.Unlock()
	for _, l := range ls {
		l(e)
	}
}

// Jobs returns the configured jobs, sorted by name.
func (s *Supervisor) Jobs() []*Job {
	out := make([]*Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *Job) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Job returns the named job; "" means the only job.
func (s *Supervisor) Job(name string) (*Job, error) {
	if name == "" {
		if len(s.jobs) == 1 {
			for _, j := range s.jobs {
				return j, nil
			}
		}
		names := make([]string, 0, len(s.jobs))
		for _, j := range s.Jobs() {
			names = append(names, j.Name)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: no jobs are configured", ErrUnknownJob)
		}
		return nil, fmt.Errorf("%w: name one of %s", ErrUnknownJob, strings.Join(names, ", "))
	}
	j, ok := s.jobs[name]
	if !ok {
		names := make([]string, 0, len(s.jobs))
		for _, j := range s.Jobs() {
			names = append(names, j.Name)
		}
		return nil, fmt.Errorf("%w %q: the jobs are %s", ErrUnknownJob, name, strings.Join(names, ", "))
	}
	return j, nil
}

// Start starts a run of a job, unless its lock is held (a *BusyError) or a
// parameter is refused (errors wrapping ErrBadParam). When the command
// cannot be executed, the run is recorded as failed and a *StartError says
// why.
func (s *Supervisor) Start(ctx context.Context, req StartRequest) (*Run, error) {
	job, err := s.Job(req.Job)
	if err != nil {
		return nil, err
	}
	params, err := job.ResolveParams(req.Params)
	if err != nil {
		return nil, err
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()

	s.mu.Lock()
	closing := s.closing
	busy := s.active[job.Lock]
	s.mu.Unlock()
	if closing {
		return nil, ErrClosed
	}
	if busy != nil {
		st := busy.status()
		return nil, &BusyError{Active: &st}
	}
	lock, err := acquireLock(filepath.Join(s.opts.DataDir, "locks", lockFileName(job.Lock)))
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()

	ctx = context.WithoutCancel(ctx)
	now := time.Now()
	run := &Run{
		Job: job.Name, Params: params, State: StateRunning, Outcome: OutcomeRunning,
		StartedAt: now, StartedBy: req.By, Origin: req.Origin, Supervisor: os.Getpid(), RetryOf: req.RetryOf,
	}
	argv, env := job.Argv(params)
	run.Command = argv
	id, err := s.opts.Recorder.CreateRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("record run: %w", err)
	}
	run.ID = id
	log := s.log.With("run", id, "job", job.Name)
	runDir := filepath.Join(s.opts.DataDir, "runs", strconv.FormatInt(id, 10))
	run.LogPath = filepath.Join(runDir, "output.log")
	fail := func(err error) (*Run, error) {
		run.State, run.Outcome, run.EndedAt = StateEnded, OutcomeFailed, time.Now()
		run.Detail = "could not start: " + err.Error()
		if uerr := s.opts.Recorder.UpdateRun(ctx, run); uerr != nil {
			log.Error("record failed start", "err", uerr)
		}
		log.Warn("run could not start", "err", err)
		s.publish(Event{Kind: EventEnded, Run: run.Clone(), Status: &Status{Run: run.Clone(), Progress: emptyProgress()}})
		return run.Clone(), &StartError{Run: run.Clone(), Err: err}
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fail(err)
	}
	logFile, err := os.OpenFile(run.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err)
	}
	metricsPath := filepath.Join(runDir, "metrics.jsonl")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = job.Dir
	cmd.Env = childEnv(env, id, runDir, metricsPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		outR.Close()
		outW.Close()
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	fmt.Fprintf(logFile, "[trainbot] run %d of %s started %s: %s\n", id, job.Name, now.Format(time.RFC3339), quoteArgv(argv))
	startErr := cmd.Start()
	outW.Close()
	errW.Close()
	if startErr != nil {
		fmt.Fprintf(logFile, "[trainbot] could not start: %v\n", startErr)
		logFile.Close()
		outR.Close()
		errR.Close()
		return fail(startErr)
	}
	run.PID = cmd.Process.Pid
	if err := s.opts.Recorder.UpdateRun(ctx, run); err != nil {
		log.Error("record run pid", "err", err)
	}
	parser, err := logparse.New(job.Patterns)
	if err != nil { // Normalize checked the patterns; keep going without them
		parser = &logparse.Parser{}
	}
	a := &active{
		sup: s, run: run, job: job, cmd: cmd, parser: parser, lock: lock,
		cap:         newCapture(logFile, job.MaxLogBytes, job.TailLines),
		pipes:       []*os.File{outR, errR},
		metricsPath: metricsPath,
		stopCh:      make(chan stopRequest, 1),
		done:        make(chan struct{}),
		last:        map[string]float64{},
		nan:         map[string]*nanRun{},
		names:       map[string]bool{},
		log:         log,
		oomBase:     cgroupOOMKills(),
		attempt:     req.attempt,
	}
	a.cap.read(outR, false)
	a.cap.read(errR, true)
	go a.cap.done()
	s.mu.Lock()
	s.active[job.Lock] = a
	s.mu.Unlock()
	s.wg.Add(1)
	go a.supervise()
	ok = true
	log.Info("run started", "pid", cmd.Process.Pid, "argv", quoteArgv(argv))
	st := a.status() // from here on, run belongs to a (read it under a.mu)
	s.publish(Event{Kind: EventStarted, Run: st.Run.Clone(), Status: &st})
	return st.Run, nil
}

func emptyProgress() logparse.Progress { return logparse.Progress{Epoch: math.NaN()} }

func childEnv(extra []string, id int64, runDir, metricsPath string) []string {
	env := os.Environ()
	env = append(env, extra...)
	env = append(env,
		"TRAINBOT_RUN_ID="+strconv.FormatInt(id, 10),
		"TRAINBOT_RUN_DIR="+runDir,
		"TRAINBOT_METRICS_FILE="+metricsPath,
	)
	if os.Getenv("PYTHONUNBUFFERED") == "" && !hasEnv(extra, "PYTHONUNBUFFERED") {
		// Python buffers a piped stdout; unbuffered, metrics arrive as printed.
		env = append(env, "PYTHONUNBUFFERED=1")
	}
	return env
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			q[i] = strconv.Quote(a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// Stop asks a run to stop: SIGINT to its process group, then SIGTERM after
// the job's StopGrace, then SIGKILL after KillGrace. runID 0 means the only
// active run. It returns at once; WaitRun waits for the end.
func (s *Supervisor) Stop(runID int64, by string) (*Run, error) {
	return s.stop(runID, stopRequest{by: by, reason: OutcomeStopped})
}

func (s *Supervisor) stop(runID int64, req stopRequest) (*Run, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	select {
	case a.stopCh <- req:
	default: // a stop is already on its way
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.Clone(), nil
}

func (s *Supervisor) find(runID int64) (*active, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if runID == 0 {
		switch len(s.active) {
		case 0:
			return nil, ErrNotRunning
		case 1:
			for _, a := range s.active {
				return a, nil
			}
		}
		return nil, ErrAmbiguous
	}
	for _, a := range s.active {
		if a.run.ID == runID {
			return a, nil
		}
	}
	return nil, fmt.Errorf("run %d: %w", runID, ErrNotRunning)
}

// WaitRun waits until the run has ended and returns its final record. It
// returns ErrNotRunning at once when the run is not active.
func (s *Supervisor) WaitRun(ctx context.Context, runID int64) (*Run, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	select {
	case <-a.done:
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.run.Clone(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Active returns the status of every active run, oldest first.
func (s *Supervisor) Active() []Status {
	s.mu.Lock()
	as := make([]*active, 0, len(s.active))
	for _, a := range s.active {
		as = append(as, a)
	}
	s.mu.Unlock()
	out := make([]Status, 0, len(as))
	for _, a := range as {
		out = append(out, a.status())
	}
	slices.SortFunc(out, func(a, b Status) int { return int(a.Run.ID - b.Run.ID) })
	return out
}

// Status returns the status of an active run (0: the only one).
func (s *Supervisor) Status(runID int64) (Status, error) {
	a, err := s.find(runID)
	if err != nil {
		return Status{}, err
	}
	return a.status(), nil
}

// Tail returns up to n of the last output lines of an active run.
func (s *Supervisor) Tail(runID int64, n int) ([]string, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	return a.cap.tail.last(n), nil
}

// ActivePGIDs maps the process group id of every active run to its run id,
// so that GPU processes can be attributed to runs.
func (s *Supervisor) ActivePGIDs() map[int]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int]int64, len(s.active))
	for _, a := range s.active {
		a.mu.Lock()
		if a.run.PID > 0 {
			m[a.run.PID] = a.run.ID
		}
		a.mu.Unlock()
	}
	return m
}

// ObserveMemory raises the peak GPU and host memory recorded for an active
// run; nil leaves a value alone.
func (s *Supervisor) ObserveMemory(runID int64, gpuBytes, hostBytes *int64) {
	a, err := s.find(runID)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if gpuBytes != nil && (a.run.PeakGPUMem == nil || *gpuBytes > *a.run.PeakGPUMem) {
		v := *gpuBytes
		a.run.PeakGPUMem = &v
	}
	if hostBytes != nil && (a.run.PeakHostMem == nil || *hostBytes > *a.run.PeakHostMem) {
		v := *hostBytes
		a.run.PeakHostMem = &v
	}
}

// Wait blocks until no run is active (or ctx ends).
func (s *Supervisor) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		var done chan struct{}
		for _, a := range s.active {
			done = a.done
			break
		}
		if done == nil {
			done = s.pendingRetries()
		}
		s.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close refuses new runs, stops the active ones (as "trainbot shutdown")
// and waits for them to end. If ctx ends first, the remaining process
// groups are killed and Close still waits for their supervision to finish.
func (s *Supervisor) Close(ctx context.Context) error {
	// Under startMu: a Start already past its closing check (an on_oom
	// retry, a chat command) has registered its run, which is then among
	// those stopped below; every later Start sees closing.
	s.startMu.Lock()
	s.mu.Lock()
	s.closing = true
	as := make([]*active, 0, len(s.active))
	for _, a := range s.active {
		as = append(as, a)
	}
	s.mu.Unlock()
	s.startMu.Unlock()
	for _, a := range as {
		select {
		case a.stopCh <- stopRequest{by: "trainbot shutdown", reason: OutcomeStopped}:
		default:
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, a := range as {
		a.kill()
	}
	<-done
	return ctx.Err()
}

// recoverInterrupted marks runs whose supervising trainbot process is gone.
func (s *Supervisor) recoverInterrupted(ctx context.Context) error {
	runs, err := s.opts.Recorder.RunningRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Supervisor != os.Getpid() && processStartedBefore(r.Supervisor, r.StartedAt) {
			continue // another live trainbot supervises it
		}
		r.State, r.Outcome = StateEnded, OutcomeInterrupted
		r.EndedAt = time.Now()
		r.Detail = fmt.Sprintf("trainbot (pid %d) stopped while the run was active; found at the next start", r.Supervisor)
		// What is known of its end: its log was written up to then (each
		// second while it printed). trainbot may come back days later.
		if fi, err := os.Stat(r.LogPath); err == nil && fi.ModTime().After(r.StartedAt) && fi.ModTime().Before(r.EndedAt) {
			r.EndedAt = fi.ModTime()
			r.Detail += "; its log was last written " + r.EndedAt.Format(time.RFC3339)
		}
		if r.PID > 0 && syscall.Kill(-r.PID, 0) == nil && processStartedBefore(r.PID, r.StartedAt.Add(time.Minute)) {
			r.Detail += fmt.Sprintf("; its process group %d is still alive, unsupervised", r.PID)
		}
		if err := s.opts.Recorder.UpdateRun(ctx, r); err != nil {
			return err
		}
		s.log.Warn("run interrupted", "run", r.ID, "detail", r.Detail)
	}
	return nil
}

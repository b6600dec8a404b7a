package trainer

// Why this file is over 600 lines: it is the Supervisor's surface — its
// options and errors, its state, and its public methods (Start is
// start.go's, the queue queue.go's, adoption adopt.go's, a run's life
// active's and its rooms'); the doc comments are a third of it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Recorder stores runs and their metric points. The store package
// implements it; the supervisor never blocks on it for long.
type Recorder interface {
	// CreateRun stores a new run and returns its id: above every id
	// recorded, and not below r.ID when it is set (the supervisor sets it
	// above every run directory on disk, so that an id is never reused,
	// also after the database was lost or replaced by an older one).
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
	// SetOffsets queues how far the run's log and metrics file are read,
	// stored with the points queued before it (Run.LogOffset,
	// Run.MetricsOffset).
	SetOffsets(runID, logOffset, metricsOffset int64)
	// SetEventOffset queues how far an event file of the run's TensorBoard
	// directory (file: its path under it) is read, stored with the points
	// queued before it.
	SetEventOffset(runID int64, file string, off int64)
	// EventOffsets returns the stored offsets of SetEventOffset.
	EventOffsets(ctx context.Context, runID int64) (map[string]int64, error)
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
	// ErrUnrecorded is wrapped by a Recorder's errors that no retry
	// mends until trainbot restarts (its database was deleted, replaced
	// or damaged): the run's directory keeps what would have been
	// recorded (run.json, the log), and the next trainbot restores it.
	ErrUnrecorded = errors.New("the history database takes no writes until trainbot restarts")
)

// BusyError is returned by Start when the job's lock is held.
type BusyError struct {
	Active *Status // the active run of this trainbot, nil when Other is set
	Other  string  // the lock is held by another trainbot process, or by what is left of a run
	// Orphan is set when processes of the lock's last run live on after
	// its supervisor died (Other says so too).
	Orphan *Unsupervised
	// GPUs is set when the job's lock is free but its GPU request cannot
	// be met now: what holds each GPU.
	GPUs *GPUShortage
}

func (e *BusyError) Error() string {
	if e.GPUs != nil {
		return "not enough free GPUs: " + e.GPUs.Error()
	}
	if e.Active == nil {
		return "a run is already active: " + e.Other
	}
	if u := e.Active.Unsupervised; u != nil {
		return fmt.Sprintf("run #%d (%s) is still alive, unsupervised: %s", e.Active.Run.ID, e.Active.Run.Job, u)
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

// StartRequest asks for a run.
type StartRequest struct {
	Job    string            // "" for the only job
	Params map[string]string // name=value as typed by the user
	By     string            // who asked, for the record
	Origin string            // the chat that asked ("telegram:123"), for notices
	Note   string            // the run's note, "" for none
	// Host is where to run it (开始 job@host): a [[hosts]] name; "" is
	// the job's hosts (or this host).
	Host string

	// RetryOf is the run that ran out of memory and is retried (on_oom).
	RetryOf int64
	// ResumedFrom is the run this one resumes (on_failure), and
	// Checkpoint the checkpoint it resumes from ("" for none: it starts
	// over): the job's resume arguments get it.
	ResumedFrom   int64
	Checkpoint    string
	resumeAttempt int         // the how-manieth on_failure resume this is
	resumedAtStep int64       // the step the run it resumes ended at
	attempt       int         // the how-manieth on_oom retry this is
	queued        *QueueEntry // the queue entry this start comes from
	prevOOM       *OOM        // what the run it retries failed to allocate
	prevSteps     int64       // and at which step
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
	// ShimCommand is the argv that starts a run's supervisor process
	// (trainbot shim). Default: this executable with "shim".
	ShimCommand []string
	// AdoptEvery is how often Resume's watch looks for runs that no
	// trainbot observes (their trainbot died). Default 5 s.
	AdoptEvery time.Duration
	// SecretEnv names the environment variables that hold trainbot's
	// secrets (the config's push channels' key_env, secret_env…): neither
	// a run's supervisor nor the run inherit them, nor any TRAINBOT_
	// variable but the run's own (EnvRunID…). A job that needs one sets
	// it in its Env.
	SecretEnv []string
	// Queue keeps start requests waiting for their job's lock (排队); nil:
	// no queue.
	Queue QueueStore
	// Alerts are alert rules for every job's runs ([[alerts]]).
	Alerts []AlertRule
	// HostAvailable returns the host's available memory in bytes
	// (MemAvailable), the limit of a memory fit of a CPU job; nil: unknown.
	HostAvailable func() int64
	// GPUs chooses and locks the GPUs of the runs that ask for some; nil:
	// this trainbot sees no GPUs, and such a start is refused (ErrNoGPUs).
	GPUs GPUAllocator
	// GPURetry is how often the queue tries again while a queued start
	// waits for GPUs. Default 2 s.
	GPURetry time.Duration
	// Hosts are the other hosts runs may run on, by [[hosts]] name.
	Hosts map[string]RemoteHost
	// HubName names this trainbot on those hosts (their run directories
	// are DATA/hub/HUB/ID there). Default: this host's name.
	HubName string
}

// RunRestorer is a Recorder that can take back a run found in its
// directory (DATA/runs/ID/run.json) that it has no record of: the
// database was deleted, damaged or replaced by an older one. The store
// implements it.
type RunRestorer interface {
	// RestoreRun stores r under its own id unless a run of that id is
	// recorded; restored says whether it was stored.
	RestoreRun(ctx context.Context, r *Run) (restored bool, err error)
}

// JobHistory is what the supervisor reads of a job's past runs: a
// Recorder that has it (the store does) makes the OOM advice and on_oom
// use the memory fit of the job's runs (FitMemory).
type JobHistory interface {
	// JobRuns returns the job's recent runs, newest first.
	JobRuns(ctx context.Context, job string) ([]*Run, error)
}

// Supervisor starts, watches and stops runs. At most one run holds each
// job lock at a time, within this process (a map) and across trainbot
// processes sharing the data directory (a lock file).
type Supervisor struct {
	opts Options
	// jobs is the configured jobs by name, swapped whole by Reconfigure
	// (never changed in place); alerts likewise, [[alerts]].
	jobs   atomic.Pointer[map[string]*Job]
	alerts atomic.Pointer[[]AlertRule]
	log    *slog.Logger

	startMu   sync.Mutex // serialises Start
	queueMu   sync.Mutex // serialises changes of the queue
	mu        sync.Mutex
	active    map[string]*active // by lock name
	closing   bool
	listeners []Listener
	wg        sync.WaitGroup
	retries   int           // on_oom retries decided but not started yet
	noRetries chan struct{} // closed when retries drops to 0
	resumed   bool
	stopWatch chan struct{} // closed by Close and Detach: the adoption watch ends
	// minID is the lowest id the next run may take: above every run
	// directory on disk when the supervisor started, and every run since.
	minID atomic.Int64
	// restored is the runs restored from their directories that had
	// ended, until adopt has taken them (read again quietly).
	restored   map[int64]*Run
	quietSlots chan struct{} // restored runs read again at once
	queueKick  chan struct{} // cap 1: the queue's owner makes a pass (kickQueue)
}

// nextID is the lowest id the next run may take.
func (s *Supervisor) nextID() int64 { return max(s.minID.Load(), 1) }

// New checks the jobs and returns a supervisor. Runs that an earlier
// trainbot started are re-attached by Resume, once the listeners are
// subscribed.
func New(ctx context.Context, opts Options) (*Supervisor, error) {
	if opts.Recorder == nil {
		return nil, errors.New("supervisor: no recorder")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = shimctl.DefaultDrainTimeout
	}
	if opts.AdoptEvery <= 0 {
		opts.AdoptEvery = 5 * time.Second
	}
	if len(opts.ShimCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervisor: find trainbot's executable for the run supervisor: %w", err)
		}
		opts.ShimCommand = []string{exe, "shim"}
	}
	if opts.HubName == "" {
		opts.HubName = DefaultHubName(opts.DataDir)
	}
	s := &Supervisor{opts: opts, active: map[string]*active{}, log: opts.Logger, stopWatch: make(chan struct{}), quietSlots: make(chan struct{}, 2), queueKick: make(chan struct{}, 1)}
	if err := s.Reconfigure(opts.Jobs, opts.Alerts); err != nil {
		return nil, err
	}
	for _, dir := range []string{filepath.Join(opts.DataDir, "runs"), filepath.Join(opts.DataDir, "locks")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	s.minID.Store(MaxRunDirID(opts.DataDir) + 1)
	s.wg.Go(s.queueLoop)
	return s, nil
}

// Reconfigure replaces the configured jobs and the alert rules of every
// job ([[alerts]]) — a reload. Runs in progress keep the job definition
// they started with; the next start of a job uses the new one. On an error
// nothing changes.
func (s *Supervisor) Reconfigure(jobs []*Job, alerts []AlertRule) error {
	m := make(map[string]*Job, len(jobs))
	for _, j := range jobs {
		if err := j.Normalize(); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
		if _, dup := m[j.Name]; dup {
			return fmt.Errorf("job %s: defined twice", j.Name)
		}
		m[j.Name] = j
	}
	for i, r := range alerts {
		if err := r.Validate(); err != nil {
			return under(fmt.Sprintf("alerts[%d]", i), err)
		}
	}
	a := slices.Clone(alerts)
	s.jobs.Store(&m)
	s.alerts.Store(&a)
	return nil
}

func (s *Supervisor) jobMap() map[string]*Job { return *s.jobs.Load() }

func (s *Supervisor) alertRules() []AlertRule { return *s.alerts.Load() }

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
		e.Job = s.jobMap()[e.Run.Job]
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
	jobs := s.jobMap()
	out := make([]*Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *Job) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Job returns the named job; "" means the only job.
func (s *Supervisor) Job(name string) (*Job, error) {
	jobs := s.jobMap()
	if name == "" {
		if len(jobs) == 1 {
			for _, j := range jobs {
				return j, nil
			}
		}
		names := make([]string, 0, len(jobs))
		for _, j := range s.Jobs() {
			names = append(names, j.Name)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: no jobs are configured", ErrUnknownJob)
		}
		return nil, fmt.Errorf("%w: name one of %s", ErrUnknownJob, strings.Join(names, ", "))
	}
	j, ok := jobs[name]
	if !ok && len(jobs) == 0 {
		return nil, fmt.Errorf("%w %q: no jobs are configured", ErrUnknownJob, name)
	}
	if !ok {
		names := make([]string, 0, len(jobs))
		for _, j := range s.Jobs() {
			names = append(names, j.Name)
		}
		return nil, fmt.Errorf("%w %q: the jobs are %s", ErrUnknownJob, name, strings.Join(names, ", "))
	}
	return j, nil
}

// RunnerLocal is the runner of runs supervised by a trainbot shim on this host.
const RunnerLocal = "local"

func emptyProgress() logparse.Progress { return logparse.Progress{Epoch: math.NaN()} }

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
	default: // stops are already on their way
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.Clone(), nil
}

// IsActive reports whether run runID is one this supervisor observes now
// (it takes no run's lock: a GPU claim asks it from within Start).
func (s *Supervisor) IsActive(runID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.active {
		if a.run.ID == runID {
			return true
		}
	}
	return false
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
		if !a.quiet {
			as = append(as, a)
		}
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
	return a.tail.last(n), nil
}

// ActivePGIDs maps the process group id of every active run to its run id,
// so that GPU processes can be attributed to runs.
func (s *Supervisor) ActivePGIDs() map[int]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int]int64, len(s.active))
	for _, a := range s.active {
		a.mu.Lock()
		if a.run.PID > 0 && a.run.Host == "" { // a run on another host has its pid there
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
	// A sample in which the run held no GPU memory says nothing of its
	// peak: a script that imports torch for seconds and then fills the
	// GPU within one sampling interval (and runs out of memory) must not
	// report "peak GPU memory 0 B".
	if gpuBytes != nil && *gpuBytes > 0 && (a.run.PeakGPUMem == nil || *gpuBytes > *a.run.PeakGPUMem) {
		v := *gpuBytes
		a.run.PeakGPUMem = &v
	}
	if hostBytes != nil {
		a.run.raisePeakSampled(*hostBytes)
	}
}

// ObserveHostPeak raises the peak host memory of an active run from a
// kernel high-water mark measured in a way (how: history.PeakMain, history.PeakTreeSum,
// history.PeakCgroup); it replaces the samples of ObserveMemory.
func (s *Supervisor) ObserveHostPeak(runID int64, bytes int64, how string) {
	a, err := s.find(runID)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.run.raisePeakHost(bytes, how)
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
// and waits for them to end: what a terminal chat does, where a person at
// the keyboard ends the session. If ctx ends first, the remaining runs are
// killed and Close still waits for their ends to be recorded.
func (s *Supervisor) Close(ctx context.Context) error {
	as := s.closeDown()
	for _, a := range as {
		select {
		case a.stopCh <- stopRequest{by: "trainbot shutdown", reason: OutcomeStopped}:
		default:
		}
	}
	done := s.observersDone()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, a := range as {
		a.kill()
	}
	select {
	case <-done:
		return ctx.Err()
	case <-time.After(closeKillWait):
	}
	// A run whose owner cannot be reached (its host does not answer) is
	// not waited for forever: it is left running, as Detach leaves it, and
	// the next trainbot re-attaches it.
	for _, a := range as {
		select {
		case <-a.done:
		default:
			s.log.Warn("shutdown: the run's owner did not take the kill; the run is left as it is", "run", a.run.ID)
			a.detachOnce.Do(func() { close(a.detach) })
		}
	}
	<-done
	return ctx.Err()
}

// closeKillWait bounds how long Close waits for killed runs to end.
const closeKillWait = 10 * time.Second

// observersDone is closed when every goroutine the supervisor started has
// returned.
func (s *Supervisor) observersDone() <-chan struct{} {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	return done
}

// Detach refuses new runs and stops observing the active ones, which go on
// under their supervisors; the next trainbot re-attaches (serve's
// shutdown, an upgrade). Points read so far are stored.
func (s *Supervisor) Detach(ctx context.Context) error {
	as := s.closeDown()
	for _, a := range as {
		a.detachOnce.Do(func() { close(a.detach) })
	}
	select {
	case <-s.observersDone():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeDown refuses new runs, ends the adoption watch and returns the
// active runs.
func (s *Supervisor) closeDown() []*active {
	// Under startMu: a Start already past its closing check (an on_oom
	// retry, a chat command) has registered its run, which is then among
	// those returned; every later Start sees closing.
	s.startMu.Lock()
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.stopWatch)
	}
	as := make([]*active, 0, len(s.active))
	for _, a := range s.active {
		as = append(as, a)
	}
	s.mu.Unlock()
	s.startMu.Unlock()
	return as
}

// MemoryFit fits the peak memory of a job's past runs against its batch
// parameter (BatchParam) for the OOM advice and on_oom; nil when the
// Recorder keeps no history or the job has no batch parameter. The limit
// is the device's capacity the out-of-memory error gave (oom, may be nil)
// for GPU peaks, the host's available memory for host peaks.
//
// Only runs with the same other parameters as run (the one that ran out of
// memory) count.
func (s *Supervisor) MemoryFit(job *Job, run *Run, oom *OOM) *MemoryFit {
	h, ok := s.opts.Recorder.(JobHistory)
	param := BatchParam(job)
	if !ok || job == nil || param == "" {
		return nil
	}
	runs, err := h.JobRuns(context.Background(), job.Name)
	if err != nil {
		s.log.Warn("memory fit: read the job's runs", "job", job.Name, "err", err)
		return nil
	}
	if run != nil && oom != nil {
		// The run that printed the error is still recorded as running: it
		// ran out of memory at its value, which caps the answer.
		mine := run.Clone()
		mine.Outcome = OutcomeOOM
		runs = append(slices.DeleteFunc(slices.Clone(runs), func(r *Run) bool { return r.ID == run.ID }), mine)
	}
	f := FitMemory(runs, job, job.Name, param, run, 0)
	var limit int64
	switch {
	case f.GPU && oom != nil && oom.TotalBytes > 0:
		limit = oom.TotalBytes
	case !f.GPU && s.opts.HostAvailable != nil:
		limit = s.opts.HostAvailable()
	}
	f = FitMemory(runs, job, job.Name, param, run, limit)
	return &f
}

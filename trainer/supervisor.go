package trainer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/shimctl"
	"github.com/trainbot/trainbot/trainer/slurm"
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
}

func (e *BusyError) Error() string {
	if e.Active == nil {
		return "a run is already active: " + e.Other
	}
	if u := e.Active.Unsupervised; u != nil {
		return fmt.Sprintf("run #%d (%s) is still alive, unsupervised: its supervisor (pid %d) died and %d process(es) of process group %d live on; 停止 %d (/stop %d) ends them",
			e.Active.Run.ID, e.Active.Run.Job, u.SupervisorPID, u.Processes, u.PGID, e.Active.Run.ID, e.Active.Run.ID)
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
	EventStarted  EventKind = "started"
	EventAttached EventKind = "attached" // a trainbot observes a run again that an earlier one started
	EventAlert    EventKind = "alert"
	EventEnded    EventKind = "ended"
	EventQueue    EventKind = "queue" // a queued start request was dropped (Event.Queue says why)
)

// OutcomeRule is the Alert.Kind of an alert rule that fired (not an
// outcome: a run is never ended by a rule).
const OutcomeRule Outcome = "rule"

// Event is published to listeners when a run starts, raises an alert while
// it runs, or ends.
type Event struct {
	Kind   EventKind
	Run    *Run    // a copy
	Alert  *Alert  // EventAlert only
	Status *Status // EventEnded: the final status (metrics, rate); EventStarted, EventAttached: the first
	At     time.Time
	Job    *Job   // the run's job (shared: read only); set by the supervisor
	Retry  *Retry // EventEnded of a job with on_oom: what it did; nil otherwise
	OOM    *OOM   // EventEnded out of memory: what the output said; nil when it said nothing
	// Queued is the queue entry a run was started from (EventStarted: its
	// requester has had no answer yet); nil for a run started at once.
	Queued *QueueEntry
	Queue  *QueueNotice // EventQueue
	// Fit is the memory fit of the job's runs over its batch parameter,
	// for out-of-memory alerts and ends; nil when there is no history.
	Fit *MemoryFit
}

// Alert is raised while a run is still going.
type Alert struct {
	Kind  Outcome // OutcomeOOM, OutcomeNaN or OutcomeStalled
	Text  string
	OOM   *OOM       // for OutcomeOOM
	NaN   *NaNStreak // for OutcomeNaN: what Text says, for wording it in another language
	Stall *Stall     // for a silent run's OutcomeStalled (not for a Slurm warning)
	// Unsupervised is set, with Kind OutcomeInterrupted, when the run's
	// supervisor died and processes of the run live on: the run stays
	// running (and holds its lock) until they are gone; 停止 ends them.
	Unsupervised *Unsupervised
}

// Unsupervised says what lives on of a run whose supervisor (its shim)
// died: Processes processes, of process group PGID or carrying the run's
// TRAINBOT_RUN_DIR.
type Unsupervised struct {
	RunID         int64
	SupervisorPID int
	PGID          int
	Processes     int
}

// NaNStreak is a loss metric's run of NaN or ±Inf points that raised a NaN
// alert: Value (NaN, +Inf or -Inf) Count times in a row, the last at Step.
type NaNStreak struct {
	Metric string
	Value  float64
	Count  int
	Step   int64
}

// Stall is a silence that raised a stalled alert: no output and no metric
// for Quiet, stall_after being After.
type Stall struct {
	Quiet, After time.Duration
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
	Note   string            // the run's note, "" for none

	// RetryOf is the run that ran out of memory and is retried (on_oom).
	RetryOf   int64
	attempt   int         // the how-manieth on_oom retry this is
	queued    *QueueEntry // the queue entry this start comes from
	prevOOM   *OOM        // what the run it retries failed to allocate
	prevSteps int64       // and at which step
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
	s := &Supervisor{opts: opts, active: map[string]*active{}, log: opts.Logger, stopWatch: make(chan struct{}), quietSlots: make(chan struct{}, 2)}
	if err := s.Reconfigure(opts.Jobs, opts.Alerts); err != nil {
		return nil, err
	}
	for _, dir := range []string{filepath.Join(opts.DataDir, "runs"), filepath.Join(opts.DataDir, "locks")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	s.minID.Store(MaxRunDirID(opts.DataDir) + 1)
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
			return fmt.Errorf("alerts[%d].%w", i, err)
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
	lock, err := acquireJobLock(filepath.Join(s.opts.DataDir, "locks", lockFileName(job.Lock)))
	if err != nil {
		return nil, err
	}
	handed := false // the lock belongs to the run's supervisor once it started
	defer func() {
		if !handed {
			lock.release()
		}
	}()
	if other, err := s.unobservedRun(ctx, job.Lock); err != nil {
		return nil, fmt.Errorf("look for runs of lock %s: %w", job.Lock, err)
	} else if other != nil {
		// A Slurm run's lock is its observer's: between two trainbots
		// (a restart) nobody holds it, but the run goes on.
		return nil, &BusyError{Other: fmt.Sprintf("run #%d (%s) is in Slurm (job %s) and no trainbot observes it right now; it is re-attached within seconds",
			other.ID, other.Job, other.SlurmJobID)}
	}

	ctx = context.WithoutCancel(ctx)
	now := time.Now()
	run := &Run{
		Job: job.Name, Params: params, ParamTypes: job.paramTypes(), State: StateRunning, Outcome: OutcomeRunning, Runner: job.Runner,
		StartedAt: now, StartedBy: req.By, Origin: req.Origin, RetryOf: req.RetryOf, Note: req.Note,
	}
	argv, env := job.Argv(params)
	run.Command = argv
	run.ID = s.nextID()
	id, err := s.opts.Recorder.CreateRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("record run: %w", err)
	}
	run.ID = id
	s.minID.Store(max(s.minID.Load(), id+1))
	log := s.log.With("run", id, "job", job.Name)
	runDir := filepath.Join(s.opts.DataDir, "runs", strconv.FormatInt(id, 10))
	run.LogPath = filepath.Join(runDir, shimctl.LogFile)
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
	// A run's directory is its own: one that exists (another trainbot's
	// run, with another database, in the same data directory) is never
	// shared.
	if err := os.Mkdir(runDir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			s.minID.Store(max(s.minID.Load(), MaxRunDirID(s.opts.DataDir)+1))
			err = fmt.Errorf("its directory %s already exists: another trainbot with another database uses this data directory? (the next run takes a higher id)", runDir)
		}
		return fail(err)
	}
	if err := writeRunFile(runDir, run); err != nil {
		return fail(err)
	}
	// The script appends to it: created here, it has trainbot's private
	// mode rather than the one the script's umask would give it.
	metricsPath := filepath.Join(runDir, MetricsFile)
	f, err := os.OpenFile(metricsPath, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(err)
	}
	f.Close()
	obs, err := acquireObserver(runDir)
	if err != nil {
		return fail(err)
	}
	lock.describe(lockHolder{Run: id, RunDir: runDir, What: fmt.Sprintf("run #%d (%s), started %s by trainbot pid %d", id, job.Name, now.Format(time.RFC3339), os.Getpid())})
	if job.Runner == RunnerSlurm {
		sid, err := slurm.Submit(ctx, slurm.SubmitSpec{RunID: id, Job: job.Name, Argv: argv, Dir: job.Dir,
			Env: runAdditions(env, id, runDir, metricsPath), SecretEnv: s.opts.SecretEnv, Umask: childUmask(), RunDir: runDir, LogPath: run.LogPath, Options: job.Slurm})
		if err != nil {
			obs.release()
			return fail(err)
		}
		run.SlurmJobID = sid
		if err := s.opts.Recorder.UpdateRun(ctx, run); err != nil {
			log.Error("record the Slurm job id", "slurm_job", sid, "err", err)
		}
		if err := writeRunFile(runDir, run); err != nil {
			log.Error("write the run's record in its directory", "err", err)
		}
		handed = true // the run's observer holds the job's lock until the run ends
		a := newActive(s, job, run, runDir)
		a.runner = newSlurmRunner(a, lock)
		a.obs, a.attempt, a.prevOOM, a.prevSteps, a.queued = obs, req.attempt, req.prevOOM, req.prevSteps, req.queued
		log.Info("run submitted to Slurm", "slurm_job", sid, "argv", shimctl.QuoteArgv(argv))
		return s.register(a), nil
	}
	spec := shimctl.Spec{
		RunID: id, Job: job.Name, Argv: argv, Dir: job.Dir, Env: childEnv(s.opts.SecretEnv, env, id, runDir, metricsPath),
		ShimEnv: private.WithoutSecrets(os.Environ(), s.opts.SecretEnv), Umask: childUmask(),
		RunDir: runDir, StopGrace: job.StopGrace, KillGrace: job.KillGrace, DrainTimeout: s.opts.DrainTimeout,
		MaxLogBytes: job.MaxLogBytes,
	}
	handed = true
	h, err := shimctl.Start(s.opts.ShimCommand, spec, lock.f, 30*time.Second)
	lock.f = nil // closed by shimctl.Start: the shim holds the lock now, or nobody does
	if err != nil {
		if h != nil { // it did not answer in time and was told to stop
			h.Wait()
		}
		obs.release()
		return fail(err)
	}
	run.PID, run.Supervisor = h.PID, h.ShimPID
	if err := s.opts.Recorder.UpdateRun(ctx, run); err != nil {
		log.Error("record run pid", "err", err)
	}
	if err := writeRunFile(runDir, run); err != nil {
		log.Error("write the run's record in its directory", "err", err)
	}
	a := newActive(s, job, run, runDir)
	a.runner = newShimRunner(a, h)
	a.obs, a.attempt, a.prevOOM, a.prevSteps, a.queued = obs, req.attempt, req.prevOOM, req.prevSteps, req.queued
	log.Info("run started", "pid", h.PID, "supervisor", h.ShimPID, "argv", shimctl.QuoteArgv(argv))
	return s.register(a), nil
}

// register makes a started run active, observes it and announces it; from
// here on, the run belongs to a (read it under a.mu).
func (s *Supervisor) register(a *active) *Run {
	s.mu.Lock()
	s.active[a.job.Lock] = a
	s.mu.Unlock()
	s.wg.Add(1)
	go a.observe()
	st := a.status()
	s.publish(Event{Kind: EventStarted, Run: st.Run.Clone(), Status: &st, Queued: a.queued})
	return st.Run
}

// unobservedRun is a Slurm run of lock that the store says is running and
// that this trainbot does not observe, nil if none.
func (s *Supervisor) unobservedRun(ctx context.Context, lock string) (*Run, error) {
	runs, err := s.opts.Recorder.RunningRuns(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if r.Runner != RunnerSlurm {
			continue
		}
		if j, ok := s.jobMap()[r.Job]; (ok && j.Lock == lock) || (!ok && r.Job == lock) {
			if _, err := s.find(r.ID); err != nil {
				return r, nil
			}
		}
	}
	return nil, nil
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
	<-done
	return ctx.Err()
}

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

// Resume re-attaches to the runs an earlier trainbot left running (their
// supervisors still run them, or have recorded how they ended while no
// trainbot watched), records runs whose supervisor died as interrupted, and
// keeps looking every AdoptEvery for runs no trainbot observes (one that
// another trainbot observed until it died). Call it once, after Subscribe:
// re-attached runs are announced with EventAttached.
func (s *Supervisor) Resume(ctx context.Context) error {
	s.mu.Lock()
	if s.resumed || s.closing {
		s.mu.Unlock()
		return nil
	}
	s.resumed = true
	s.mu.Unlock()
	ended, err := s.restoreRuns(ctx)
	if err != nil {
		return fmt.Errorf("find runs left running: %w", err)
	}
	s.mu.Lock()
	s.restored = ended
	s.mu.Unlock()
	if err := s.adopt(ctx); err != nil {
		return fmt.Errorf("find runs left running: %w", err)
	}
	s.StartQueued(ctx) // requests queued before a restart
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.opts.AdoptEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stopWatch:
				return
			case <-t.C:
				if err := s.adopt(context.Background()); err != nil {
					s.log.Warn("look for runs left running", "err", err)
				}
				s.StartQueued(context.Background())
			}
		}
	}()
	return nil
}

// adopt attaches to every run the store says is running that no trainbot
// observes.
func (s *Supervisor) adopt(ctx context.Context) error {
	runs, err := s.opts.Recorder.RunningRuns(ctx)
	if err != nil {
		return err
	}
	// Under startMu: a run Start has recorded but not registered yet is
	// not taken for one left behind.
	s.startMu.Lock()
	defer s.startMu.Unlock()
	for _, r := range runs {
		s.mu.Lock()
		closing := s.closing
		mine := false
		for _, a := range s.active {
			mine = mine || a.run.ID == r.ID
		}
		s.mu.Unlock()
		if closing {
			return nil
		}
		if mine {
			continue
		}
		if r.Runner == "" {
			if err := s.interruptedBeforeRunners(ctx, r); err != nil {
				return err
			}
			continue
		}
		job, ok := s.jobMap()[r.Job]
		if r.Runner == RunnerWatch {
			job, ok = watchJob(r), true
		}
		if !ok { // a job no longer configured: observe it with the defaults
			job = &Job{Name: r.Job, Command: r.Command}
			if err := job.Normalize(); err != nil {
				job = &Job{Name: r.Job, Lock: r.Job, StopGrace: DefaultStopGrace, KillGrace: DefaultKillGrace, TailLines: DefaultTailLines}
			}
		}
		runDir := RunDir(s.opts.DataDir, r.ID)
		if err := os.MkdirAll(runDir, 0o700); err != nil {
			return err
		}
		obs, err := acquireObserver(runDir)
		if err != nil {
			continue // another trainbot observes it
		}
		if _, busy := s.active[job.Lock]; busy {
			// Two runs of one lock: only after a config change (two jobs
			// that now share a lock). Observe it under its run id.
			job = cloneJob(job)
			job.Lock = fmt.Sprintf("%s#run%d", job.Lock, r.ID)
		}
		s.mu.Lock()
		rec := s.restored[r.ID]
		delete(s.restored, r.ID)
		s.mu.Unlock()
		if rec != nil {
			// Its points are read again, under a lock of its own; nothing
			// of it is announced.
			job = cloneJob(job)
			job.Lock = fmt.Sprintf("restored#run%d", r.ID)
		}
		a := newActive(s, job, r, runDir)
		if rec != nil {
			a.runner, a.quiet, a.recorded = recordedRunner{rec}, true, rec
		} else if r.Runner == RunnerSlurm {
			// The job's lock is the observer's: take it again (the
			// trainbot that held it is gone; another process that holds
			// it now is told by its name in the lock file).
			lock, err := acquireLock(filepath.Join(s.opts.DataDir, "locks", lockFileName(job.Lock)))
			if err != nil {
				s.log.Warn("re-attach to a Slurm run without its job's lock", "run", r.ID, "err", err)
			}
			lock.describe(lockHolder{What: fmt.Sprintf("run #%d (%s), Slurm job %s, observed by trainbot pid %d", r.ID, r.Job, r.SlurmJobID, os.Getpid())})
			a.runner = newSlurmRunner(a, lock)
		} else if r.Runner == RunnerWatch {
			a.runner = newWatchRunner(a)
		} else {
			a.runner = newShimRunner(a, nil)
		}
		a.obs, a.adopted = obs, true
		a.attempt = retryAttempt(r.StartedBy)
		s.mu.Lock()
		s.active[job.Lock] = a
		s.mu.Unlock()
		s.wg.Add(1)
		go a.observe()
		s.log.Info("re-attached to run", "run", r.ID, "job", r.Job, "supervisor", r.Supervisor, "running for", time.Since(r.StartedAt).Round(time.Second))
	}
	return nil
}

func cloneJob(j *Job) *Job {
	c := *j
	return &c
}

// retryAttempt reads the on_oom attempt from a run's StartedBy ("on_oom,
// retry 2/3 of run #5"); 0 when it is not a retry.
func retryAttempt(by string) int {
	var n, limit int
	var of int64
	if _, err := fmt.Sscanf(by, "on_oom, retry %d/%d of run #%d", &n, &limit, &of); err != nil {
		return 0
	}
	return n
}

// interruptedBeforeRunners records a run of a trainbot from before runners
// (it supervised its runs in its own process) as interrupted, unless that
// trainbot still runs.
func (s *Supervisor) interruptedBeforeRunners(ctx context.Context, r *Run) error {
	if r.Supervisor != os.Getpid() && processStartedBefore(r.Supervisor, r.StartedAt) {
		return nil // another live trainbot supervises it
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
	return nil
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

package trainer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/trainer/shimctl"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// Starting a run: its parameters checked, the job's lock taken (refused
// while any process of the lock's last run lives), the run recorded under
// an id never used on disk, its directory made, and its supervisor (the
// shim, or sbatch) started; then it is observed.

// Start starts a run of a job, unless its lock is held (a *BusyError) or a
// parameter is refused (errors wrapping ErrBadParam). When the command
// cannot be executed, the run is recorded as failed and a *StartError says
// why.
func (s *Supervisor) Start(ctx context.Context, req StartRequest) (*Run, error) {
	if j, h, ok := strings.Cut(req.Job, "@"); ok && req.Host == "" {
		req.Job, req.Host = j, h // 开始 train@gpu2
	}
	job, err := s.Job(req.Job)
	if err != nil {
		return nil, err
	}
	params, err := job.ResolveParams(req.Params)
	if err != nil {
		return nil, err
	}
	gpuReq := job.gpuRequest(req.Params)
	// The start's gpus= or gpu= stays with the run's parameters: shown with
	// them, and asked again by an on_oom retry, which starts from them.
	for _, k := range []string{ParamGPUs, ParamGPU} {
		if v, ok := req.Params[k]; ok && job.isGPUParam(k) {
			params[k] = strings.TrimSpace(v)
		}
	}
	if job.Runner == RunnerSlurm && len(gpuReq.Indices) > 0 {
		return nil, &ParamError{Job: job.Name, Param: ParamGPU, Value: req.Params[ParamGPU], Given: true,
			Reason: "cannot be asked of Slurm, which allocates the GPUs itself: ask gpus=N", Problem: ParamUnknown}
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
		if other.Runner == RunnerSSH {
			return nil, &BusyError{Other: fmt.Sprintf("run #%d (%s) runs on host %s and no trainbot observes it right now; it is re-attached within seconds",
				other.ID, other.Job, other.Host)}
		}
		return nil, &BusyError{Other: fmt.Sprintf("run #%d (%s) is in Slurm (job %s) and no trainbot observes it right now; it is re-attached within seconds",
			other.ID, other.Job, other.SlurmJobID)}
	}

	hostList, err := s.runHosts(job, req.Host)
	if err != nil {
		return nil, err
	}
	if len(hostList) > 0 {
		handed = true // startRemote releases it, or gives it to the run's observer
		return s.startRemote(ctx, job, req, params, gpuReq, lock, hostList)
	}

	// GPUs: chosen and locked before the run is recorded, so that a
	// start that must wait for them leaves no record; the locks go to the
	// run's supervisor with the job's.
	var claim *GPUClaim
	if !gpuReq.Zero() && job.Runner != RunnerSlurm {
		if s.opts.GPUs == nil {
			return nil, fmt.Errorf("%w: job %s asks for %d GPU(s), and this trainbot sees no GPU (no NVIDIA driver, or a build without NVML)", ErrNoGPUs, job.Name, gpuReq.N())
		}
		c, err := s.opts.GPUs.Claim(ctx, gpuReq, GPUHolder{Job: job.Name})
		var short *GPUShortage
		switch {
		case errors.As(err, &short):
			return nil, &BusyError{GPUs: short}
		case err != nil:
			return nil, err
		}
		claim = c
		defer func() {
			if !handed {
				claim.close()
			}
		}()
	}

	ctx = context.WithoutCancel(ctx)
	now := time.Now()
	run := &Run{
		Job: job.Name, Params: params, ParamTypes: job.paramTypes(), ParamRanges: job.paramRanges(), State: StateRunning, Outcome: OutcomeRunning, Runner: job.Runner,
		StartedAt: now, StartedBy: req.By, Origin: req.Origin, RetryOf: req.RetryOf, Note: req.Note, ResumedFrom: req.ResumedFrom,
	}
	if job.Runner != RunnerSlurm {
		run.BootID = BootID()
	}
	argv, env := job.Argv(params)
	if job.OnFailure != nil {
		argv = job.withCheckpoint(argv, params, req.Checkpoint)
		if req.Checkpoint != "" {
			env = append(env, EnvCheckpoint+"="+req.Checkpoint)
		}
	}
	if claim != nil {
		run.GPUs = claim.GPUs
		env = append(env, claim.Env...)
	}
	run.Command = argv
	id, err := s.recordRun(ctx, run)
	if err != nil {
		return nil, err
	}
	if claim != nil && claim.Record != nil {
		claim.Record(id)
	}
	log := s.log.With("run", id, "job", job.Name)
	runDir := filepath.Join(s.opts.DataDir, "runs", strconv.FormatInt(id, 10))
	run.LogPath = filepath.Join(runDir, shimctl.LogFile)
	fail := func(err error) (*Run, error) {
		run.State, run.Outcome, run.EndedAt = StateEnded, OutcomeFailed, time.Now()
		run.End = &EndFacts{Why: WhyNoStart, StartError: err.Error()}
		var taken *runDirTakenError
		if errors.As(err, &taken) {
			run.End.RunDirTaken = taken.dir
		}
		run.Detail = run.End.English()
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
			err = &runDirTakenError{dir: runDir}
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
		opts := slurmOptions(job.Slurm, gpuReq)
		sid, err := slurm.Submit(ctx, slurm.SubmitSpec{RunID: id, Job: job.Name, Argv: argv, Dir: job.Dir,
			Env: runAdditions(env, id, runDir, metricsPath), SecretEnv: s.opts.SecretEnv, Umask: childUmask(), RunDir: runDir, LogPath: run.LogPath, Options: opts})
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
		a.resumeAttempt, a.resumedAtStep, a.resumedFrom = req.resumeAttempt, req.resumedAtStep, req.Checkpoint
		log.Info("run submitted to Slurm", "slurm_job", sid, "argv", termsafe.Argv(argv))
		return s.register(a), nil
	}
	spec := shimctl.Spec{
		RunID: id, Job: job.Name, Argv: argv, Dir: job.Dir, Env: childEnv(s.opts.SecretEnv, env, id, runDir, metricsPath),
		ShimEnv: private.WithoutSecrets(os.Environ(), s.opts.SecretEnv), Umask: childUmask(),
		RunDir: runDir, StopGrace: job.StopGrace, KillGrace: job.KillGrace, DrainTimeout: s.opts.DrainTimeout,
		MaxLogBytes: job.MaxLogBytes, StopSignal: int(job.Signals.Stop),
	}
	var gpuLocks []*os.File
	if claim != nil {
		gpuLocks, claim.Locks = claim.Locks, nil
	}
	handed = true
	h, err := shimctl.Start(s.opts.ShimCommand, spec, lock.f, 30*time.Second, gpuLocks...)
	lock.f = nil // closed by shimctl.Start: the shim holds the locks now, or nobody does
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
	a.resumeAttempt, a.resumedAtStep, a.resumedFrom = req.resumeAttempt, req.resumedAtStep, req.Checkpoint
	if claim != nil {
		log.Info("run started", "pid", h.PID, "supervisor", h.ShimPID, "argv", termsafe.Argv(argv), "gpus", GPUList(claim.GPUs))
	} else {
		log.Info("run started", "pid", h.PID, "supervisor", h.ShimPID, "argv", termsafe.Argv(argv))
	}
	return s.register(a), nil
}

// register makes a started run active, observes it and announces it; from
// here on, the run belongs to a (read it under a.mu).
func (s *Supervisor) register(a *active) *Run {
	s.mu.Lock()
	s.active[a.job.Lock] = a
	s.mu.Unlock()
	// Announced before it is observed: a run that ends at once (a retry
	// that fits in no time) must not have its end told before its start.
	st := a.status()
	s.publish(Event{Kind: EventStarted, Run: st.Run.Clone(), Status: &st, Queued: a.queued})
	s.wg.Add(1)
	go a.observe()
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
		if r.Runner != RunnerSlurm && r.Runner != RunnerSSH {
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

// recordRun records a new run under an id never used on disk (above every
// run directory, and every run since the supervisor started) and sets
// run.ID. Call with startMu held.
func (s *Supervisor) recordRun(ctx context.Context, run *Run) (int64, error) {
	run.ID = s.nextID()
	id, err := s.opts.Recorder.CreateRun(ctx, run)
	if err != nil {
		return 0, fmt.Errorf("record run: %w", err)
	}
	run.ID = id
	s.minID.Store(max(s.minID.Load(), id+1))
	return id, nil
}

// runDirTakenError is a start refused because the run's directory exists.
type runDirTakenError struct{ dir string }

func (e *runDirTakenError) Error() string {
	return fmt.Sprintf("its directory %s already exists: another trainbot with another database uses this data directory? (the next run takes a higher id)", e.dir)
}

// slurmOptions are a Slurm run's sbatch options: the job's, with the GPU
// request's count (the job's gpus, or the start's gpus=N) as --gpus, since
// Slurm allocates the GPUs of its jobs itself.
func slurmOptions(o slurm.Options, req GPURequest) slurm.Options {
	if req.Count > 0 {
		n := strconv.Itoa(req.Count)
		if i := strings.LastIndexByte(o.GPUs, ':'); i >= 0 {
			n = o.GPUs[:i+1] + n // "a100:2" with gpus=1 is "a100:1": the type stays
		}
		o.GPUs = n
	}
	return o
}

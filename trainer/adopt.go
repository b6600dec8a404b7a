package trainer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Re-attaching: the runs an earlier trainbot left running (or that a lost
// database forgot, restored from their directories first) are observed
// again, and the ones whose supervisor died are recorded.

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
	s.kickQueue() // requests queued before a restart
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
				s.kickQueue()
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
		} else if r.Runner == RunnerSSH {
			// As a Slurm run's: the job's lock here is the observer's.
			lock, err := acquireLock(filepath.Join(s.opts.DataDir, "locks", lockFileName(job.Lock)))
			if err != nil {
				s.log.Warn("re-attach to a run on a host without its job's lock", "run", r.ID, "err", err)
			}
			lock.describe(lockHolder{What: fmt.Sprintf("run #%d (%s) on host %s, observed by trainbot pid %d", r.ID, r.Job, r.Host, os.Getpid())})
			var h RemoteHost = missingHost{r.Host}
			if rh := s.opts.Hosts[r.Host]; rh != nil {
				h = rh
			}
			a.runner = newRemoteRunner(a, h, lock)
		} else if r.Runner == RunnerWatch {
			a.runner = newWatchRunner(a)
		} else {
			a.runner = newShimRunner(a, nil)
		}
		a.obs, a.adopted = obs, true
		a.attempt = retryAttempt(r.StartedBy)
		a.resumeAttempt = resumeAttemptOf(r.StartedBy)
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
	f := &EndFacts{Why: WhyInterrupted, Interrupted: InterruptTrainbotGone, SupervisorPID: r.Supervisor}
	// What is known of its end: its log was written up to then (each
	// second while it printed). trainbot may come back days later.
	if fi, err := os.Stat(r.LogPath); err == nil && fi.ModTime().After(r.StartedAt) && fi.ModTime().Before(r.EndedAt) {
		r.EndedAt = fi.ModTime()
		at := r.EndedAt
		f.LogWritten = &at
	}
	if r.PID > 0 && syscall.Kill(-r.PID, 0) == nil && processStartedBefore(r.PID, r.StartedAt.Add(time.Minute)) {
		f.AlivePGID = r.PID
	}
	r.Detail, r.End = f.English(), f
	if err := s.opts.Recorder.UpdateRun(ctx, r); err != nil {
		return err
	}
	s.log.Warn("run interrupted", "run", r.ID, "detail", r.Detail)
	return nil
}

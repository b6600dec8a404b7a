package trainer

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/units"
)

// The end of a run as the bot sees it: the stop protocol it forwards to
// the run's owner, and finish, which classifies the end the owner told,
// records it (in the run's directory first, then the Recorder, retried
// while the disk is full), plans an on_oom retry and announces it.

// requestStop records a stop request and forwards it to the run's owner.
func (a *active) requestStop(req stopRequest) {
	a.mu.Lock()
	first := a.stopReq == nil
	if first {
		a.stopReq = &req
		a.oomAtStop = a.oomSoFar()
	} else if req.kill && !a.stopReq.kill {
		a.stopReq.kill = true
		a.stopSent = false
	} else {
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.log.Info("stopping run", "by", req.by, "reason", req.reason, "kill", req.kill)
	a.sendStop()
}

// pendingStop reports whether a stop (or kill) asked of this trainbot has
// not reached the shim yet.
func (a *active) pendingStop() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopReq != nil && !a.stopSent
}

func (a *active) sendStop() {
	a.mu.Lock()
	req := *a.stopReq
	a.mu.Unlock()
	if err := a.runner.stop(req); err != nil {
		// Said once: the observer asks again at every poll (a host that
		// does not answer may take minutes to come back).
		if !a.stopRefused {
			a.stopRefused = true
			a.log.Warn("the run's owner did not take the stop; trying again until it does", "kill", req.kill, "err", err)
		} else {
			a.log.Debug("the run's owner did not take the stop", "kill", req.kill, "err", err)
		}
		return
	}
	a.mu.Lock()
	a.stopSent = a.stopReq.kill == req.kill // a kill asked meanwhile is still to be sent
	a.mu.Unlock()
}

// kill is the last resort of Close, when it cannot wait any longer.
func (a *active) kill() {
	select {
	case a.stopCh <- stopRequest{by: "trainbot shutdown", reason: OutcomeStopped, kill: true}:
	default:
	}
}

// finish classifies the end its owner told (nil: the owner is gone
// without saying), records it and publishes it.
func (a *active) finish(end *runEnd) {
	ctx := context.Background()
	e := ending{exitCode: -1, oomKills: -1}
	var notes EndNotes
	if end != nil {
		e, notes = end.e, end.notes
	}
	a.publishSeen() // the run's last steps, for its end
	a.mu.Lock()
	if a.stopReq != nil && e.stopBy == "" && end != nil {
		e.stopBy, e.stopReason = a.stopReq.by, a.stopReq.reason
	}
	if a.stopReq != nil && a.stopReq.by == e.stopBy {
		e.oomBeforeStop = a.oomAtStop != nil
		if a.oom == nil {
			a.oom = a.oomAtStop
		}
	}
	if a.oom == nil {
		for _, l := range e.stderrTail {
			if o, ok := DetectOOM(l); ok {
				a.oom = o
			}
		}
	}
	e.oom = a.oom
	e.nan = a.nanStreak
	e.nanRecovered = a.nanStreak != nil && !a.nanW.watching()
	if end != nil {
		a.run.raisePeakHost(end.maxRSS, history.PeakMain)
	}
	e.peakMemText = peakText(a.run)
	var outcome Outcome
	var detail string
	var facts *EndFacts // how it ended; nil only for an end put back as recorded before facts
	r := a.run
	switch {
	case end == nil:
		var at time.Time
		outcome = OutcomeInterrupted
		facts, at = a.runner.gone()
		r.EndedAt = a.lastOutput
		if fi, err := os.Stat(r.LogPath); err == nil && fi.ModTime().After(r.StartedAt) {
			r.EndedAt = fi.ModTime()
		}
		if at.After(r.EndedAt) {
			// The runner saw it alive later than its last output (a
			// quiet run): that is when it ended, as far as is known.
			r.EndedAt = at
		}
		if now := BootID(); r.BootID != "" && now != "" && now != r.BootID && r.Host == "" {
			// Its supervisor went with the host: a reboot, not a fault of
			// the run (on_failure resumes it).
			outcome = OutcomeHostReboot
			facts = &EndFacts{Why: WhyHostReboot, Reboot: &Reboot{BootIDAtStart: r.BootID, BootIDNow: now}, SupervisorPID: facts.SupervisorPID}
			if bt, err := procfs.BootTime(); err == nil && os.Getenv(EnvBootIDFile) == "" {
				facts.Reboot.BootedAt = bt
			}
		}
	case end.outcome != "" && !(end.outcome == OutcomeFailed && (e.oom != nil || (e.nan != nil && !e.nanRecovered))):
		// The owner decided (Slurm's states, a watched process), unless
		// the output tells more of a failure: out of memory, or a NaN loss.
		outcome, facts, r.EndedAt = end.outcome, end.facts, end.endedAt
		if e.exitCode >= 0 {
			code := e.exitCode
			r.ExitCode = &code
		}
	default:
		outcome, facts = classify(e)
		r.EndedAt = end.endedAt
		if r.EndedAt.IsZero() {
			r.EndedAt = time.Now()
		}
		if e.signal == 0 && e.startErr == nil {
			code := e.exitCode
			r.ExitCode = &code
		}
	}
	notes.UnseenRules = a.unseenRules()
	if a.full {
		notes.MetricNamesMax = maxMetricNames
	}
	if facts != nil {
		if facts.Slurm == nil && end != nil {
			facts.Slurm = end.slurm // classified like a local run's: the job as Slurm told it
		}
		facts.EndNotes = notes
		detail = facts.English()
	}
	r.State, r.Outcome, r.Detail, r.End = StateEnded, outcome, detail, facts
	if r.Outcome == OutcomeStopped || r.Outcome == OutcomeNaN || (r.Outcome == OutcomeOOM && e.oomBeforeStop) {
		r.StoppedBy = e.stopBy
	}
	if rec := a.recorded; rec != nil {
		r.Outcome, r.Detail, r.End, r.EndedAt, r.ExitCode, r.StoppedBy = rec.Outcome, rec.Detail, rec.End, rec.EndedAt, rec.ExitCode, rec.StoppedBy
		r.PeakGPUMem, r.PeakHostMem, r.PeakHostHow = rec.PeakGPUMem, rec.PeakHostMem, rec.PeakHostHow
	}
	a.mu.Unlock()

	if rest := a.thin.flush(); len(rest) > 0 {
		a.addPoints(rest)
	}
	a.queuePoints()
	if err := a.sup.opts.Recorder.Flush(ctx); err != nil {
		a.log.Error("flush metric points", "err", err)
	}
	// The run's directory has its end first: a database that takes no
	// writes until trainbot restarts gets it from there.
	if err := writeRunFile(a.runDir, a.snapshot()); err != nil && a.run.Runner != RunnerWatch {
		a.log.Warn("write the run's record in its directory", "err", err)
	}
	// The end must be recorded, also on a disk that is full now: the run
	// stays "running" in the store until it is, and a trainbot that comes
	// back reads it again from the shim's state file.
	for attempt := 0; ; attempt++ {
		err := a.saveErr()
		if err == nil {
			break
		}
		if errors.Is(err, ErrUnrecorded) {
			a.log.Error("the end of the run is not in the database; its directory has it, and the next trainbot records it", "err", err)
			break
		}
		if attempt == 0 {
			a.log.Error("record the end of the run; trying again until it is recorded", "err", err)
		}
		select {
		case <-a.detach:
			a.leave()
			return
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 30*time.Second)):
		}
	}
	a.runner.done()
	st2 := a.status()
	if a.quiet {
		a.unregister()
		a.log.Info("run read again from its directory", "outcome", st2.Run.Outcome)
		return
	}
	// A retry (on_oom) counts as activity from here, so that Wait does not
	// return between this run and its retry.
	var oom *OOM
	var fit *MemoryFit
	if outcome == OutcomeOOM {
		oom = e.oom
		if oom == nil && end != nil {
			oom = end.oom
		}
		fit = a.sup.MemoryFit(a.job, st2.Run, oom)
	}
	retry := a.sup.planRetry(a, st2.Run, fit)
	resume := a.sup.planResume(a, st2.Run, retry)
	a.unregister()
	a.log.Info("run ended", "outcome", outcome, "detail", firstLine(detail))
	a.publish(Event{Kind: EventEnded, Run: st2.Run, Status: &st2, At: time.Now(), Retry: retry, Resume: resume, OOM: oom, Fit: fit})
	a.sup.retryAfterOOM(st2.Run, a.job, retry, oom)
	a.sup.resumeAfterFailure(st2.Run, a.job, resume, a.resumeAttempt)
	a.sup.kickQueue()
}

// oomSoFar is the out-of-memory error the run has printed, nil if none.
// Call with a.mu held.
func (a *active) oomSoFar() *OOM { return a.oom }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func peakText(r *Run) string {
	var parts []string
	if r.PeakGPUMem != nil {
		parts = append(parts, "peak GPU memory "+units.Bytes(*r.PeakGPUMem))
	}
	if t := peakHostText(r); t != "" {
		parts = append(parts, t)
	}
	return strings.Join(parts, ", ")
}

// save writes the run's current record.
func (a *active) save() {
	if err := a.saveErr(); err != nil {
		a.log.Error("record run", "err", err)
	}
}

func (a *active) saveErr() error {
	a.mu.Lock()
	r := a.run.Clone()
	a.mu.Unlock()
	return a.sup.opts.Recorder.UpdateRun(context.Background(), r)
}

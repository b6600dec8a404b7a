package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Runs that come back: a job's on_failure starts a run that ended for a
// reason that is not the script's fault (or that crashed) again from its
// newest complete checkpoint, as a new run linked to the one it resumes
// (Run.ResumedFrom), with the job's resume arguments naming the
// checkpoint. The chain stops after Retry resumes, when a resume dies at
// the step it resumed from without a newer checkpoint, or when there is
// no checkpoint and RequireCheckpoint is set.

// Failure classes of on_failure's when.
const (
	FailCrashed       = "crashed"         // the script exited non-zero or died of a signal nobody here sent
	FailPreempted     = "preempted"       // OutcomePreempted
	FailNodeFailure   = "node_failure"    // OutcomeNodeFailure
	FailHostReboot    = "host_reboot"     // OutcomeHostReboot
	FailHostOOMKilled = "host_oom_killed" // the kernel's OOM killer (an oom end by SIGKILL, WhyOOMKill)
	FailTimeout       = "timeout"         // OutcomeTimeout
	FailInterrupted   = "interrupted"     // its supervisor died and nothing tells how it ended
)

// FailureClasses are the classes on_failure's when may name.
var FailureClasses = []string{FailCrashed, FailPreempted, FailNodeFailure, FailHostReboot, FailHostOOMKilled, FailTimeout, FailInterrupted}

// DefaultFailureWhen is on_failure's when when the job gives none.
var DefaultFailureWhen = []string{FailCrashed, FailPreempted, FailNodeFailure, FailHostReboot, FailHostOOMKilled}

// FailureRetry is a job's on_failure policy.
type FailureRetry struct {
	Retry   int           // resumes in a row, 1..MaxFailureRetries
	When    []string      // FailureClasses that are resumed; nil: DefaultFailureWhen
	Backoff time.Duration // the pause before a resume (DefaultFailureBackoff when 0)
	// RequireCheckpoint ends the chain when no checkpoint exists, instead
	// of starting the run over.
	RequireCheckpoint bool
}

// Bounds and defaults of on_failure.
const (
	MaxFailureRetries     = 100
	DefaultFailureBackoff = 10 * time.Second
	// CheckpointPlaceholder in the command or the resume arguments is the
	// checkpoint a resume starts from.
	CheckpointPlaceholder = "checkpoint"
)

// FailureClass is the on_failure class of an ended run, "" when on_failure
// never resumes it (finished, stopped, out of memory from the output, NaN,
// a start that failed).
func FailureClass(r *Run) string {
	switch r.Outcome {
	case OutcomePreempted:
		return FailPreempted
	case OutcomeNodeFailure:
		return FailNodeFailure
	case OutcomeHostReboot:
		return FailHostReboot
	case OutcomeTimeout:
		return FailTimeout
	case OutcomeInterrupted:
		return FailInterrupted
	case OutcomeOOM:
		if r.End != nil && r.End.Why == WhyOOMKill {
			return FailHostOOMKilled
		}
	case OutcomeFailed:
		if r.StoppedBy != "" || r.End == nil {
			return ""
		}
		switch r.End.Why {
		case WhyExit, WhySignal, WhyStrayKill, WhySlurm:
			return FailCrashed
		}
	}
	return ""
}

// checkOnFailure checks on_failure, checkpoint and resume: one error per
// key at fault.
func (j *Job) checkOnFailure() []error {
	o := j.OnFailure
	if o == nil {
		if len(j.Resume) > 0 {
			return []error{keyErr("resume", "resume arguments need on_failure (they are what a resume adds)")}
		}
		return nil
	}
	var errs []error
	if o.Retry < 1 || o.Retry > MaxFailureRetries {
		errs = append(errs, keyErr("on_failure.retry", "want 1..%d, got %d", MaxFailureRetries, o.Retry))
	}
	for _, w := range o.When {
		if !slices.Contains(FailureClasses, w) {
			errs = append(errs, keyErr("on_failure.when", "%q: want some of %s", w, strings.Join(FailureClasses, ", ")))
		}
	}
	if o.Backoff < 0 {
		errs = append(errs, keyErr("on_failure.backoff", "cannot be negative"))
	}
	if j.Checkpoint == "" && (o.RequireCheckpoint || len(j.Resume) > 0) {
		errs = append(errs, keyErr("checkpoint", "on_failure with resume arguments or require_checkpoint needs checkpoint: a glob like \"ckpt/*.pt\" or a directory"))
	}
	if j.Checkpoint != "" && len(j.Resume) == 0 && !j.commandHasCheckpoint() {
		errs = append(errs, keyErr("resume", "say how the script is given its checkpoint: resume = [\"--resume\", \"{checkpoint}\"], or {checkpoint} in the command"))
	}
	for _, a := range j.Resume {
		for _, ref := range placeholders(a) {
			if _, ok := j.Params[ref]; !ok && ref != CheckpointPlaceholder {
				errs = append(errs, keyErr("resume", "%q refers to {%s}, which is not a declared parameter (nor {%s})", a, ref, CheckpointPlaceholder))
			}
		}
	}
	return errs
}

// commandHasCheckpoint reports whether "{checkpoint}" is in the command.
func (j *Job) commandHasCheckpoint() bool {
	for _, item := range j.Command {
		if slices.Contains(placeholders(item), CheckpointPlaceholder) {
			return true
		}
	}
	return false
}

// withCheckpoint is argv with the resume arguments appended when a
// checkpoint is given, and {checkpoint} replaced by it ("" when none:
// the run starts over) in the command.
func (j *Job) withCheckpoint(argv []string, params map[string]string, ckpt string) []string {
	value := func(name string) string {
		if name == CheckpointPlaceholder {
			return ckpt
		}
		return params[name]
	}
	out := make([]string, len(j.Command))
	for i, item := range j.Command {
		if slices.Contains(placeholders(item), CheckpointPlaceholder) {
			out[i] = expand(item, value)
		} else {
			out[i] = argv[i]
		}
	}
	if ckpt != "" {
		for _, a := range j.Resume {
			out = append(out, expand(a, value))
		}
	}
	return out
}

// Resume says what on_failure did about a run that ended (Event.Resume).
type Resume struct {
	Class   string // the run's failure class
	Attempt int    // the run that ended was the attempt-th resume (0: a first run)
	Limit   int    // the job's retry
	// Checkpoint is what the next run resumes from ("" when it starts
	// over, or none follows), After the pause before it starts.
	Checkpoint string
	After      time.Duration
	// Next is true when a resume follows; Refused says why none does.
	Next    bool
	Refused string
}

// resumePlan decides what on_failure does after run r ended; nil when the
// job has none or r ended in a class it does not resume (and r is no
// resume).
func (a *active) resumePlan(r *Run, now time.Time) *Resume {
	o := a.job.OnFailure
	if o == nil {
		return nil
	}
	class := FailureClass(r)
	when := o.When
	if when == nil {
		when = DefaultFailureWhen
	}
	if class == "" || !slices.Contains(when, class) {
		if a.resumeAttempt > 0 {
			return &Resume{Attempt: a.resumeAttempt, Limit: o.Retry} // the end of a chain: said in its report
		}
		return nil
	}
	rs := &Resume{Class: class, Attempt: a.resumeAttempt, Limit: o.Retry, After: o.Backoff}
	if rs.After == 0 {
		rs.After = DefaultFailureBackoff
	}
	ckpt, err := a.checkpoint(now)
	switch {
	case a.resumeAttempt >= o.Retry:
		rs.Refused = fmt.Sprintf("on_failure gives up after %d resumes (retry = %d)", a.resumeAttempt, o.Retry)
	case err != nil:
		rs.Refused = fmt.Sprintf("the checkpoint %s cannot be read: %v", a.job.Checkpoint, err)
	case a.resumeAttempt > 0 && r.Steps <= a.resumedAtStep && ckpt == a.resumedFrom:
		rs.Refused = fmt.Sprintf("it died at step %d again, with no newer checkpoint than %s: resuming would not get further", r.Steps, displayCheckpoint(a.resumedFrom))
	case ckpt == "" && o.RequireCheckpoint:
		rs.Refused = fmt.Sprintf("there is no complete checkpoint (%s) and require_checkpoint is set", a.job.Checkpoint)
	default:
		rs.Next, rs.Checkpoint = true, ckpt
	}
	return rs
}

// checkpoint is the job's newest complete checkpoint ("" for none). One
// that is not complete yet (written less than CheckpointSettle ago,
// without a .done marker) is not taken.
func (a *active) checkpoint(now time.Time) (string, error) {
	return a.sup.newestCheckpoint(a.job, a.run.Host, now)
}

// newestCheckpoint is job's newest complete checkpoint, on host ("" this
// one), "" for none.
func (s *Supervisor) newestCheckpoint(job *Job, host string, now time.Time) (string, error) {
	if job.Checkpoint == "" {
		return "", nil
	}
	if host != "" {
		h := s.opts.Hosts[host]
		if h == nil {
			return "", missingHost{host}.err()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return h.Checkpoint(ctx, job.Dir, job.Checkpoint)
	}
	return newestHere(job.Dir, job.Checkpoint, now)
}

// newestHere is NewestCheckpoint on this host, "" (and no error) for none.
func newestHere(dir, pattern string, now time.Time) (string, error) {
	path, _, err := NewestCheckpoint(dir, pattern, CheckpointSettle, now)
	if errors.Is(err, ErrNoCheckpoint) {
		return "", nil
	}
	return path, err
}

// NewestCheckpointHere is the newest complete checkpoint of pattern under
// dir on this host ("" for none): what a host's trainbot answers a hub.
func NewestCheckpointHere(dir, pattern string) (string, error) {
	return newestHere(dir, pattern, time.Now())
}

func displayCheckpoint(p string) string {
	if p == "" {
		return "none (it started over)"
	}
	return filepath.Base(p)
}

// planResume is resumePlan, with a resume to start counted as pending
// (like an on_oom retry) until resumeAfterFailure has started it.
func (s *Supervisor) planResume(a *active, r *Run, retry *Retry) *Resume {
	if retry != nil && retry.Next != "" {
		return nil // on_oom takes it
	}
	rs := a.resumePlan(r, time.Now())
	if rs != nil && rs.Next {
		s.mu.Lock()
		s.retries++
		s.mu.Unlock()
	}
	return rs
}

// resumeAfterFailure starts, after the backoff, the resume resumePlan
// decided on: a new run of the job with r's parameters and the newest
// complete checkpoint then, linked to r. One that cannot be started is
// reported as an alert about r.
func (s *Supervisor) resumeAfterFailure(r *Run, job *Job, rs *Resume, attempt int) {
	if rs == nil || !rs.Next {
		return
	}
	s.wg.Go(func() {
		defer s.retryStarted()
		t := time.NewTimer(rs.After)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stopWatch:
			s.log.Info("on_failure resume not started: trainbot is closing", "run", r.ID)
			return
		}
		ckpt := rs.Checkpoint
		if newer, err := s.newestCheckpoint(job, r.Host, time.Now()); err == nil && newer != "" {
			ckpt = newer // one completed meanwhile
		}
		req := StartRequest{
			Job: job.Name, Host: r.Host, Params: maps.Clone(r.Params), Origin: r.Origin, Note: r.Note, ResumedFrom: r.ID, Checkpoint: ckpt,
			resumeAttempt: attempt + 1, resumedAtStep: r.Steps,
			By: fmt.Sprintf("on_failure, resume %d/%d of run #%d (%s)", attempt+1, rs.Limit, r.ID, rs.Class),
		}
		s.startFollowUp(r, req, fmt.Sprintf("on_failure: the resume of run #%d", r.ID), "run resumed", "checkpoint", ckpt)
	})
}

// resumeAttemptOf reads the on_failure attempt from a run's StartedBy
// ("on_failure, resume 2/3 of run #5 (crashed)"); 0 when it is not one.
func resumeAttemptOf(by string) int {
	var n, limit int
	var of int64
	if _, err := fmt.Sscanf(by, "on_failure, resume %d/%d of run #%d", &n, &limit, &of); err != nil {
		return 0
	}
	return n
}

package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/trainbot/trainbot/internal/units"
)

// OOMRetry is a job's on_oom policy: when a run ends out of memory, start
// it again with the Halve parameter halved, at most Retry times in a row.
type OOMRetry struct {
	Retry int    // 1..10
	Halve string // an int parameter of the job, e.g. "batch_size"
	// NoFit keeps plain halving. Otherwise the retry jumps to the largest
	// value of Halve that the memory fit of the job's runs predicts to fit
	// (FitMemory), when there is one below the value that ran out of
	// memory.
	NoFit bool
}

// MaxOOMRetries bounds OOMRetry.Retry.
const MaxOOMRetries = 10

// Retry says what on_oom did about a run that ended (Event.Retry).
type Retry struct {
	Param   string // the halved parameter
	Value   string // its value in the run that ended
	Attempt int    // the run that ended was the attempt-th retry (0: not a retry)
	Limit   int    // the job's retry limit
	Next    string // the value the retry gets; "" when no retry follows
	Refused string // why no retry follows an out-of-memory end ("" otherwise)
	// Fit is the memory fit Next comes from; nil when Next is half.
	Fit *MemoryFit
}

func (j *Job) checkOnOOM() error {
	o := j.OnOOM
	if o == nil {
		return nil
	}
	if o.Retry < 1 || o.Retry > MaxOOMRetries {
		return keyErr("on_oom.retry", "want 1..%d, got %d", MaxOOMRetries, o.Retry)
	}
	spec, ok := j.Params[o.Halve]
	switch {
	case o.Halve == "":
		return keyErr("on_oom.halve", "name the int parameter to halve, e.g. halve = \"batch_size\"")
	case !ok:
		return keyErr("on_oom.halve", "%q is not a parameter of job %s", o.Halve, j.Name)
	case spec.Type != ParamInt:
		return keyErr("on_oom.halve", "parameter %s is a %s; only an int parameter can be halved", o.Halve, spec.Type)
	}
	return nil
}

// retryPlan decides what on_oom does after run r ended; nil when the job
// has no on_oom, or when r is a first run that did not run out of memory.
//
// fit is the memory fit of the job's runs over on_oom's parameter, nil if
// none: unless NoFit, the retry takes its value when it is below the run's.
func (a *active) retryPlan(r *Run, fit *MemoryFit) *Retry {
	o := a.job.OnOOM
	if o == nil || (r.Outcome != OutcomeOOM && a.attempt == 0) {
		return nil
	}
	rt := &Retry{Param: o.Halve, Value: r.Params[o.Halve], Attempt: a.attempt, Limit: o.Retry}
	if r.Outcome != OutcomeOOM {
		return rt
	}
	v, err := strconv.ParseInt(rt.Value, 10, 64)
	spec := a.job.Params[o.Halve]
	switch {
	case r.StoppedBy != "":
		rt.Refused = "it was stopped by " + r.StoppedBy
	case a.attempt >= o.Retry:
		rt.Refused = fmt.Sprintf("on_oom gives up after %d retries (retry = %d)", a.attempt, o.Retry)
	case err != nil:
		rt.Refused = fmt.Sprintf("%s=%q is not an integer", o.Halve, rt.Value)
	case a.sameFailure(r):
		rt.Refused = fmt.Sprintf("halving %s did not change the failed allocation (%s): not retrying", o.Halve, units.Bytes(a.oom.TriedBytes))
	case !o.NoFit && fit.OK() && fit.Param == o.Halve && fit.MaxFit < v:
		rt.Next, rt.Fit = strconv.FormatInt(fit.MaxFit, 10), fit
	case v/2 < 1:
		rt.Refused = fmt.Sprintf("%s=%d cannot be halved", o.Halve, v)
	case spec.Min != nil && float64(v/2) < *spec.Min:
		rt.Refused = fmt.Sprintf("half of %s=%d is below its minimum %g", o.Halve, v, *spec.Min)
	default:
		rt.Next = strconv.FormatInt(v/2, 10)
	}
	return rt
}

// sameFailure reports whether this retry ran out of memory exactly as the
// run it retries did: the same allocation at the same step, so halving did
// not touch what fails (a model too big, a fixed buffer).
func (a *active) sameFailure(r *Run) bool {
	p, o := a.prevOOM, a.oom
	return p != nil && o != nil && o.TriedBytes > 0 && o.TriedBytes == p.TriedBytes && r.Steps == a.prevSteps
}

// planRetry is retryPlan, with a retry to start counted as pending until
// retryAfterOOM has started it (Wait waits for it).
func (s *Supervisor) planRetry(a *active, r *Run, fit *MemoryFit) *Retry {
	rt := a.retryPlan(r, fit)
	if rt != nil && rt.Next != "" {
		s.mu.Lock()
		s.retries++
		s.mu.Unlock()
	}
	return rt
}

// retryStarted ends a pending retry.
func (s *Supervisor) retryStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries--
	if s.retries == 0 && s.noRetries != nil {
		close(s.noRetries)
		s.noRetries = nil
	}
}

// pendingRetries returns a channel closed when no retry is pending, or nil
// when none is. Call with s.mu held.
func (s *Supervisor) pendingRetries() chan struct{} {
	if s.retries == 0 {
		return nil
	}
	if s.noRetries == nil {
		s.noRetries = make(chan struct{})
	}
	return s.noRetries
}

// retryAfterOOM starts the retry that retryPlan decided on, with the same
// parameters but the halved one, linked to run r. A retry that cannot be
// started is reported as an alert about r.
func (s *Supervisor) retryAfterOOM(r *Run, job *Job, rt *Retry, oom *OOM) {
	if rt == nil || rt.Next == "" {
		return
	}
	defer s.retryStarted()
	params := maps.Clone(r.Params)
	params[rt.Param] = rt.Next
	req := StartRequest{
		Job: job.Name, Params: params, Origin: r.Origin, RetryOf: r.ID, Note: r.Note, attempt: rt.Attempt + 1, prevOOM: oom, prevSteps: r.Steps,
		By: fmt.Sprintf("on_oom, retry %d/%d of run #%d", rt.Attempt+1, rt.Limit, r.ID),
	}
	s.startFollowUp(r, req, fmt.Sprintf("on_oom: the retry with %s=%s", rt.Param, rt.Next), "run restarted after out-of-memory", rt.Param, rt.Next)
}

// startFollowUp starts the run that follows r (an on_oom retry, an
// on_failure resume); one that could not even be recorded is an alert
// about r that names what (a failed start is a failed run, whose end says
// why).
func (s *Supervisor) startFollowUp(r *Run, req StartRequest, what, logMsg string, logArgs ...any) {
	next, err := s.Start(context.Background(), req)
	var startErr *StartError
	switch {
	case err == nil:
		s.log.Info(logMsg, append([]any{"run", r.ID, "next", next.ID}, logArgs...)...)
		return
	case errors.As(err, &startErr):
		return
	}
	s.log.Warn("follow-up run not started", "run", r.ID, "what", what, "err", err)
	s.publish(Event{Kind: EventAlert, Run: r.Clone(), Alert: &Alert{Kind: OutcomeFailed, Text: fmt.Sprintf("%s was not started: %v", what, err)}})
}

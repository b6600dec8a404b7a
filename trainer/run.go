// Package trainer runs and supervises training jobs: it starts a job's
// command as a child process in its own process group, under a lock so that a
// job never runs twice at once, reads the child's output into a run log and
// metric points, stops it gracefully (SIGINT, then SIGTERM, then SIGKILL to
// the whole group), and classifies how the run ended.
//
// The package knows nothing about chat: it publishes Events, and it records
// runs and points through the Recorder interface it declares.
package trainer

import (
	"maps"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// TimedPoint is a metric point with the time its line was written.
type TimedPoint struct {
	logparse.Point
	At time.Time
}

// State is whether a run is still going.
type State string

// Run states.
const (
	StateRunning State = "running"
	StateEnded   State = "ended"
)

// Outcome is how a run ended (or, while it runs, "running").
type Outcome string

// Outcomes. A run that is still going has OutcomeRunning.
const (
	OutcomeRunning     Outcome = "running"
	OutcomeFinished    Outcome = "finished"    // exit status 0
	OutcomeFailed      Outcome = "failed"      // non-zero exit, a signal, or it could not start
	OutcomeOOM         Outcome = "oom"         // out of memory, GPU or host
	OutcomeNaN         Outcome = "nan"         // the loss became NaN or Inf
	OutcomeStalled     Outcome = "stalled"     // no output for stall_after
	OutcomeStopped     Outcome = "stopped"     // a user stopped it
	OutcomeInterrupted Outcome = "interrupted" // trainbot itself died while it ran
)

// Run is one execution of a job.
type Run struct {
	ID         int64
	Job        string
	Params     map[string]string // validated parameter values, as given or defaulted
	Command    []string          // the argv actually executed
	State      State
	Outcome    Outcome
	Detail     string // a human explanation of the outcome
	ExitCode   *int   // nil while running or when killed by a signal
	PID        int    // the child's PID (and its process group id)
	StartedAt  time.Time
	EndedAt    time.Time // zero while running
	LogPath    string
	StartedBy  string
	Origin     string // the chat that started it ("telegram:123"), "" if none
	StoppedBy  string
	Steps      int64 // latest global step seen
	Total      int64 // total steps when the output told, else 0
	Supervisor int   // PID of the trainbot process that supervises the run

	PeakGPUMem  *int64 // bytes; nil when no GPU was sampled
	PeakHostMem *int64 // bytes; nil when not sampled

	// RetryOf is the run this one retries after it ran out of memory
	// (the job's on_oom), 0 if none.
	RetryOf int64
}

// Clone returns a deep copy that the caller may keep.
func (r *Run) Clone() *Run {
	if r == nil {
		return nil
	}
	c := *r
	c.Params = maps.Clone(r.Params)
	c.Command = append([]string(nil), r.Command...)
	if r.ExitCode != nil {
		v := *r.ExitCode
		c.ExitCode = &v
	}
	if r.PeakGPUMem != nil {
		v := *r.PeakGPUMem
		c.PeakGPUMem = &v
	}
	if r.PeakHostMem != nil {
		v := *r.PeakHostMem
		c.PeakHostMem = &v
	}
	return &c
}

// Duration is how long the run ran (until now while it runs).
func (r *Run) Duration(now time.Time) time.Duration {
	if r.EndedAt.IsZero() {
		return now.Sub(r.StartedAt)
	}
	return r.EndedAt.Sub(r.StartedAt)
}

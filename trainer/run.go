// Package trainer runs and supervises training jobs. Each run is owned by
// its own supervisor process (package shim, "trainbot shim"), which starts
// the job's command in its own process group under the job's lock, writes
// its output to the run log and how it ended to a state file, and stops it
// gracefully (SIGINT, then SIGTERM, then SIGKILL to the whole tree). The
// Supervisor here starts runs, observes them through those files (metric
// points, progress, alerts), classifies how they ended, and re-attaches to
// the runs an earlier trainbot left running: the training never depends on
// the bot being alive.
//
// The package knows nothing about chat: it publishes Events, and it records
// runs and points through the Recorder interface it declares.
package trainer

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// TimedPoint is a metric point with the time its line was written.
type TimedPoint struct {
	logparse.Point
	At time.Time
	// Source is where the point was read: where a TensorBoard event file
	// and the output report the same metric at the same step, the event
	// file's point is kept.
	Source Source
}

// Source says where a metric point was read.
type Source uint8

// Sources of points.
const (
	// SourceOutput is the run's output or its metrics file.
	SourceOutput Source = iota
	// SourceOutputBehindEvents is the output, for a metric the run's event
	// files report too: the store drops it where they have its step.
	SourceOutputBehindEvents
	// SourceEvents is a TensorBoard event file: it replaces output points
	// of its metric and step.
	SourceEvents
)

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
	// Ends that are not the script's fault, each with its evidence in
	// the facts: resume them from a checkpoint (on_failure).
	OutcomePreempted   Outcome = "preempted"    // Slurm preempted it (PREEMPTED)
	OutcomeNodeFailure Outcome = "node_failure" // its node failed (Slurm NODE_FAIL)
	OutcomeTimeout     Outcome = "timeout"      // it reached its time limit (Slurm TIMEOUT)
	OutcomeHostReboot  Outcome = "host_reboot"  // the host rebooted while it ran (the boot id changed)
)

// Run is one execution of a job.
type Run struct {
	ID     int64
	Job    string
	Params map[string]string // validated parameter values, as given or defaulted
	// ParamTypes is the declared type of each parameter (the store keeps
	// numbers and booleans as JSON numbers and booleans); nil for runs
	// recorded without them, whose values are strings.
	ParamTypes map[string]ParamType
	// ParamRanges are the declared min and max of the numeric parameters
	// that have one, as the job said when the run started: a memory fit
	// keeps under the max without the config. nil for runs recorded
	// before them.
	ParamRanges map[string]ParamRange
	Command     []string // the argv actually executed
	State       State
	Outcome     Outcome
	Detail      string // a human explanation of the outcome, in the supervisor's English
	// End is how the run ended as facts (the rule that decided, exit code,
	// signal, stderr tail, NaN streak, OOM, who stopped it, the Slurm
	// state, why it is interrupted), from which Detail was made and which
	// a chat words in its language; nil while it runs and for runs
	// recorded before it existed.
	End        *EndFacts
	ExitCode   *int // nil while running or when killed by a signal
	PID        int  // the child's PID (and its process group id)
	StartedAt  time.Time
	EndedAt    time.Time // zero while running
	LogPath    string
	StartedBy  string
	Origin     string // the chat that started it ("telegram:123"), "" if none
	StoppedBy  string
	Steps      int64  // latest global step seen
	Total      int64  // total steps when the output told, else 0
	Supervisor int    // PID of the run's supervisor process (trainbot shim); before runners, of the trainbot process
	Runner     string // what owns the run's processes: "local" (a trainbot shim on this host), "slurm"; "" for runs of trainbot before runners
	SlurmJobID string // the Slurm job of a "slurm" run; "" otherwise (and before sbatch answered)
	Node       string // where a "slurm" run runs (Slurm's NodeList), once it does
	// Host is the [[hosts]] name of the host an "ssh" run runs on, and
	// RemoteDir its directory there; "" for a run on this host.
	Host, RemoteDir string
	// BootID is the host's boot id when a local run started
	// (/proc/sys/kernel/random/boot_id): a run whose supervisor is gone
	// and whose host has another one now ended in a reboot.
	BootID string
	// ResumedFrom is the run this one resumes from its checkpoint (the
	// job's on_failure), 0 if none.
	ResumedFrom int64

	// How far the bot has read the run's log and metrics file: points
	// before are stored. Kept by the Recorder's SetOffsets, in step with
	// the points; UpdateRun does not write them.
	LogOffset, MetricsOffset int64

	PeakGPUMem  *int64 // bytes; nil when no GPU was sampled
	PeakHostMem *int64 // bytes; nil when not sampled
	// PeakHostHow says how PeakHostMem was measured: history.PeakSampled,
	// history.PeakMain, history.PeakTreeSum or history.PeakCgroup.
	PeakHostHow string

	// Note is what the user wrote about the run (开始 … 备注 text, 备注 N
	// text); set by CreateRun and SetNote only.
	Note string

	// RetryOf is the run this one retries after it ran out of memory
	// (the job's on_oom), 0 if none.
	RetryOf int64

	// GPUs are the GPUs the run was given (its job or its start asked for
	// some: gpus, gpu_memory, gpu=), in the order CUDA numbers them for
	// it; nil when it asked for none.
	GPUs []RunGPU
}

// ParamRange is a numeric parameter's declared bounds; nil: none. The
// values are never changed once stored, so a shallow copy is a copy.
type ParamRange struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// Clone returns a deep copy that the caller may keep.
func (r *Run) Clone() *Run {
	if r == nil {
		return nil
	}
	c := *r
	c.Params = maps.Clone(r.Params)
	c.ParamTypes = maps.Clone(r.ParamTypes)
	c.ParamRanges = maps.Clone(r.ParamRanges)
	c.Command = append([]string(nil), r.Command...)
	c.GPUs = slices.Clone(r.GPUs)
	c.End = r.End.clone()
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

// TypedParams is the parameters as JSON values: numbers and booleans per
// their declared type (a value that is not valid as one stays a string).
func (r *Run) TypedParams() map[string]any {
	out := make(map[string]any, len(r.Params))
	for k, v := range r.Params {
		out[k] = typedParam(r.ParamTypes[k], v)
	}
	return out
}

func typedParam(t ParamType, v string) any {
	switch t {
	case ParamInt, ParamFloat:
		if json.Valid([]byte(v)) && strings.TrimLeft(v, "-0123456789.eE+") == "" {
			return json.Number(v)
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case ParamBool:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return v
}

// ParamTypeOf is the type a JSON parameter value was stored as.
func ParamTypeOf(v any) ParamType {
	switch x := v.(type) {
	case bool:
		return ParamBool
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return ParamFloat
		}
		return ParamInt
	}
	return ParamString
}

// Duration is how long the run ran (until now while it runs).
func (r *Run) Duration(now time.Time) time.Duration {
	if r.EndedAt.IsZero() {
		return now.Sub(r.StartedAt)
	}
	return r.EndedAt.Sub(r.StartedAt)
}

package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Knobs on a live run: 存档 sends the job's checkpoint signal and watches
// its checkpoint files for the new one; 调参 writes declared live values to
// the run's control file and sends the control signal. Both reach a local
// run through its shim's control socket ("signal"), a Slurm run through
// scancel --signal; runs on another host, and watched or restored ones,
// refuse with a KnobError that says why.

// Signals are a job's signals ([jobs.signals]).
type Signals struct {
	Stop       syscall.Signal // what a stop sends first; 0: SIGINT
	Checkpoint syscall.Signal // 存档; 0: none (存档 says how to set it)
	Control    syscall.Signal // sent after 调参 wrote the control file; 0: none (the script polls the file)
}

// StopSignals are the signals a job's signals.stop may name.
var StopSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func (s *Signals) normalize() error {
	if s.Stop == 0 {
		s.Stop = syscall.SIGINT
	}
	var errs []error
	if !slices.Contains(StopSignals, s.Stop) {
		errs = append(errs, keyErr("signals.stop", "%s cannot stop a run gracefully: want one of %s", SignalName(int(s.Stop)), signalList(StopSignals)))
	}
	for key, sig := range map[string]syscall.Signal{"signals.checkpoint": s.Checkpoint, "signals.control": s.Control} {
		if sig != 0 && !slices.Contains(shimctl.SignalsAllowed, sig) {
			errs = append(errs, keyErr(key, "%s would stop or harm the run: want one of %s", SignalName(int(sig)), signalList(shimctl.SignalsAllowed)))
		}
	}
	return errors.Join(errs...)
}

// ParseSignal reads a signal's name: "SIGUSR1", "USR1" or "usr1".
func ParseSignal(name string) (syscall.Signal, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig := unix.SignalNum(n)
	return sig, sig != 0
}

func signalList(sigs []syscall.Signal) string {
	names := make([]string, len(sigs))
	for i, s := range sigs {
		names[i] = SignalName(int(s))
	}
	return strings.Join(names, ", ")
}

// EnvControlFile names the run's control file in its environment.
const EnvControlFile = "TRAINBOT_CONTROL_FILE"

// ControlFile is the run's control file in its directory: a
// ControlState, written atomically (a reader never sees half of it).
const ControlFile = "control.json"

// ControlState is the control file: Version counts the changes (1 for the
// first), Values holds every live value set so far, typed (a float is a
// JSON number).
type ControlState struct {
	Version int            `json:"version"`
	Values  map[string]any `json:"values"`
	At      time.Time      `json:"updated_at"`
	By      string         `json:"by,omitempty"`
}

// LiveChange is one 调参 on a run, as recorded (and drawn on its charts).
type LiveChange struct {
	RunID   int64
	Version int               // the control file's version it wrote
	At      time.Time         // when it was written
	Step    int64             // the run's step then
	By      string            // who asked
	Values  map[string]string // the values changed, canonical text
	Signal  syscall.Signal    // the control signal sent after; 0: none
}

// Label is "lr=0.0001 wd=0": the values, sorted by name.
func (c LiveChange) Label() string {
	keys := slices.Sorted(maps.Keys(c.Values))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c.Values[k]
	}
	return strings.Join(parts, " ")
}

// ChangeRecorder is a Recorder that keeps live changes (the store does);
// without one a change is only in the control file and the run's log.
type ChangeRecorder interface {
	// RecordChange stores one live change of a run.
	RecordChange(ctx context.Context, c LiveChange) error
}

// Knob is what a KnobError was about.
type Knob string

// Knobs.
const (
	KnobCheckpoint Knob = "checkpoint"
	KnobControl    Knob = "control"
)

// KnobWhy is why a knob cannot be turned.
type KnobWhy string

// Reasons of KnobErrors.
const (
	KnobNoSignal KnobWhy = "no_signal" // the job has no signals.checkpoint
	KnobNoLive   KnobWhy = "no_live"   // the job declares no live values
	KnobOnHost   KnobWhy = "on_host"   // the run is on another host (Host)
	KnobWatched  KnobWhy = "watched"   // a run trainbot watches but did not start
	KnobNoOwner  KnobWhy = "no_owner"  // nothing trainbot can signal owns the run (restored, orphaned)
	KnobNoSlurm  KnobWhy = "slurm"     // Slurm could not signal it (Detail: why, e.g. still pending)
	KnobNoShim   KnobWhy = "no_shim"   // the run's supervisor did not take the signal (Detail)
)

// KnobError says why 存档 or 调参 cannot reach a run.
type KnobError struct {
	Run    int64
	Job    string
	Knob   Knob
	Why    KnobWhy
	Host   string // KnobOnHost
	Detail string // KnobNoSlurm, KnobNoShim: what was answered
}

func (e *KnobError) Error() string {
	s := fmt.Sprintf("run %d (%s): %s: %s", e.Run, e.Job, e.Knob, e.Why)
	if e.Host != "" {
		s += " " + e.Host
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// signaler is a runner that can send a signal to the run's processes.
type signaler interface {
	signal(sig syscall.Signal, by, why string) error
}

func (r *shimRunner) signal(sig syscall.Signal, by, why string) error {
	_, err := shimctl.Call(r.runDir, shimctl.Request{Op: "signal", Signal: int(sig), By: by, Reason: why}, 2*time.Second)
	return err
}

func (r *slurmRunner) signal(sig syscall.Signal, _, _ string) error {
	return r.cancelJob(strings.TrimPrefix(SignalName(int(sig)), "SIG"))
}

// reach is the runner that signals run a's processes, or why there is
// none (a *KnobError for knob): told before anything else, so that a run
// on a host is not first told to configure what it could not use.
func (a *active) reach(knob Knob) (signaler, error) {
	a.mu.Lock()
	id, host := a.run.ID, a.run.Host
	a.mu.Unlock()
	kerr := &KnobError{Run: id, Job: a.job.Name, Knob: knob}
	switch r := a.runner.(type) {
	case *remoteRunner:
		kerr.Why, kerr.Host = KnobOnHost, host
	case *watchRunner:
		kerr.Why = KnobWatched
	case signaler:
		return r, nil
	default:
		kerr.Why = KnobNoOwner
	}
	return nil, kerr
}

// sendSignal sends sig to run a's processes, for knob.
func (a *active) sendSignal(knob Knob, sig syscall.Signal, by string) error {
	r, err := a.reach(knob)
	if err != nil {
		return err
	}
	if err := r.signal(sig, by, string(knob)); err != nil {
		kerr := &KnobError{Run: a.run.ID, Job: a.job.Name, Knob: knob, Why: KnobNoShim, Detail: err.Error()}
		if _, ok := r.(*slurmRunner); ok {
			kerr.Why = KnobNoSlurm
		}
		return kerr
	}
	a.log.Info("signal sent", "knob", knob, "signal", SignalName(int(sig)), "by", by)
	return nil
}

// CheckpointPoll is how often 存档 looks for the new checkpoint file.
const CheckpointPoll = 250 * time.Millisecond

// CheckpointResult is what 存档 found: the new file within the wait
// (Path "" when none appeared).
type CheckpointResult struct {
	Path   string        // the new checkpoint file
	Size   int64         // its size when found
	Done   bool          // it has its .done marker
	Took   time.Duration // from the signal to the file found
	Waited time.Duration // how long it was looked for, when not found
}

// CheckpointAsk is a checkpoint signal sent: Wait looks for the file it
// makes.
type CheckpointAsk struct {
	Run     *Run
	Signal  syscall.Signal
	Pattern string // the job's checkpoint key; "": nothing to look for
	dir     string
	before  string // the newest file before the signal, and its time
	mod     time.Time
	sent    time.Time
}

// Checkpoint sends run runID (0: the only active run) the job's
// signals.checkpoint; the answer's Wait looks for the new file. Errors:
// ErrNotRunning, ErrAmbiguous, *KnobError.
func (s *Supervisor) Checkpoint(ctx context.Context, runID int64, by string) (*CheckpointAsk, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	if _, err := a.reach(KnobCheckpoint); err != nil {
		return nil, err
	}
	a.mu.Lock()
	run := a.run.Clone()
	a.mu.Unlock()
	sig := a.job.Signals.Checkpoint
	if sig == 0 {
		return nil, &KnobError{Run: run.ID, Job: a.job.Name, Knob: KnobCheckpoint, Why: KnobNoSignal}
	}
	ask := &CheckpointAsk{Run: run, Signal: sig, Pattern: a.job.Checkpoint, dir: a.job.Dir}
	if ask.Pattern != "" {
		ask.before, ask.mod, _ = NewestCheckpoint(ask.dir, ask.Pattern, 0, time.Now())
	}
	ask.sent = time.Now()
	if err := a.sendSignal(KnobCheckpoint, sig, by); err != nil {
		return nil, err
	}
	return ask, nil
}

// Wait looks every CheckpointPoll, up to wait or until ctx ends, for a
// file of the job's checkpoint key newer than the newest before the
// signal (as soon as it appears: complete or not).
func (c *CheckpointAsk) Wait(ctx context.Context, wait time.Duration) CheckpointResult {
	if c.Pattern == "" {
		return CheckpointResult{}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(CheckpointPoll)
	defer tick.Stop()
	for {
		p, mod, err := NewestCheckpoint(c.dir, c.Pattern, 0, time.Now())
		if err == nil && (p != c.before || mod.After(c.mod)) {
			res := CheckpointResult{Path: p, Took: time.Since(c.sent), Done: checkpointDone(p)}
			if st, err := os.Stat(p); err == nil {
				res.Size = st.Size()
			}
			return res
		}
		select {
		case <-ctx.Done():
			return CheckpointResult{Waited: time.Since(c.sent)}
		case <-deadline.C:
			return CheckpointResult{Waited: time.Since(c.sent)}
		case <-tick.C:
		}
	}
}

// ResolveLive checks 调参's values against the job's live declarations
// and returns their canonical text; errors are *ParamError, joined.
func (j *Job) ResolveLive(given map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(given))
	var errs []error
	names := slices.Sorted(maps.Keys(j.Live))
	for _, k := range slices.Sorted(maps.Keys(given)) {
		spec, ok := j.Live[k]
		if !ok {
			reason := "is not a live value of " + j.Name + "; it declares " + strings.Join(names, ", ")
			errs = append(errs, &ParamError{Job: j.Name, Param: k, Value: given[k], Given: true, Reason: reason, Problem: ParamUnknown, Limit: strings.Join(names, ", ")})
			continue
		}
		v, err := spec.canonical(given[k])
		if err != nil {
			// A live value is never required: its spec without the word.
			desc := strings.TrimSuffix(spec.Describe(), ", required")
			pe := &ParamError{Job: j.Name, Param: k, Value: given[k], Given: true, Reason: "is " + err.Error() + " (" + desc + ")", Spec: desc}
			if ve := (*valueError)(nil); errors.As(err, &ve) {
				pe.Problem, pe.Limit = ve.problem, ve.limit
			}
			errs = append(errs, pe)
			continue
		}
		out[k] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...) // each wraps ErrBadParam
	}
	return out, nil
}

// LiveNames are the job's live values, sorted.
func (j *Job) LiveNames() []string { return slices.Sorted(maps.Keys(j.Live)) }

// SetLive validates values against the job's live declarations, writes
// them to run runID's control file (0: the only active run), sends the
// job's signals.control if set, and records the change. Errors:
// ErrNotRunning, ErrAmbiguous, ErrBadParam (with *ParamError),
// *KnobError.
func (s *Supervisor) SetLive(ctx context.Context, runID int64, values map[string]string, by string) (*LiveChange, error) {
	a, err := s.find(runID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	id, step := a.run.ID, a.run.Steps
	a.mu.Unlock()
	// Refused before the file changes: a run on a host, or watched, has
	// no control file this trainbot writes.
	if _, err := a.reach(KnobControl); err != nil {
		return nil, err
	}
	if len(a.job.Live) == 0 {
		return nil, &KnobError{Run: id, Job: a.job.Name, Knob: KnobControl, Why: KnobNoLive}
	}
	canon, err := a.job.ResolveLive(values)
	if err != nil {
		return nil, err
	}
	a.knobMu.Lock()
	defer a.knobMu.Unlock()
	path := filepath.Join(a.runDir, ControlFile)
	st := ControlState{Values: map[string]any{}}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil || st.Values == nil {
			st = ControlState{Values: map[string]any{}}
		}
	}
	for k, v := range canon {
		st.Values[k] = typedParam(a.job.Live[k].Type, v)
	}
	st.Version++
	st.At, st.By = time.Now(), by
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("write the control file of run %d: %w", id, err)
	}
	ch := &LiveChange{RunID: id, Version: st.Version, At: st.At, Step: step, By: by, Values: canon, Signal: a.job.Signals.Control}
	a.log.Info("live values set", "values", ch.Label(), "version", st.Version, "by", by)
	if cr, ok := s.opts.Recorder.(ChangeRecorder); ok {
		if err := cr.RecordChange(context.WithoutCancel(ctx), *ch); err != nil {
			a.log.Warn("record the live change", "err", err)
		}
	}
	if sig := a.job.Signals.Control; sig != 0 {
		if err := a.sendSignal(KnobControl, sig, by); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

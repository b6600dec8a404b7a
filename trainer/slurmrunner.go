package trainer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer/slurm"
)

// RunnerSlurm is the runner of runs submitted to a Slurm cluster with sbatch.
const RunnerSlurm = "slurm"

// How often a Slurm run's state is asked of the controller (one scontrol
// call each): soon after submission and after a stop, so that the start and
// the end show quickly; then every slurmEvery while it runs, slurmPendingEvery
// while it waits in the queue. The run's progress comes from its output
// file, read as often as a local run's; Slurm is asked only how it is.
const (
	slurmSoon         = time.Second
	slurmEvery        = 5 * time.Second
	slurmPendingEvery = 10 * time.Second
	slurmSoonPolls    = 3 // polls at slurmSoon after submission
	// slurmNoOutputAfter: a job RUNNING this long without its output file
	// on this host writes it where trainbot cannot read it.
	slurmNoOutputAfter = time.Minute
	// slurmUnknownPolls: answers in a row that Slurm does not know the job
	// before the run counts as interrupted.
	slurmUnknownPolls = 3
)

// SlurmStopFile is where the stop of a Slurm run is recorded in its run
// directory, so that a trainbot that re-attaches knows the end was asked
// for (and by whom) rather than "cancelled outside trainbot".
const SlurmStopFile = "slurm-stop.json"

// slurmStop is what SlurmStopFile holds.
type slurmStop struct {
	By        string    `json:"by"`
	Reason    Outcome   `json:"reason"`
	At        time.Time `json:"at"`
	Cancelled bool      `json:"cancelled"` // a plain scancel was sent (after the grace, a kill, or while pending)
}

// SlurmCalls counts the calls this process made to Slurm's commands while
// watching and stopping runs (bench and the cost figure in docs/slurm.md).
var SlurmCalls atomic.Int64

// slurmRunner watches a run's Slurm job with scontrol (sacct once scontrol
// forgets it), stops it with scancel, and reads its end from Slurm's state.
// The job's lock is held by the trainbot that observes the run: Slurm owns
// the processes, and the lock is trainbot's own.
type slurmRunner struct {
	id      string
	runDir  string
	logPath string
	grace   time.Duration // the job's stop_grace: after the stop signal, a plain cancel
	stopSig string        // the job's signals.stop as scancel names it ("INT")
	lock    *fileLock     // the job's lock; nil when another process holds it
	log     *slog.Logger

	query  func(ctx context.Context, id string) (slurm.Job, error)
	cancel func(ctx context.Context, id, signal string, batchOnly bool) error

	polls   int
	next    time.Time
	job     slurm.Job // Slurm's last answer
	known   bool
	unknown int // ErrUnknownJob answers in a row
	lastErr string
	stopRec *slurmStop
	warned  bool // the no-output warning was given
	goneWhy string
}

func newSlurmRunner(a *active, lock *fileLock) *slurmRunner {
	r := &slurmRunner{id: a.run.SlurmJobID, runDir: a.runDir, logPath: a.run.LogPath, grace: a.job.StopGrace,
		stopSig: strings.TrimPrefix(SignalName(int(cmp.Or(a.job.Signals.Stop, syscall.SIGINT))), "SIG"),
		lock:    lock, log: a.log, query: slurm.Query, cancel: slurm.Cancel}
	if data, err := os.ReadFile(filepath.Join(a.runDir, SlurmStopFile)); err == nil {
		var st slurmStop
		if json.Unmarshal(data, &st) == nil && st.By != "" {
			r.stopRec = &st
		}
	}
	return r
}

func (r *slurmRunner) poll(now time.Time) (*runEnd, runLive, bool) {
	if r.stopRec != nil && !r.stopRec.Cancelled && now.Sub(r.stopRec.At) >= r.grace && r.known && !r.ended() {
		// The SIGINT's grace is over: Slurm's own cancel (SIGTERM to
		// every process of the job, SIGKILL after the cluster's KillWait).
		if err := r.cancelJob(""); err != nil {
			r.log.Warn("cancel the Slurm job after stop_grace", "job", r.id, "err", err)
		} else {
			r.log.Info("stop_grace is over: Slurm job cancelled", "job", r.id, "grace", r.grace)
			r.stopRec.Cancelled = true
			r.saveStop()
		}
		r.next = now
	}
	if now.Before(r.next) {
		return nil, r.live(now), false
	}
	r.polls++
	ctx, cancel := context.WithTimeout(context.Background(), slurm.CallTimeout)
	j, err := r.query(ctx, r.id)
	cancel()
	SlurmCalls.Add(1)
	r.next = now.Add(r.every())
	if err != nil {
		if errors.Is(err, slurm.ErrUnknownJob) {
			r.unknown++
			if r.unknown >= slurmUnknownPolls {
				r.goneWhy = err.Error()
				return nil, r.live(now), true
			}
			return nil, r.live(now), false
		}
		if msg := err.Error(); msg != r.lastErr {
			r.lastErr = msg
			r.log.Warn("ask Slurm how the run is", "job", r.id, "err", err)
		}
		return nil, r.live(now), false
	}
	r.unknown, r.lastErr = 0, ""
	r.job, r.known = j, true
	if outcome, _ := slurm.Classify(j); outcome != "" {
		return r.end(j, outcome), r.live(now), false
	}
	live := r.live(now)
	if j.State == "RUNNING" && !r.warned && !j.Start.IsZero() && now.Sub(j.Start) >= slurmNoOutputAfter {
		if _, err := os.Stat(r.logPath); errors.Is(err, os.ErrNotExist) {
			r.warned = true
			live.warn = fmt.Sprintf("Slurm says job %s has been RUNNING on %s for %s, but its output file %s has not appeared here: "+
				"the data directory must be on a filesystem that the compute nodes share (NFS, Lustre, …), "+
				"or trainbot cannot read the run's output (see docs/slurm.md)",
				r.id, nodeOr(j.Node), now.Sub(j.Start).Round(time.Second), r.logPath)
		}
	}
	return nil, live, false
}

// every is the time to the next question to Slurm.
func (r *slurmRunner) every() time.Duration {
	switch {
	case r.polls < slurmSoonPolls || (r.stopRec != nil && !r.ended()):
		return slurmSoon
	case r.known && r.job.State == "PENDING":
		return slurmPendingEvery
	}
	return slurmEvery
}

func (r *slurmRunner) ended() bool {
	o, _ := slurm.Classify(r.job)
	return o != ""
}

// live is what is known of the run between two answers of Slurm.
func (r *slurmRunner) live(now time.Time) runLive {
	var l runLive
	if !r.known {
		l.lastOutput = now // not started as far as we know: no stall
		return l
	}
	j := r.job
	if j.State == "PENDING" || j.Node == "" {
		reason := j.Reason
		if reason == "" {
			reason = "none"
		}
		l.waiting = fmt.Sprintf("queued in Slurm (job %s, reason: %s", r.id, reason)
		if j.Partition != "" {
			l.waiting += ", partition " + j.Partition
		}
		l.waiting += ")"
		if j.State != "PENDING" {
			l.waiting = fmt.Sprintf("in Slurm state %s (job %s)", j.State, r.id)
		}
		l.lastOutput = now // waiting is not stalling
		return l
	}
	l.node = j.Node
	if j.State != "RUNNING" {
		l.waiting = fmt.Sprintf("in Slurm state %s (job %s on %s)", j.State, r.id, j.Node)
	}
	l.lastOutput = j.Start
	if fi, err := os.Stat(r.logPath); err == nil && fi.ModTime().After(l.lastOutput) {
		l.lastOutput = fi.ModTime()
	}
	return l
}

func nodeOr(n string) string {
	if n == "" {
		return "its node"
	}
	return n
}

// end says how the job ended. An exit status (COMPLETED, FAILED with an
// exit code) and any end after a stop asked of trainbot are classified like
// a local run's, with what the output said (out of memory, a NaN loss);
// Slurm's other states decide themselves (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY,
// PREEMPTED, ...). The job as Slurm told it is in the facts either way.
func (r *slurmRunner) end(j slurm.Job, outcome string) *runEnd {
	end := &runEnd{e: ending{exitCode: -1, oomKills: -1}, endedAt: j.End,
		slurm: &SlurmEnd{JobID: r.id, State: j.State, Reason: j.Reason, Node: j.Node, TimeLimit: j.TimeLimit}}
	if end.endedAt.IsZero() {
		end.endedAt = time.Now()
	}
	e := &end.e
	if j.Signal != 0 {
		e.signal = syscall.Signal(j.Signal)
	} else {
		e.exitCode = j.ExitCode
	}
	if s := r.stopRec; s != nil && j.State != "OUT_OF_MEMORY" {
		e.stopBy, e.stopReason = s.By, s.Reason
		if e.stopReason == "" {
			e.stopReason = OutcomeStopped
		}
		e.sentKill = s.Cancelled
		if j.State == "CANCELLED" && e.stopReason != OutcomeNaN {
			end.outcome = OutcomeStopped
			end.facts = &EndFacts{Why: WhyStopped, StoppedBy: s.By, StopHow: StopSlurmCancel, Signal: j.Signal, Slurm: end.slurm}
		}
		return end
	}
	if j.State == "COMPLETED" || j.State == "FAILED" && j.Signal == 0 {
		return end // an exit status: classified like a local run's
	}
	// Slurm's state decides (CANCELLED here: outside trainbot).
	end.outcome = Outcome(outcome)
	if j.State == "OUT_OF_MEMORY" {
		// The node's memory cgroup killed it: host memory, as the
		// kernel's OOM killer does.
		end.oom = &OOM{Kind: "oom-killer", Line: "Slurm state OUT_OF_MEMORY", GPU: -1, FreeBytes: -1}
	}
	if j.Signal != 0 || j.State != "FAILED" {
		e.exitCode = -1 // no exit status to record
	}
	end.facts = &EndFacts{Why: WhySlurm, Signal: j.Signal, Slurm: end.slurm}
	return end
}

func (r *slurmRunner) stop(req stopRequest) error {
	if r.stopRec != nil && r.stopRec.Cancelled {
		return nil // nothing more to send: Slurm ends the job
	}
	now := time.Now()
	rec := slurmStop{By: req.by, Reason: req.reason, At: now}
	if r.stopRec != nil {
		rec = *r.stopRec
	}
	var err error
	switch {
	case req.kill || r.stopRec != nil:
		err = r.cancelJob("")
		rec.Cancelled = true
	default:
		// SIGINT to the training process and everything it started,
		// as a local run's process group gets it.
		err = r.cancelJob(r.stopSig)
		if errors.Is(err, slurm.ErrNotRunning) {
			// Pending (or already ending): a signal cannot reach it.
			err = r.cancelJob("")
			rec.Cancelled = true
		}
	}
	if err != nil {
		return err
	}
	r.stopRec = &rec
	r.saveStop()
	r.next = now.Add(slurmSoon)
	return nil
}

func (r *slurmRunner) cancelJob(signal string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*slurm.CallTimeout)
	defer cancel()
	SlurmCalls.Add(1)
	if signal != "" {
		SlurmCalls.Add(1) // Cancel asks for the state first
	}
	return r.cancel(ctx, r.id, signal, false)
}

// saveStop records the stop in the run directory; a trainbot that
// re-attaches reads it.
func (r *slurmRunner) saveStop() {
	data, err := json.Marshal(r.stopRec)
	if err == nil {
		err = writeFileAtomic(filepath.Join(r.runDir, SlurmStopFile), data)
	}
	if err != nil {
		r.log.Warn("record the stop of the Slurm job", "err", err)
	}
}

func (r *slurmRunner) gone() (*EndFacts, time.Time) {
	s := &SlurmEnd{JobID: r.id, Error: r.goneWhy}
	if r.known { // what it said before it forgot the job
		s.State, s.Reason, s.Node, s.TimeLimit = r.job.State, r.job.Reason, r.job.Node, r.job.TimeLimit
	}
	return &EndFacts{Why: WhyInterrupted, Interrupted: InterruptSlurmForgot, Slurm: s}, time.Time{}
}

func (r *slurmRunner) done() { r.lock.release() }

// writeFileAtomic writes a small file through a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

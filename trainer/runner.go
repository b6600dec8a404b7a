package trainer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer/shim"
)

// runner is what the bot needs of whatever owns a run's processes: the
// run's supervisor process on this host (trainbot shim), or Slurm. The
// observer polls it, forwards stops to it, and records the end it tells.
type runner interface {
	// poll says how the run is. end is set once the run has ended and
	// everything it wrote is in its log; gone is true when the owner
	// vanished without saying how the run ended.
	poll(now time.Time) (end *runEnd, live runLive, gone bool)
	// stop forwards a stop, or a kill with req.kill; an error means it
	// did not reach the owner, and the observer asks again later.
	stop(req stopRequest) error
	// goneDetail says what is known of a run whose owner vanished.
	goneDetail() string
	// done is called once the end is recorded.
	done()
}

// runLive is what a poll tells of a run that goes on.
type runLive struct {
	lastOutput time.Time // when it last printed; zero when not known
	dropped    int64     // output bytes that could not be written to the log
	waiting    string    // the run waits, e.g. "queued in Slurm (job 42, reason: Resources, partition gpu)"; "" when it runs
	node       string    // where it runs, when not on this host
	warn       string    // a warning to raise once, as a stalled alert
}

// runEnd is how a run ended, as its owner tells it.
type runEnd struct {
	e       ending    // classified with what the bot saw (out of memory, NaN, stops)
	outcome Outcome   // set when the owner decided the outcome; "" to classify e
	detail  string    // with outcome
	endedAt time.Time // when its main process ended
	extra   []string  // notes for the end's detail
	oom     *OOM      // the owner says it ran out of memory (Slurm's OUT_OF_MEMORY); the output's OOM comes first
	logCut  bool      // max_log_bytes freed part of the log
	maxRSS  int64     // the main process's high-water mark of resident memory (wait4), bytes; 0 unknown
}

// shimRunner is the local runner: the run's trainbot shim, reached on its
// control socket, and its state.json once it has ended.
type shimRunner struct {
	runDir    string
	shimPID   int
	startedAt time.Time
	pid       int          // the main process, its process group id
	maxLog    int64        // the job's max_log_bytes, for the end's detail
	handle    *shim.Handle // the shim this trainbot started (to reap); nil when attached to an earlier one
	asked     string       // the by of the first stop this runner sent: the one the shim records from this process
	log       *slog.Logger
	down      time.Time // when the shim stopped answering; zero while it answers
}

// shimGoneWait is how long a shim that neither answers nor lives is waited
// for before the run counts as interrupted.
const shimGoneWait = 3 * time.Second

func (r *shimRunner) poll(now time.Time) (*runEnd, runLive, bool) {
	resp, err := shim.Call(r.runDir, shim.Request{Op: "status"}, 2*time.Second)
	if err == nil && resp.State != nil {
		r.down = time.Time{}
		live := runLive{lastOutput: resp.State.LastOutput, dropped: resp.State.BytesDropped}
		if resp.State.Ended {
			return r.end(resp.State), live, false
		}
		return nil, live, false
	}
	// No answer: the shim has ended (its state file says how), is busy,
	// or died.
	if st, ferr := shim.ReadState(r.runDir); ferr == nil && st.Ended {
		return r.end(st), runLive{dropped: st.BytesDropped}, false
	}
	if r.shimPID > 0 && processStartedBefore(r.shimPID, r.startedAt.Add(time.Minute)) {
		r.down = time.Time{}
		return nil, runLive{}, false // alive: it will answer
	}
	if r.down.IsZero() {
		r.down = now
		r.log.Warn("the run's supervisor does not answer", "pid", r.shimPID, "err", err)
	}
	return nil, runLive{}, now.Sub(r.down) >= shimGoneWait
}

// end reads how the run ended from the shim's state.
func (r *shimRunner) end(st *shim.State) *runEnd {
	end := &runEnd{e: ending{exitCode: -1, oomKills: st.OOMKills, stderrTail: st.StderrTail}, endedAt: st.EndedAt, maxRSS: st.MaxRSS}
	if end.endedAt.IsZero() {
		end.endedAt = time.Now()
	}
	e := &end.e
	switch {
	case st.StartError != "":
		e.startErr = errors.New(st.StartError)
	case st.ExitCode != nil:
		e.exitCode = *st.ExitCode
	case st.Signal != 0:
		e.signal = syscall.Signal(st.Signal)
	}
	if s := st.Stop; s != nil {
		var vouched bool
		e.stopBy, vouched = r.stopBy(s)
		e.stopReason = OutcomeStopped
		if vouched && s.Reason == string(OutcomeNaN) {
			e.stopReason = OutcomeNaN
		}
		e.sentKill, e.killedNow = s.SentKill, vouched && s.KilledNow
	}
	if st.BytesDropped > 0 {
		reason := st.DropReason
		if reason == "" {
			reason = "the disk did not keep up"
		}
		end.extra = append(end.extra, fmt.Sprintf("%s of output were not written to the log (%s)", units.Bytes(st.BytesDropped), reason))
	}
	if st.FreedTo > st.FreedFrom {
		end.logCut = true
		end.extra = append(end.extra, fmt.Sprintf("the log passed max_log_bytes (%s): %s of older output after its first %s were freed", units.Bytes(r.maxLog), units.Bytes(st.FreedTo-st.FreedFrom), units.Bytes(st.FreedFrom)))
	}
	if st.Survivors > 0 {
		end.extra = append(end.extra, fmt.Sprintf("%d process(es) of the run survived SIGKILL", st.Survivors))
	}
	return end
}

func (r *shimRunner) stop(req stopRequest) error {
	if r.asked == "" {
		r.asked = req.by // before the call: a stop the shim took but did not answer is this one too
	}
	op := "stop"
	if req.kill {
		op = "kill"
	}
	resp, err := shim.Call(r.runDir, shim.Request{Op: op, By: req.by, Reason: string(req.reason)}, 2*time.Second)
	if err == nil && !resp.OK {
		err = errors.New(resp.Error)
	}
	return err
}

func (r *shimRunner) goneDetail() string {
	d := fmt.Sprintf("the run's supervisor (pid %d) ended without recording how the run ended", r.shimPID)
	if r.pid > 0 && syscall.Kill(-r.pid, 0) == nil && processStartedBefore(r.pid, r.startedAt.Add(time.Minute)) {
		d += fmt.Sprintf("; its process group %d is still alive, unsupervised", r.pid)
	}
	return d
}

func (r *shimRunner) done() {
	if r.handle != nil {
		if err := r.handle.Wait(); err != nil {
			r.log.Debug("run supervisor exit", "err", err)
		}
	}
}

// newShimRunner is the runner of an observed local run; h is the shim this
// trainbot started, nil for one an earlier trainbot started.
func newShimRunner(a *active, h *shim.Handle) *shimRunner {
	return &shimRunner{runDir: a.runDir, shimPID: a.run.Supervisor, startedAt: a.run.StartedAt, pid: a.run.PID,
		maxLog: a.job.MaxLogBytes, handle: h, log: a.log}
}

// stopBy is who stopped the run, as far as this trainbot can vouch for it,
// and whether it is vouched for (then its reason, and a kill at
// shutdown are trainbot's too): the by of the stop this runner sent when
// the shim took the stop from this process; the shim's own words for a
// stop it took by a signal (or the by of a shim from before peers were
// recorded); else the process that sent it on the socket, whatever it
// said it was.
func (r *shimRunner) stopBy(s *shim.StopInfo) (by string, vouched bool) {
	switch p := s.Peer; {
	case p == nil:
		return s.By, true
	case p.PID == os.Getpid() && r.asked != "":
		return r.asked, true
	default:
		who := fmt.Sprintf("uid %d", p.UID)
		if p.Comm != "" {
			who = quoteOdd(p.Comm) + ", " + who
		}
		return fmt.Sprintf("a request on the run's control socket from pid %d (%s)", p.PID, who), false
	}
}

// quoteOdd quotes s when it is not plain printable text (a process names
// itself).
func quoteOdd(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

package trainer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/trainer/shimctl"
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
	// gone says what is known of a run whose owner vanished (facts with
	// WhyInterrupted), and when it ended as far as the runner knows
	// (zero: it cannot tell).
	gone() (*EndFacts, time.Time)
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
	// unsupervised is set once, when the run's supervisor died and
	// processes of the run live on.
	unsupervised *Unsupervised
}

// runEnd is how a run ended, as its owner tells it.
type runEnd struct {
	e       ending    // classified with what the bot saw (out of memory, NaN, stops)
	outcome Outcome   // set when the owner decided the outcome; "" to classify e
	facts   *EndFacts // with outcome: how the owner decided (nil for an end recorded before facts)
	slurm   *SlurmEnd // a Slurm run's job as Slurm told its end: in the facts however they were decided
	endedAt time.Time // when its main process ended
	notes   EndNotes  // what the owner says beside the end (output dropped, the log cut, survivors)
	oom     *OOM      // the owner says it ran out of memory (Slurm's OUT_OF_MEMORY); the output's OOM comes first
	maxRSS  int64     // the main process's high-water mark of resident memory (wait4), bytes; 0 unknown
}

// shimRunner is the local runner: the run's trainbot shim, reached on its
// control socket, and its state.json once it has ended.
type shimRunner struct {
	runDir    string
	shimPID   int
	startedAt time.Time
	pid       int             // the main process, its process group id
	maxLog    int64           // the job's max_log_bytes, for the end's facts
	handle    *shimctl.Handle // the shim this trainbot started (to reap); nil when attached to an earlier one
	asked     string          // the by of the first stop this runner sent: the one the shim records from this process
	log       *slog.Logger
	down      time.Time // when the shim was found gone; zero while it answers or lives
	unknown   time.Time // when the shim's liveness could first not be told; zero otherwise

	// The shim died and processes of the run live on (orphaned): the
	// bot holds the job's lock for them until they are gone, and stops
	// them itself.
	lockPath   string // the job's lock file
	lockName   string
	stopGrace  time.Duration
	killGrace  time.Duration
	orphaned   time.Time // when the shim was found dead with the run alive; zero otherwise
	orphanLock *fileLock
	lastAlive  time.Time // the run last seen alive by this trainbot (its shim answered, or its orphans lived)
	goneAt     time.Time // when it ended, as far as this trainbot saw; zero when it never saw it alive
	nextLook   time.Time
	orphanStop orphanStop
}

// shimGoneWait is how long a shim that neither answers nor lives is waited
// for before its run's processes are looked for.
const shimGoneWait = 3 * time.Second

// orphanLook is how often the processes of an orphaned run are looked for.
const orphanLook = time.Second

func (r *shimRunner) poll(now time.Time) (*runEnd, runLive, bool) {
	if !r.orphaned.IsZero() {
		return r.pollOrphan(now)
	}
	resp, err := shimctl.Call(r.runDir, shimctl.Request{Op: "status"}, 2*time.Second)
	if err == nil && resp.State != nil {
		r.down, r.unknown, r.lastAlive = time.Time{}, time.Time{}, now
		live := runLive{lastOutput: resp.State.LastOutput, dropped: resp.State.BytesDropped}
		if resp.State.Ended {
			return r.end(resp.State), live, false
		}
		return nil, live, false
	}
	// No answer: the shim has ended (its state file says how), is busy,
	// cannot be reached (descriptors exhausted), or died.
	if st, ferr := shimctl.ReadState(r.runDir); ferr == nil && st.Ended {
		return r.end(st), runLive{dropped: st.BytesDropped}, false
	}
	switch processLiveness(r.shimPID, r.startedAt.Add(time.Minute)) {
	case processAlive:
		r.down, r.unknown, r.lastAlive = time.Time{}, time.Time{}, now
		return nil, runLive{}, false // alive: it will answer
	case livenessUnknown:
		// Unknown is not dead: the run goes on as running, and is
		// looked at again.
		if r.unknown.IsZero() {
			r.unknown = now
			r.log.Warn("cannot tell whether the run's supervisor lives; the run stays running and is looked at again", "pid", r.shimPID, "err", err)
		}
		return nil, runLive{}, false
	}
	if r.down.IsZero() {
		r.down = now
		r.log.Warn("the run's supervisor is gone", "pid", r.shimPID, "err", err)
	}
	if now.Sub(r.down) < shimGoneWait {
		return nil, runLive{}, false
	}
	// The shim is gone without recording an end. Is anything of the run
	// left?
	pids, known := runProcesses(r.runDir, r.pid)
	if !known {
		return nil, runLive{}, false
	}
	if len(pids) == 0 {
		// It ended with its supervisor, or after: when exactly is not
		// known; the last time it was seen alive is.
		r.goneAt = r.lastAlive
		return nil, runLive{}, true
	}
	r.orphaned, r.lastAlive, r.nextLook = now, now, now.Add(orphanLook)
	r.holdLock()
	r.log.Warn("the run's supervisor died; processes of the run live on unsupervised", "supervisor", r.shimPID, "pgid", r.pid, "processes", len(pids))
	return nil, runLive{unsupervised: &Unsupervised{SupervisorPID: r.shimPID, PGID: r.pid, Processes: len(pids)}}, false
}

// holdLock takes the job's lock again for the orphaned processes of the
// run: it went with the shim, and no second run of the lock may start
// while they live (a trainbot that comes later finds them the same way).
func (r *shimRunner) holdLock() {
	if r.lockPath == "" || r.orphanLock != nil {
		return
	}
	l, err := acquireLock(r.lockPath)
	if err != nil {
		r.log.Warn("take the job's lock for the orphaned run", "lock", r.lockName, "err", err)
		return
	}
	l.describe(lockHolder{Run: runIDOf(r.runDir), RunDir: r.runDir, PGID: r.pid,
		What: fmt.Sprintf("the orphaned process group %d of run #%d (its supervisor pid %d died), watched by trainbot pid %d", r.pid, runIDOf(r.runDir), r.shimPID, os.Getpid())})
	r.orphanLock = l
}

// pollOrphan looks, once a second, whether processes of an orphaned run
// are still alive, and escalates a stop asked of them.
func (r *shimRunner) pollOrphan(now time.Time) (*runEnd, runLive, bool) {
	if now.Before(r.nextLook) {
		return nil, runLive{}, false
	}
	r.nextLook = now.Add(orphanLook)
	pids, known := runProcesses(r.runDir, r.pid)
	if !known {
		return nil, runLive{}, false
	}
	if len(pids) == 0 {
		r.goneAt = now
		return nil, runLive{}, true
	}
	r.lastAlive = now
	if sig := r.orphanStop.next(now, r.stopGrace, r.killGrace); sig != 0 {
		r.signalOrphans(sig)
	}
	return nil, runLive{}, false
}

// orphanStop is a stop asked of the orphaned processes of a run (its
// supervisor died): who asked, when, and the signals sent so far.
type orphanStop struct {
	by      string
	at      time.Time
	signals int            // 1 the stop signal, 2 SIGTERM, 3 SIGKILL
	first   syscall.Signal // the job's signals.stop; 0: SIGINT
}

func (o *orphanStop) firstSignal() syscall.Signal {
	if o.first == 0 {
		return syscall.SIGINT
	}
	return o.first
}

// ask takes a stop: a kill is SIGKILL now, a first stop the job's stop
// signal (SIGINT); signal sends one (and calls sent when it did).
func (o *orphanStop) ask(req stopRequest, signal func(syscall.Signal)) {
	if o.by == "" {
		o.by, o.at = req.by, time.Now()
	}
	switch {
	case req.kill:
		signal(syscall.SIGKILL)
	case o.signals == 0:
		signal(o.firstSignal())
	}
}

// next is the signal due now (SIGTERM after the stop grace, SIGKILL after
// the kill grace too), 0 when none is.
func (o *orphanStop) next(now time.Time, stopGrace, killGrace time.Duration) syscall.Signal {
	switch {
	case o.signals == 1 && now.Sub(o.at) >= stopGrace:
		return syscall.SIGTERM
	case o.signals == 2 && now.Sub(o.at) >= stopGrace+killGrace:
		return syscall.SIGKILL
	}
	return 0
}

// sent records a signal sent.
func (o *orphanStop) sent(sig syscall.Signal) {
	stage := map[syscall.Signal]int{syscall.SIGTERM: 2, syscall.SIGKILL: 3}[sig]
	if stage == 0 && sig == o.firstSignal() {
		stage = 1
	}
	o.signals = max(o.signals, stage)
}

// facts are the orphans' part of the run's end.
func (o *orphanStop) facts(pgid int, until time.Time) *Orphans {
	f := &Orphans{PGID: pgid, Until: until}
	if o.by != "" {
		f.StoppedBy, f.Signal = o.by, int([]syscall.Signal{0, o.firstSignal(), syscall.SIGTERM, syscall.SIGKILL}[o.signals])
	}
	return f
}

// signalOrphans sends sig to the run's process group and to every process
// that carries the run's directory in its environment.
func (r *shimRunner) signalOrphans(sig syscall.Signal) {
	if r.pid > 0 {
		syscall.Kill(-r.pid, sig)
	}
	pids, _ := runProcesses(r.runDir, 0)
	for _, p := range pids {
		syscall.Kill(p, sig)
	}
	r.orphanStop.sent(sig)
	r.log.Info("signalled the orphaned run", "signal", unix.SignalName(sig), "pgid", r.pid, "others", len(pids))
}

// end reads how the run ended from the shim's state.
func (r *shimRunner) end(st *shimctl.State) *runEnd {
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
		end.notes.Dropped = &Dropped{Bytes: st.BytesDropped, Reason: st.DropReason}
	}
	if st.FreedTo > st.FreedFrom {
		end.notes.LogCut = &LogCut{MaxLogBytes: r.maxLog, From: st.FreedFrom, To: st.FreedTo}
	}
	end.notes.Survivors = int(st.Survivors)
	return end
}

func (r *shimRunner) stop(req stopRequest) error {
	if !r.orphaned.IsZero() {
		r.orphanStop.ask(req, r.signalOrphans)
		return nil
	}
	if r.asked == "" {
		r.asked = req.by // before the call: a stop the shim took but did not answer is this one too
	}
	op := "stop"
	if req.kill {
		op = "kill"
	}
	resp, err := shimctl.Call(r.runDir, shimctl.Request{Op: op, By: req.by, Reason: string(req.reason)}, 2*time.Second)
	if err == nil && !resp.OK {
		err = errors.New(resp.Error)
	}
	return err
}

func (r *shimRunner) gone() (*EndFacts, time.Time) {
	f := &EndFacts{Why: WhyInterrupted, Interrupted: InterruptSupervisorGone, SupervisorPID: r.shimPID}
	if !r.orphaned.IsZero() {
		f.Orphans = r.orphanStop.facts(r.pid, r.goneAt)
	}
	return f, r.goneAt
}

func (r *shimRunner) done() {
	r.orphanLock.release()
	if r.handle != nil {
		if err := r.handle.Wait(); err != nil {
			r.log.Debug("run supervisor exit", "err", err)
		}
	}
}

// newShimRunner is the runner of an observed local run; h is the shim this
// trainbot started, nil for one an earlier trainbot started.
func newShimRunner(a *active, h *shimctl.Handle) *shimRunner {
	return &shimRunner{runDir: a.runDir, shimPID: a.run.Supervisor, startedAt: a.run.StartedAt, pid: a.run.PID,
		maxLog: a.job.MaxLogBytes, handle: h, log: a.log,
		lockPath: filepath.Join(a.sup.opts.DataDir, "locks", lockFileName(a.job.Lock)), lockName: a.job.Lock,
		stopGrace: a.job.StopGrace, killGrace: a.job.KillGrace, orphanStop: orphanStop{first: a.job.Signals.Stop}}
}

// stopBy is who stopped the run, as far as this trainbot can vouch for it,
// and whether it is vouched for (then its reason, and a kill at
// shutdown are trainbot's too): the by of the stop this runner sent when
// the shim took the stop from this process; the by another trainbot
// process gave (the peer runs the trainbot executable: the one before a
// restart); the shim's own words for a stop it took by a signal (or the by
// of a shim from before peers were recorded); else the process that sent
// it on the socket, whatever it said it was.
func (r *shimRunner) stopBy(s *shimctl.StopInfo) (by string, vouched bool) {
	switch p := s.Peer; {
	case p == nil:
		return s.By, true
	case p.PID == os.Getpid() && r.asked != "":
		return r.asked, true
	case p.Trainbot:
		return s.By, true // a trainbot before this one (a restart during the stop)
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

package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/internal/nice"
	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/shimctl"
	"github.com/trainbot/trainbot/trainer/tfevents"
)

type stopRequest struct {
	by     string
	reason Outcome // OutcomeStopped, or OutcomeNaN when trainbot stops a diverged run
	kill   bool    // SIGKILL now, without the grace periods (Close that cannot wait)
	// killWatched stops a watched run's process too (StopWatched); without
	// it, a watched run is only no longer watched.
	killWatched bool
}

// active is a run this trainbot observes. Its processes belong to the
// run's supervisor process (trainbot shim): the bot reads the run's log
// by offset as the shim writes it, parses it, stores points and the read
// offset, forwards stop requests on the shim's socket, and records the end
// from the shim's state file. The bot can leave (Detach) at any time; the
// run goes on, and the next trainbot re-attaches.
type active struct {
	sup         *Supervisor
	job         *Job
	runDir      string
	runner      runner     // what owns the run's processes: its shim (or Slurm)
	knobMu      sync.Mutex // one 调参 at a time writes the control file
	obs         *fileLock  // the observer lock: one trainbot observes a run at a time
	adopted     bool       // attached to a run this process did not start
	parser      *logparse.Parser
	thin        thinner
	pend        []TimedPoint     // points to store, gathered over lines (queuePoints)
	lineBuf     []logparse.Point // a line's points, reused from line to line
	oomFree     map[uint64]bool  // the parser's layouts whose lines are no OOM error (detectOOM)
	lastOOMFree uint64           // the last line's layout, when in oomFree
	names       map[string]bool  // the metrics recorded
	lastName    string           // the metric of the last point recorded (limitNames)
	full        bool             // more metric names than maxMetricNames
	tail        *ring
	stopCh      chan stopRequest
	detach      chan struct{} // closed by Detach: stop observing, leave the run running
	detachOnce  sync.Once
	done        chan struct{} // closed when the run has ended (or the bot detached)
	log         *slog.Logger
	attempt     int // on_oom: this run is the attempt-th retry (0: not a retry)
	// on_failure: this run is the resumeAttempt-th resume (0: not one),
	// of a run that ended at resumedAtStep, from checkpoint resumedFrom.
	resumeAttempt int
	resumedAtStep int64
	resumedFrom   string
	prevOOM       *OOM         // on_oom: what the run this one retries failed to allocate (nil: unknown)
	prevSteps     int64        // and at which step
	queued        *QueueEntry  // the queue entry this run was started from
	rules         []*ruleState // the alert rules of the run (the job's and every job's), the observer's
	gpuUtil       float64      // the latest utilisation of the run's GPUs (gpu_util); NaN before one, under mu

	// The replay of lines the bot had already stored before a restart:
	// they rebuild the parser's state but store no point and raise no alert.
	stored   int64 // log offset up to which points are stored
	caughtUp bool  // the replay has reached what was not stored
	ending   bool  // the log has the shim's note that the main process ended
	metrics  struct {
		path   string
		off    int64 // next byte of the metrics file to read
		stored int64
		part   []byte
	}
	// The run's TensorBoard event files (nil: the job has none), the
	// metrics they report (the output's points of those yield to theirs),
	// and the offset of each file last queued for the store.
	events     *tfevents.Dir
	eventNames map[string]bool
	eventOff   map[string]int64

	// What the observer has read of the run's progress and metrics, line
	// by line, without a lock; the fields of the same names under mu are
	// what the rest of trainbot sees of it, published (publishSeen) with
	// the points it queues for the store.
	seen seen

	mu           sync.Mutex
	run          *Run
	progress     logparse.Progress
	last         map[string]*float64 // the latest value of each metric
	lastOrder    []string            // last's names, in the order they came
	rate         rateWindow
	firstMetric  time.Time
	lastOutput   time.Time  // when the run last printed (the shim's clock, or the log's index)
	eventStep    int64      // the highest step of the event files' points
	nanW         *nanWatch  // NaN or Inf losses in a row
	nanStreak    *NaNStreak // the streak of the NaN alert, nil before one
	oom          *OOM
	frame        string // the innermost frame of the user's code in the traceback being printed ("train.py:28")
	stall        stallWatch
	stopReq      *stopRequest  // the first stop asked of this trainbot
	oomAtStop    *OOM          // the run had run out of memory when the stop came
	stopSent     bool          // the shim took the stop request (or the kill, once asked)
	stopRefused  bool          // a stop did not reach the run's owner, and that was logged
	dropped      int64         // output bytes the shim could not write
	waiting      string        // the run waits in its owner's queue (Slurm); "" when it runs
	unsupervised *Unsupervised // its supervisor died and processes of the run live on

	// quiet: a run restored from its directory that had ended, read
	// again for its points; recorded is its record, put back at the end.
	// Nothing of it is announced, retried or started.
	quiet    bool
	recorded *Run
}

// publish announces an event of the run, unless it is read again quietly.
func (a *active) publish(e Event) {
	if !a.quiet {
		a.sup.publish(e)
	}
}

func newActive(s *Supervisor, job *Job, run *Run, runDir string) *active {
	var popts []logparse.Option
	if job.AllRanks {
		popts = append(popts, logparse.AllRanks())
	}
	parser, err := logparse.New(job.Patterns, popts...)
	if err != nil { // Normalize checked the patterns; keep going without them
		parser = &logparse.Parser{}
	}
	a := &active{
		sup: s, job: job, run: run, runDir: runDir, parser: parser,
		names:  map[string]bool{},
		tail:   newRing(job.TailLines),
		stopCh: make(chan stopRequest, 4),
		detach: make(chan struct{}),
		done:   make(chan struct{}),
		last:   map[string]*float64{},
		nanW:   newNANWatch(job.NaNAfter),
		stall:  stallWatch{after: job.StallAfter},
		log:    s.log.With("run", run.ID, "job", job.Name),
		stored: run.LogOffset,
	}
	a.gpuUtil = math.NaN()
	for _, r := range append(slices.Clone(job.Alerts), s.alertRules()...) {
		a.rules = append(a.rules, &ruleState{rule: r})
	}
	a.metrics.path = filepath.Join(runDir, MetricsFile)
	a.metrics.stored = run.MetricsOffset
	a.lastOutput = time.Now()
	if dir := job.TensorBoardDir(run); dir != "" {
		offsets, err := s.opts.Recorder.EventOffsets(context.Background(), run.ID)
		if err != nil {
			a.log.Warn("read the event files' offsets: points read before are stored again", "err", err)
		}
		a.events = tfevents.NewDir(dir, offsets, a.log.With("tensorboard", dir))
		a.events.Since = run.StartedAt.Add(-time.Second) // files of earlier runs in the same directory are not this run's
		a.eventNames, a.eventOff = map[string]bool{}, maps.Clone(offsets)
		if a.eventOff == nil {
			a.eventOff = map[string]int64{}
		}
	}
	return a
}

// Poll intervals of an observed run.
const (
	pollEvery  = 100 * time.Millisecond // the log and the run's owner, when the log has nothing new
	endingPoll = 5 * time.Millisecond   // ... once the log says the main process ended
	slowEvery  = time.Second            // the stall watch, the metrics file
	readBudget = 4 << 20                // log bytes parsed between two looks at the control channels
)

// observe owns the run from the bot's side until it ends or the bot
// detaches: the only goroutine that reads the run's files, parses, stores
// and talks to the shim.
func (a *active) observe() {
	defer a.sup.wg.Done()
	if a.quiet {
		// Restored runs that had ended are read again two at a time: a
		// database rebuilt from many run directories must not take the
		// host's cores from the runs that go on.
		select {
		case a.sup.quietSlots <- struct{}{}:
			defer func() { <-a.sup.quietSlots }()
		case <-a.detach:
			a.leave()
			return
		}
	}
	nice.LowerThread()
	lt := &lineTimes{path: filepath.Join(a.runDir, shimctl.IndexFile)}
	defer lt.close()
	var tl *logTail
	defer func() { tl.close() }()
	if a.adopted {
		a.publishAttached()
	}
	watch := watchDir(a.runDir)
	defer watch.close()
	poll := time.NewTimer(0)
	defer poll.Stop()
	var nextSlow, nextControl time.Time
	for {
		a.queuePoints() // what was read before the wait
		select {
		case <-a.detach:
			a.leave()
			return
		case req := <-a.stopCh:
			a.requestStop(req)
		case <-poll.C:
		case <-watch.C():
		}
		if tl == nil {
			var err error
			if tl, err = openLogTail(a.logPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
				a.log.Warn("open run log", "err", err)
			}
		}
		n := 0
		if tl != nil {
			var err error
			lt.refresh()
			if n, err = tl.read(readBudget, func(l line) { a.handleOutput(l, lt) }); err != nil {
				a.log.Warn("read run log", "err", err)
			}
			a.tail.publish()
			if n > 0 {
				a.storeOffsets(tl.off)
			}
		}
		now := time.Now()
		if n == readBudget {
			poll.Reset(0) // a backlog: go on at once, after a look at the channels
			continue
		}
		if !now.Before(nextSlow) {
			nextSlow = now.Add(slowEvery)
			a.readMetricsFile()
			a.checkStall(now)
			a.checkRules(now)
		}
		if !now.Before(nextControl) {
			a.readEvents(false)
		}
		if now.Before(nextControl) && !a.ending {
			poll.Reset(nextControl.Sub(now))
			continue
		}
		nextControl = now.Add(pollEvery)
		a.queuePoints() // before what control announces
		end, gone := a.control(now)
		if end != nil || gone {
			// Everything the shim wrote is in the log: read it to the end.
			lt.refresh()
			for tl != nil {
				n, err := tl.read(readBudget, func(l line) { a.handleOutput(l, lt) })
				a.tail.publish()
				if err != nil || n == 0 {
					break
				}
			}
			if tl != nil {
				tl.flush(func(l line) { a.handleOutput(l, lt) })
				a.tail.publish()
				a.storeOffsets(tl.off)
			}
			a.readMetricsFile()
			a.finishMetricsFile()
			a.readEvents(true)
			a.reportTorn()
			a.finish(end)
			return
		}
		if a.ending && watch == nil {
			// The shim's last words are in the log: its final state
			// follows within milliseconds (with a watch, its rename
			// wakes this loop).
			poll.Reset(endingPoll)
			continue
		}
		poll.Reset(pollEvery)
	}
}

// control asks the run's owner how the run is, forwards a stop that has
// not reached it yet, and keeps what it says of a live run.
func (a *active) control(now time.Time) (end *runEnd, gone bool) {
	end, live, gone := a.runner.poll(now)
	a.mu.Lock()
	if !live.lastOutput.IsZero() {
		a.lastOutput = live.lastOutput
	}
	a.dropped = max(a.dropped, live.dropped)
	a.waiting = live.waiting
	moved := live.node != "" && live.node != a.run.Node
	if moved {
		a.run.Node = live.node
	}
	a.mu.Unlock()
	if moved {
		a.save()
	}
	if u := live.unsupervised; u != nil {
		u.RunID = a.run.ID
		a.mu.Lock()
		a.unsupervised = u
		a.mu.Unlock()
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeInterrupted, Text: u.String(), Unsupervised: u}})
	}
	if live.warn != "" {
		a.log.Warn("run warning", "detail", live.warn)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeStalled, Text: live.warn}})
	}
	if end == nil && !gone && a.pendingStop() {
		a.sendStop()
	}
	return end, gone
}

// leave stops observing without ending the run (the bot detaches).
func (a *active) leave() {
	if d, ok := a.runner.(interface{ detach() }); ok {
		d.detach() // it stops what it does for the run in this process
	}
	a.queuePoints()
	if err := a.sup.opts.Recorder.Flush(context.Background()); err != nil {
		a.log.Warn("flush metric points", "err", err)
	}
	a.save()
	a.unregister()
	a.log.Info("detached from run; it goes on")
}

// unregister lets another trainbot observe the run, removes it from the
// active runs and wakes those who wait for it.
func (a *active) unregister() {
	a.obs.release()
	a.sup.mu.Lock()
	if a.sup.active[a.job.Lock] == a {
		delete(a.sup.active, a.job.Lock)
	}
	a.sup.mu.Unlock()
	close(a.done)
}

// publishAttached tells the chats that this trainbot observes the run again.
func (a *active) publishAttached() {
	st := a.status()
	a.publish(Event{Kind: EventAttached, Run: st.Run, Status: &st})
}

func (a *active) snapshot() *Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.Clone()
}

// Status is a snapshot of an active (or just ended) run.
type Status struct {
	Run         *Run
	Progress    logparse.Progress
	Last        []Metric // latest value of each metric, in first-seen order
	StepsPerSec float64  // over the last minute; 0 when unknown
	Elapsed     time.Duration
	ETA         time.Duration // 0 when unknown
	FirstMetric time.Duration // from start to the first metric; 0 before it
	Stopping    bool
	Dropped     int64 // output bytes the run's supervisor could not write to the log (a stalled or full disk)
	// Waiting is set while the run waits to run, e.g. "queued in Slurm
	// (job 4242, reason: Resources, partition gpu)"; "" once it runs.
	Waiting string
	// Unsupervised is set when the run's supervisor died and processes of
	// the run live on.
	Unsupervised *Unsupervised
}

// Metric is a named value.
type Metric struct {
	Name  string
	Value float64
}

// Loss returns the latest value of the main loss metric ("loss" first,
// then any name containing "loss"), and whether there is one.
func (s Status) Loss() (Metric, bool) {
	for _, m := range s.Last {
		if m.Name == "loss" || m.Name == "train_loss" || m.Name == "train/loss" {
			return m, true
		}
	}
	for _, m := range s.Last {
		if IsLossName(m.Name) {
			return m, true
		}
	}
	return Metric{}, false
}

// Brief is a one-line summary: "step 400/1500, loss 0.4123, 1m20s".
func (s Status) Brief() string {
	if s.Waiting != "" {
		return s.Waiting + " for " + units.Duration(s.Elapsed)
	}
	if u := s.Unsupervised; u != nil {
		return "unsupervised for " + units.Duration(s.Elapsed) + ": " + u.String()
	}
	var parts []string
	if s.Progress.Step > 0 {
		if s.Progress.TotalSteps > 0 {
			parts = append(parts, fmt.Sprintf("step %d/%d", s.Progress.Step, s.Progress.TotalSteps))
		} else {
			parts = append(parts, fmt.Sprintf("step %d", s.Progress.Step))
		}
	} else {
		parts = append(parts, "no step yet")
	}
	if m, ok := s.Loss(); ok {
		parts = append(parts, fmt.Sprintf("%s %s", m.Name, units.Metric(m.Name, m.Value)))
	}
	parts = append(parts, "running for "+units.Duration(s.Elapsed))
	return strings.Join(parts, ", ")
}

func (a *active) status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	st := Status{
		Run:          a.run.Clone(),
		Progress:     a.progress,
		Elapsed:      a.run.Duration(now),
		Stopping:     a.stopReq != nil,
		Dropped:      a.dropped,
		Waiting:      a.waiting,
		Unsupervised: a.unsupervised,
	}
	if st.Progress == (logparse.Progress{}) {
		st.Progress = emptyProgress()
	}
	st.Progress.Step = max(st.Progress.Step, a.eventStep)
	for _, n := range a.lastOrder {
		st.Last = append(st.Last, Metric{n, *a.last[n]})
	}
	if !a.firstMetric.IsZero() {
		st.FirstMetric = a.firstMetric.Sub(a.run.StartedAt)
	}
	st.StepsPerSec = a.rate.perSecond()
	if st.StepsPerSec > 0 && st.Progress.TotalSteps > st.Progress.Step && a.run.State == StateRunning {
		st.ETA = time.Duration(float64(st.Progress.TotalSteps-st.Progress.Step) / st.StepsPerSec * float64(time.Second))
	}
	return st
}

// rateWindow estimates steps per second over about the last minute.
type rateWindow struct {
	t    [64]time.Time
	step [64]int64
	n    int       // entries used
	head int       // next slot
	last time.Time // the time added last
}

func (w *rateWindow) add(t time.Time, step int64) {
	if w.n > 0 {
		prev := (w.head - 1 + len(w.t)) % len(w.t)
		// ==: the lines of one clock reading or index record share their
		// time (most lines: no Sub, ~20 ns a line).
		if t == w.last || t.Sub(w.t[prev]) < time.Second {
			w.step[prev] = step // keep one sample per second
			w.last = t
			return
		}
	}
	w.last = t
	w.t[w.head], w.step[w.head] = t, step
	w.head = (w.head + 1) % len(w.t)
	if w.n < len(w.t) {
		w.n++
	}
}

func (w *rateWindow) perSecond() float64 {
	if w.n < 2 {
		return 0
	}
	newest := (w.head - 1 + len(w.t)) % len(w.t)
	oldest := (w.head - w.n + len(w.t)) % len(w.t)
	dt := w.t[newest].Sub(w.t[oldest]).Seconds()
	ds := w.step[newest] - w.step[oldest]
	if dt <= 0 || ds <= 0 {
		return 0
	}
	return float64(ds) / dt
}

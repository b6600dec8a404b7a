package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/history"
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
	sup        *Supervisor
	job        *Job
	runDir     string
	runner     runner    // what owns the run's processes: its shim (or Slurm)
	obs        *fileLock // the observer lock: one trainbot observes a run at a time
	adopted    bool      // attached to a run this process did not start
	parser     *logparse.Parser
	thin       thinner
	names      map[string]bool // the metrics recorded
	full       bool            // more metric names than maxMetricNames
	tail       *ring
	stopCh     chan stopRequest
	detach     chan struct{} // closed by Detach: stop observing, leave the run running
	detachOnce sync.Once
	done       chan struct{} // closed when the run has ended (or the bot detached)
	log        *slog.Logger
	attempt    int          // on_oom: this run is the attempt-th retry (0: not a retry)
	prevOOM    *OOM         // on_oom: what the run this one retries failed to allocate (nil: unknown)
	prevSteps  int64        // and at which step
	queued     *QueueEntry  // the queue entry this run was started from
	rules      []*ruleState // the alert rules of the run (the job's and every job's), under mu
	gpuUtil    float64      // the latest utilisation of the run's GPUs (gpu_util); NaN before one, under mu
	nanWatch   bool         // a loss is NaN: lines without points count toward nan_after too

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

	mu           sync.Mutex
	run          *Run
	progress     logparse.Progress
	last         map[string]float64
	lastOrder    []string
	rate         rateWindow
	firstMetric  time.Time
	lastMetric   time.Time
	lastOutput   time.Time          // when the run last printed (the shim's clock, or the log's index)
	eventStep    int64              // the highest step of the event files' points
	nan          map[string]*nanRun // loss metrics whose latest value is NaN or Inf
	nanText      string             // the NaN alert, "" before one
	oom          *OOM
	stalled      bool
	stopReq      *stopRequest  // the first stop asked of this trainbot
	oomAtStop    *OOM          // the run had run out of memory when the stop came
	stopSent     bool          // the shim took the stop request (or the kill, once asked)
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
		last:   map[string]float64{},
		nan:    map[string]*nanRun{},
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
		end, gone := a.control(now)
		if end != nil || gone {
			// Everything the shim wrote is in the log: read it to the end.
			lt.refresh()
			for tl != nil {
				n, err := tl.read(readBudget, func(l line) { a.handleOutput(l, lt) })
				if err != nil || n == 0 {
					break
				}
			}
			if tl != nil {
				tl.flush(func(l line) { a.handleOutput(l, lt) })
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

// logPath is the run's log: the one its supervisor or Slurm writes in the
// run's directory, or the file a watched run writes.
func (a *active) logPath() string {
	if a.run.Runner == RunnerWatch && a.run.LogPath != "" {
		return a.run.LogPath
	}
	return filepath.Join(a.runDir, shimctl.LogFile)
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
		text := fmt.Sprintf("its supervisor (pid %d) died; %d process(es) of the run (process group %d) live on unsupervised: their output is no longer read; 停止 %d (/stop %d) ends them",
			u.SupervisorPID, u.Processes, u.PGID, a.run.ID, a.run.ID)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeInterrupted, Text: text, Unsupervised: u}})
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

// notePrefix starts the lines the run's supervisor writes into the log
// (start, stop, drops, end): they are shown, never parsed.
const notePrefix = "[trainbot] "

// handleOutput takes one line of the log.
func (a *active) handleOutput(l line, lt *lineTimes) {
	a.tail.put(shown(l.text), l.cr)
	if strings.HasPrefix(l.text, notePrefix) {
		note := l.text[len(notePrefix):]
		a.ending = a.ending || note == shimctl.EndNote || strings.HasPrefix(note, shimctl.EndNote+": ")
		return
	}
	replay := l.end <= a.stored
	if !replay && a.stored > 0 && !a.caughtUp {
		// Past what an earlier trainbot stored: its last thinnings may
		// not have run; they change nothing if they did.
		a.caughtUp = true
		for name := range a.names {
			if w := a.thin.width(name); w > 1 {
				a.sup.opts.Recorder.ThinPoints(a.run.ID, name, w)
			}
		}
	}
	at := lt.at(l.end)
	a.handleLine(at, l.text, false, replay)
}

// storeOffsets queues the read offsets after the points they cover.
func (a *active) storeOffsets(logOff int64) {
	if logOff <= a.stored && a.metrics.off <= a.metrics.stored {
		return
	}
	a.stored = max(a.stored, logOff)
	a.metrics.stored = max(a.metrics.stored, a.metrics.off)
	a.sup.opts.Recorder.SetOffsets(a.run.ID, a.stored, a.metrics.stored)
}

// Bounds on the reads of one readEvents, readBudget each: while the run
// goes on (the loop looks at its control channels between two), and at its
// end (everything the files have: 16 GiB).
const (
	eventsRounds    = 16
	eventsEndRounds = 4096
)

// readEvents reads what the run's event files gained, and queues the
// offsets they are read to after the points read from them; at the end
// of the run (final), all of it.
func (a *active) readEvents(final bool) {
	if a.events == nil {
		return
	}
	rounds := eventsRounds
	if final {
		rounds = eventsEndRounds
	}
	for range rounds {
		n := a.events.Poll(readBudget, a.handleEventRecord)
		for rel, f := range a.events.Files {
			if f.Off > a.eventOff[rel] {
				a.eventOff[rel] = f.Off
				a.sup.opts.Recorder.SetEventOffset(a.run.ID, rel, f.Off)
			}
		}
		if n < readBudget {
			return
		}
	}
}

// reportTorn logs, at the end of a run, the event files whose last record
// was never completed (their writer died mid-record).
func (a *active) reportTorn() {
	if a.events == nil {
		return
	}
	for _, f := range a.events.TornAtEnd() {
		a.log.Warn("event file ends with an incomplete record: left out", "file", f.Path, "bytes", f.Torn)
	}
}

// handleEventRecord takes the scalars of one event file record.
func (a *active) handleEventRecord(r tfevents.DirRecord) {
	pts := make([]logparse.Point, 0, len(r.Scalars))
	var step int64
	for _, s := range r.Scalars {
		pts = append(pts, logparse.Point{Step: s.Step, Epoch: math.NaN(), Name: tfevents.MetricName(r.File.Sub(), s.Tag), Value: s.Value})
		step = max(step, s.Step)
	}
	pts = a.limitNames(pts, r.Replay)
	if len(pts) == 0 {
		return
	}
	for _, p := range pts {
		a.eventNames[p.Name] = true
	}
	at := time.Now()
	if w := r.Scalars[0].WallTime; w > 0 {
		at = time.Unix(0, int64(w*1e9))
	}
	a.mu.Lock()
	a.eventStep = max(a.eventStep, step)
	a.mu.Unlock()
	keep, thin := a.thin.keepFrom(at, pts, SourceEvents)
	if !r.Replay {
		a.addPoints(keep)
		for _, name := range thin {
			a.sup.opts.Recorder.ThinPoints(a.run.ID, name, a.thin.width(name))
		}
	}
	a.observePoints(at, pts, "", r.Replay)
}

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
		a.log.Warn("the run's owner did not take the stop; trying again", "kill", req.kill, "err", err)
		return
	}
	a.mu.Lock()
	a.stopSent = a.stopReq.kill == req.kill // a kill asked meanwhile is still to be sent
	a.mu.Unlock()
}

// leave stops observing without ending the run (the bot detaches).
func (a *active) leave() {
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
	var extra []string
	if end != nil {
		e, extra = end.e, end.extra
	}
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
	e.nanSeen = a.nanText
	e.nanRecovered = a.nanText != "" && len(a.nan) == 0
	if end != nil {
		a.run.raisePeakHost(end.maxRSS, history.PeakMain)
	}
	e.peakMemText = peakText(a.run)
	var outcome Outcome
	var detail string
	r := a.run
	switch {
	case end == nil:
		var at time.Time
		outcome, detail = OutcomeInterrupted, ""
		detail, at = a.runner.goneDetail()
		r.EndedAt = a.lastOutput
		if fi, err := os.Stat(r.LogPath); err == nil && fi.ModTime().After(r.StartedAt) {
			r.EndedAt = fi.ModTime()
		}
		if at.After(r.EndedAt) {
			// The runner saw it alive later than its last output (a
			// quiet run): that is when it ended, as far as is known.
			r.EndedAt = at
		}
	case end.outcome != "" && !(end.outcome == OutcomeFailed && (e.oom != nil || (e.nanSeen != "" && !e.nanRecovered))):
		// The owner decided (Slurm's states), unless the output tells
		// more of a failure: out of memory, or a NaN loss.
		outcome, detail, r.EndedAt = end.outcome, end.detail, end.endedAt
		if e.exitCode >= 0 {
			code := e.exitCode
			r.ExitCode = &code
		}
	default:
		outcome, detail = classify(e)
		r.EndedAt = end.endedAt
		if r.EndedAt.IsZero() {
			r.EndedAt = time.Now()
		}
		if e.signal == 0 && e.startErr == nil {
			code := e.exitCode
			r.ExitCode = &code
		}
	}
	extra = append(extra, a.unseenRules()...)
	if a.full {
		where := "the log has them"
		if end != nil && end.logCut {
			where = "the log has those max_log_bytes did not free"
		}
		extra = append(extra, fmt.Sprintf("the output named more than %d metrics: points of further metric names were not recorded (%s)", maxMetricNames, where))
	}
	if len(extra) > 0 {
		detail += "; " + strings.Join(extra, "; ")
	}
	r.State, r.Outcome, r.Detail = StateEnded, outcome, detail
	if r.Outcome == OutcomeStopped || r.Outcome == OutcomeNaN || (r.Outcome == OutcomeOOM && e.oomBeforeStop) {
		r.StoppedBy = e.stopBy
	}
	if rec := a.recorded; rec != nil {
		r.Outcome, r.Detail, r.EndedAt, r.ExitCode, r.StoppedBy = rec.Outcome, rec.Detail, rec.EndedAt, rec.ExitCode, rec.StoppedBy
		r.PeakGPUMem, r.PeakHostMem, r.PeakHostHow = rec.PeakGPUMem, rec.PeakHostMem, rec.PeakHostHow
	}
	a.mu.Unlock()

	if rest := a.thin.flush(); len(rest) > 0 {
		a.addPoints(rest)
	}
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
	a.unregister()
	a.log.Info("run ended", "outcome", outcome, "detail", firstLine(detail))
	a.publish(Event{Kind: EventEnded, Run: st2.Run, Status: &st2, At: time.Now(), Retry: retry, OOM: oom, Fit: fit})
	a.sup.retryAfterOOM(st2.Run, a.job, retry, oom)
	a.sup.StartQueued(context.Background())
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

// handleLine parses one line (of output, or of the metrics file) read at
// time at. A replayed line (stored before a restart) only rebuilds state.
func (a *active) handleLine(at time.Time, text string, fromMetricsFile, replay bool) {
	if !fromMetricsFile {
		if o, ok := DetectOOM(text); ok {
			a.mu.Lock()
			first := a.oom == nil
			if first || (a.oom.TriedBytes == 0 && o.TriedBytes > 0) {
				a.oom = o
			}
			a.mu.Unlock()
			if first && !replay {
				a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeOOM, Text: o.Summary(), OOM: o},
					Fit: a.sup.MemoryFit(a.job, a.snapshot(), o)})
			}
		}
	}
	pts := a.limitNames(a.parser.Line(text), replay)
	if len(pts) == 0 {
		if a.nanWatch {
			a.observePoints(at, nil, text, replay) // a progress bar may show the NaN loss again
		}
		return
	}
	keep, thin := a.thin.keep(at, pts)
	if !replay {
		a.addPoints(keep)
		for _, name := range thin {
			a.sup.opts.Recorder.ThinPoints(a.run.ID, name, a.thin.width(name))
		}
	}
	a.observePoints(at, pts, text, replay)
}

// addPoints queues points for the store. Output points of a metric the
// event files report too yield to theirs (SourceOutputBehindEvents).
func (a *active) addPoints(pts []TimedPoint) {
	if len(pts) == 0 {
		return
	}
	for i := range pts {
		if pts[i].Source == SourceOutput && a.eventNames[pts[i].Name] {
			pts[i].Source = SourceOutputBehindEvents
		}
	}
	a.sup.opts.Recorder.AddPoints(a.run.ID, pts)
}

// Bounds on the metric names a run records. A script that prints a name
// per line ("img_0001.jpg: 0.93", a score per image) would otherwise have
// trainbot keep a metric per line, in memory and in the store, for days.
// Past maxMetricNames, only names that look like a loss are still taken,
// up to maxLossNames more.
const (
	maxMetricNames = 1000
	maxLossNames   = 100
)

// limitNames drops, in place, the points of new metrics once the run has
// too many.
func (a *active) limitNames(pts []logparse.Point, replay bool) []logparse.Point {
	keep := pts[:0]
	for _, p := range pts {
		if !a.names[p.Name] {
			n := len(a.names)
			if n >= maxMetricNames+maxLossNames || (n >= maxMetricNames && !IsLossName(p.Name)) {
				if !a.full {
					a.full = true
					if !replay {
						a.log.Warn("the output names too many metrics: points of further metric names are not recorded (the log has them)", "max", maxMetricNames)
					}
				}
				continue
			}
			a.names[p.Name] = true
		}
		keep = append(keep, p)
	}
	return keep
}

// observePoints updates progress, latest values and the NaN watch.
func (a *active) observePoints(now time.Time, pts []logparse.Point, line string, replay bool) {
	a.mu.Lock()
	a.progress = a.parser.Progress()
	if len(pts) > 0 {
		if a.firstMetric.IsZero() {
			a.firstMetric = now
		}
		a.lastMetric = now
	}
	step := max(a.progress.Step, a.eventStep)
	a.run.Steps = step
	a.run.Total = a.progress.TotalSteps
	a.rate.add(now, step)
	var nanAlert string
	var streak *NaNStreak
	count := func(name string, v float64, r *nanRun, at int64) {
		r.n++
		if r.n == a.job.NaNAfter && a.nanText == "" {
			a.nanText = fmt.Sprintf("%s is %v for %d points in a row (step %d)", name, v, r.n, at)
			nanAlert, streak = a.nanText, &NaNStreak{Metric: name, Value: v, Count: r.n, Step: at}
		}
	}
	for _, p := range pts {
		if _, seen := a.last[p.Name]; !seen {
			a.lastOrder = append(a.lastOrder, p.Name)
		}
		a.last[p.Name] = p.Value
		if !IsLossName(p.Name) {
			continue
		}
		// Each loss metric has its own streak: a finite val_loss on the
		// line does not end train_loss's.
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			r := a.nan[p.Name]
			if r == nil {
				r = &nanRun{}
				a.nan[p.Name] = r
			}
			r.step = max(step, p.Step)
			count(p.Name, p.Value, r, p.Step)
		} else {
			delete(a.nan, p.Name)
		}
	}
	// The parser reports a progress bar's value again only when it
	// changes: a bar that shows a NaN loss again, at a new step, counts
	// once more. (A line that does not show it, such as a bar without
	// values after one NaN eval_loss, does not.)
	var lower string
	for name, r := range a.nan {
		if step <= r.step || slices.ContainsFunc(pts, func(p logparse.Point) bool { return p.Name == name }) {
			continue
		}
		if lower == "" {
			lower = strings.ToLower(line)
		}
		if showsNaN(lower, name) {
			r.step = step
			count(name, a.last[name], r, step)
		}
	}
	a.nanWatch = len(a.nan) > 0
	var fired []string
	for _, p := range pts {
		for _, rs := range a.rules {
			if rs.rule.Metric == p.Name {
				if text := rs.observe(now, max(step, p.Step), p.Value); text != "" {
					fired = append(fired, text)
				}
			}
		}
	}
	a.mu.Unlock()
	if !replay {
		a.publishRules(fired)
	}
	if nanAlert != "" && !replay {
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeNaN, Text: nanAlert, NaN: streak}})
		if a.job.StopOnNaN {
			select {
			case a.stopCh <- stopRequest{by: "trainbot (NaN loss)", reason: OutcomeNaN}:
			default:
			}
		}
	}
}

// showsNaN reports whether a lower-cased line shows metric name with a NaN
// or infinite value: "train_loss=nan", "loss: inf", "\"loss\": NaN".
func showsNaN(line, name string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		i = start + 1
		if start > 0 && isNameByte(line[start-1]) {
			continue // part of a longer name
		}
		rest := strings.TrimLeft(line[end:], "\"' ")
		if rest == "" || (rest[0] != '=' && rest[0] != ':') {
			continue
		}
		rest = strings.TrimLeft(rest[1:], "\"' +-")
		if strings.HasPrefix(rest, "nan") || strings.HasPrefix(rest, "inf") {
			return true
		}
	}
}

func isNameByte(c byte) bool {
	return c == '_' || c == '/' || c == '.' || c == '-' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
}

// nanRun is a loss metric's current run of NaN or Inf values.
type nanRun struct {
	n    int   // values (or steps) in a row
	step int64 // the step counted last
}

// IsLossName reports whether a metric name looks like a loss.
func IsLossName(name string) bool {
	return strings.Contains(strings.ToLower(name), "loss")
}

// checkRules evaluates the alert rules that need no new point: the
// measured metrics (steps_per_s, gpu_util) and conditions that hold for a
// time.
func (a *active) checkRules(now time.Time) {
	if len(a.rules) == 0 || !a.caughtUpWithLog() {
		return
	}
	a.mu.Lock()
	step := a.progress.Step
	var fired []string
	for _, rs := range a.rules {
		text := ""
		switch rs.rule.Metric {
		case MetricStepsPerSec:
			if !a.firstMetric.IsZero() && now.Sub(a.firstMetric) >= time.Minute/2 {
				text = rs.observe(now, step, a.rate.perSecond())
			}
		case MetricGPUUtil:
			if !math.IsNaN(a.gpuUtil) {
				text = rs.observe(now, step, a.gpuUtil)
			}
		default:
			text = rs.check(now, step)
		}
		if text != "" {
			fired = append(fired, text)
		}
	}
	a.mu.Unlock()
	a.publishRules(fired)
}

// caughtUpWithLog reports whether the log's replay after a restart is
// over: rules do not fire on what an earlier trainbot already judged.
func (a *active) caughtUpWithLog() bool { return a.stored == 0 || a.caughtUp }

// publishRules raises the alerts of rules that fired.
func (a *active) publishRules(fired []string) {
	for _, text := range fired {
		a.log.Info("alert rule fired", "detail", text)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeRule, Text: text}})
	}
}

// unseenRules says which rules watched a metric the run never gave.
func (a *active) unseenRules() []string {
	var out []string
	for _, rs := range a.rules {
		if !rs.seen {
			what := "which the run never printed"
			switch rs.rule.Metric {
			case MetricStepsPerSec:
				what = "which could not be measured (no step was printed)"
			case MetricGPUUtil:
				what = "which NVML never reported for the run's processes"
			}
			out = append(out, fmt.Sprintf("alert rule %q watched %s, %s", rs.rule.String(), rs.rule.Metric, what))
		}
	}
	return out
}

// ObserveUtil records the utilisation (%) of the GPUs an active run's
// processes use, for its gpu_util alert rules.
func (s *Supervisor) ObserveUtil(runID int64, percent float64) {
	a, err := s.find(runID)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.gpuUtil = percent
	a.mu.Unlock()
}

// checkStall raises a stalled alert once per silence longer than StallAfter.
func (a *active) checkStall(now time.Time) {
	if a.job.StallAfter <= 0 {
		return
	}
	a.mu.Lock()
	quiet := now.Sub(a.lastOutput)
	if m := now.Sub(a.lastMetric); !a.lastMetric.IsZero() && m < quiet {
		quiet = m
	}
	alert := ""
	var stall *Stall
	switch {
	case quiet >= a.job.StallAfter && !a.stalled && a.stopReq == nil:
		a.stalled = true
		stall = &Stall{Quiet: quiet.Round(time.Second), After: a.job.StallAfter}
		alert = fmt.Sprintf("no output and no metric for %s (stall_after %s); the process is still alive", stall.Quiet, stall.After)
	case quiet < a.job.StallAfter && a.stalled:
		a.stalled = false
	}
	a.mu.Unlock()
	if alert != "" {
		a.log.Warn("run stalled", "detail", alert)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeStalled, Text: alert, Stall: stall}})
	}
}

func (a *active) snapshot() *Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.Clone()
}

// readMetricsFile reads the JSON lines a script appends to
// TRAINBOT_METRICS_FILE since the last read.
func (a *active) readMetricsFile() {
	m := &a.metrics
	f, err := os.Open(m.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, m.off)
		p := buf[:n]
		for len(p) > 0 {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				if len(m.part)+len(p) <= logparse.MaxLineLen {
					m.part = append(m.part, p...)
				}
				m.off += int64(len(p))
				break
			}
			if len(m.part)+i <= logparse.MaxLineLen {
				m.part = append(m.part, p[:i]...)
			}
			m.off += int64(i + 1)
			a.handleLine(time.Now(), string(m.part), true, m.off <= m.stored)
			m.part = m.part[:0]
			p = p[i+1:]
		}
		if err != nil || n == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				a.log.Warn("read metrics file", "err", err)
			}
			return
		}
	}
}

// finishMetricsFile parses the metrics file's last line, which will not be
// ended (the run is over).
func (a *active) finishMetricsFile() {
	if m := &a.metrics; len(m.part) > 0 {
		a.handleLine(time.Now(), string(m.part), true, false)
		m.part = nil
	}
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
		return fmt.Sprintf("unsupervised: its supervisor (pid %d) died, %d process(es) of process group %d live on, for %s", u.SupervisorPID, u.Processes, u.PGID, units.Duration(s.Elapsed))
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
		parts = append(parts, fmt.Sprintf("%s %s", m.Name, units.Value(m.Value)))
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
		st.Last = append(st.Last, Metric{n, a.last[n]})
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
	n    int // entries used
	head int // next slot
}

func (w *rateWindow) add(t time.Time, step int64) {
	if w.n > 0 {
		prev := (w.head - 1 + len(w.t)) % len(w.t)
		if t.Sub(w.t[prev]) < time.Second {
			w.step[prev] = step // keep one sample per second
			return
		}
	}
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

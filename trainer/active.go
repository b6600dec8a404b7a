package trainer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

type stopRequest struct {
	by     string
	reason Outcome // OutcomeStopped, or OutcomeNaN when trainbot stops a diverged run
}

// active is a run whose process trainbot supervises.
type active struct {
	sup         *Supervisor
	job         *Job
	cmd         *exec.Cmd
	cap         *capture
	parseMu     sync.Mutex       // serialises handleLine: output and metrics-file lines
	parser      *logparse.Parser // guarded by parseMu
	thin        thinner          // guarded by parseMu
	names       map[string]bool  // the metrics recorded; guarded by parseMu
	namesFull   bool             // guarded by parseMu
	pipes       []*os.File
	metricsPath string
	lock        *fileLock
	stopCh      chan stopRequest
	done        chan struct{}
	log         *slog.Logger
	oomBase     int64
	attempt     int         // on_oom: this run is the attempt-th retry (0: not a retry)
	nanWatch    atomic.Bool // a loss is NaN: lines without points count toward nan_after too

	mu          sync.Mutex
	run         *Run
	progress    logparse.Progress
	last        map[string]float64
	lastOrder   []string
	rate        rateWindow
	firstMetric time.Time
	lastMetric  time.Time
	nan         map[string]*nanRun // loss metrics whose latest value is NaN or Inf
	nanText     string             // the NaN alert, "" before one
	oom         *OOM
	stalled     bool
	stopReq     *stopRequest
	oomAtStop   *OOM // the run had run out of memory when the stop came
	sentKill    bool
	killedNow   bool // by Close, without waiting for the grace periods
}

// supervise owns the run from start to end: it is the only goroutine that
// waits for the process, escalates a stop, and records the end.
func (a *active) supervise() {
	defer a.sup.wg.Done()
	waitCh := make(chan error, 1)
	go func() { waitCh <- a.cmd.Wait() }()
	parseDone := make(chan struct{})
	go func() {
		defer close(parseDone)
		a.parseLoop()
	}()
	tailStop := make(chan struct{})
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		a.tailMetricsFile(tailStop)
	}()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var termC, killC <-chan time.Time
	var waitErr error
	var exitedAt time.Time
	lastSave := time.Now()
wait:
	for {
		select {
		case waitErr = <-waitCh:
			exitedAt = time.Now()
			break wait
		case req := <-a.stopCh:
			a.mu.Lock()
			first := a.stopReq == nil
			if first {
				a.stopReq = &req
				a.oomAtStop = a.oomSoFar()
			}
			a.mu.Unlock()
			if first {
				a.log.Info("stopping run", "by", req.by, "reason", req.reason)
				a.cap.note("stop requested by %s: SIGINT to process group %d", req.by, a.run.PID)
				a.signal(syscall.SIGINT)
				termC = time.After(a.job.StopGrace)
			}
		case <-termC:
			a.cap.note("still running %s after SIGINT: SIGTERM", a.job.StopGrace)
			a.signal(syscall.SIGTERM)
			killC = time.After(a.job.KillGrace)
		case <-killC:
			a.cap.note("still running %s after SIGTERM: SIGKILL", a.job.KillGrace)
			a.mu.Lock()
			a.sentKill = true
			a.mu.Unlock()
			a.signal(syscall.SIGKILL)
		case now := <-tick.C:
			if err := a.cap.flushLog(); err != nil {
				a.log.Warn("write run log", "err", err)
			}
			a.checkStall(now)
			if now.Sub(lastSave) >= 10*time.Second {
				lastSave = now
				a.save()
			}
		}
	}

	// The main process is gone. Whatever is left of its group (workers it
	// did not reap) must not outlive the run, and must not hold our pipes.
	// (Lines still waiting for the parser are no reason to kill anything.)
	select {
	case <-a.cap.eof:
	case <-time.After(a.sup.opts.DrainTimeout):
		if n := countGroup(a.run.PID); n > 0 {
			a.cap.note("the main process ended; killing %d leftover process(es) of group %d", n, a.run.PID)
		}
		a.signal(syscall.SIGKILL)
		select {
		case <-a.cap.eof:
		case <-time.After(time.Second):
			// Something outside the group holds the pipe: stop reading.
			a.cap.note("the output is still held open by a process outside the run's process group (one that left it with setsid?): output from now on is not read, and that process may still be running")
			for _, p := range a.pipes {
				p.Close()
			}
			<-a.cap.eof
		}
	}
	<-parseDone
	a.signal(syscall.SIGKILL) // nothing of the run survives it
	close(tailStop)
	<-tailDone
	a.flushThinned()
	for _, p := range a.pipes {
		p.Close()
	}
	a.finish(waitErr, exitedAt)
}

func (a *active) signal(sig syscall.Signal) {
	if a.run.PID <= 0 {
		return
	}
	if err := syscall.Kill(-a.run.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		a.log.Warn("signal process group", "signal", sig, "err", err)
	}
}

// kill is the last resort of Close, when it cannot wait any longer. The
// run counts as stopped by the shutdown even if supervise has not seen
// Close's stop request yet.
func (a *active) kill() {
	a.mu.Lock()
	a.sentKill, a.killedNow = true, true
	if a.stopReq == nil {
		a.stopReq = &stopRequest{by: "trainbot shutdown", reason: OutcomeStopped}
		a.oomAtStop = a.oomSoFar()
	}
	a.mu.Unlock()
	a.cap.note("trainbot is shutting down and cannot wait: SIGKILL to process group %d", a.run.PID)
	a.signal(syscall.SIGKILL)
}

// finish classifies the end, records it and releases the lock.
func (a *active) finish(waitErr error, exitedAt time.Time) {
	ctx := context.Background()
	e := ending{exitCode: -1, oomKills: -1}
	if ps := a.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.signal = ws.Signal()
		} else {
			e.exitCode = ps.ExitCode()
		}
	} else if waitErr != nil {
		e.startErr = waitErr
	}
	if base := a.oomBase; base >= 0 {
		if now := cgroupOOMKills(); now >= 0 {
			e.oomKills = now - base
		}
	}
	e.stderrTail = a.cap.errTail.last(stderrKeep)
	// An OOM message the parse queue dropped under a flood is still in the tail.
	a.mu.Lock()
	if a.oom == nil {
		for _, l := range e.stderrTail {
			if o, ok := DetectOOM(l); ok {
				a.oom = o
			}
		}
	}
	if a.stopReq != nil {
		e.stopBy, e.stopReason = a.stopReq.by, a.stopReq.reason
		e.oomBeforeStop = a.oomAtStop != nil
		if a.oom == nil {
			a.oom = a.oomAtStop
		}
	}
	e.sentKill, e.killedNow = a.sentKill, a.killedNow
	e.oom = a.oom
	e.nanSeen = a.nanText
	e.nanRecovered = a.nanText != "" && len(a.nan) == 0
	e.peakMemText = peakText(a.run)
	outcome, detail := classify(e)
	now := time.Now()
	r := a.run
	// The run ended when its process did; draining and storing come after.
	r.State, r.Outcome, r.Detail, r.EndedAt = StateEnded, outcome, detail, exitedAt
	if e.signal == 0 && e.startErr == nil {
		code := e.exitCode
		r.ExitCode = &code
	}
	if r.Outcome == OutcomeStopped || r.Outcome == OutcomeNaN || (r.Outcome == OutcomeOOM && e.oomBeforeStop) {
		r.StoppedBy = e.stopBy
	}
	a.mu.Unlock()

	if n := a.cap.dropped.Load(); n > 0 {
		a.cap.note("%d output lines were not parsed: the output came faster than it could be parsed (the log above has them all)", n)
	}
	a.cap.note("run ended %s: %s: %s", now.Format(time.RFC3339), outcome, detail)
	if err := a.cap.closeLog(); err != nil {
		a.log.Warn("close run log", "err", err)
	}
	if err := a.sup.opts.Recorder.Flush(ctx); err != nil {
		a.log.Error("flush metric points", "err", err)
	}
	a.save()
	st := a.status()
	// A retry (on_oom) counts as activity from here, so that Wait does not
	// return between this run and its retry.
	retry := a.sup.planRetry(a, st.Run)
	a.lock.release()
	a.sup.mu.Lock()
	if a.sup.active[a.job.Lock] == a {
		delete(a.sup.active, a.job.Lock)
	}
	a.sup.mu.Unlock()
	close(a.done)
	a.log.Info("run ended", "outcome", outcome, "detail", firstLine(detail))
	var oom *OOM
	if outcome == OutcomeOOM {
		oom = e.oom
	}
	a.sup.publish(Event{Kind: EventEnded, Run: st.Run, Status: &st, At: now, Retry: retry, OOM: oom})
	a.sup.retryAfterOOM(st.Run, a.job, retry)
}

// oomSoFar is the out-of-memory error the run has printed, nil if none; it
// also looks at the stderr lines still waiting to be parsed. Call with a.mu
// held.
func (a *active) oomSoFar() *OOM {
	if a.oom != nil {
		return a.oom
	}
	var found *OOM
	for _, l := range a.cap.errTail.last(stderrKeep) {
		if o, ok := DetectOOM(l); ok {
			found = o
		}
	}
	return found
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func peakText(r *Run) string {
	var parts []string
	if r.PeakGPUMem != nil {
		parts = append(parts, "peak GPU memory "+FormatBytes(*r.PeakGPUMem))
	}
	if r.PeakHostMem != nil {
		parts = append(parts, "peak host memory "+FormatBytes(*r.PeakHostMem))
	}
	return strings.Join(parts, ", ")
}

// save writes the run's current record.
func (a *active) save() {
	a.mu.Lock()
	r := a.run.Clone()
	a.mu.Unlock()
	if err := a.sup.opts.Recorder.UpdateRun(context.Background(), r); err != nil {
		a.log.Error("record run", "err", err)
	}
}

// parseLoop turns output lines into points, progress and alerts.
func (a *active) parseLoop() {
	var buf []outLine
	for {
		lines, ok := a.cap.lines.take(buf)
		if !ok {
			return
		}
		now := time.Now() // one clock read per batch: lines of a batch arrived together
		for i := range lines {
			a.handleLineAt(now, lines[i].text, false)
			lines[i] = outLine{}
		}
		buf = lines
	}
}

// handleLine parses one line (of output, or of the metrics file).
func (a *active) handleLine(text string, fromMetricsFile bool) {
	a.handleLineAt(time.Now(), text, fromMetricsFile)
}

func (a *active) handleLineAt(now time.Time, text string, fromMetricsFile bool) {
	a.parseMu.Lock()
	defer a.parseMu.Unlock()
	if !fromMetricsFile {
		if o, ok := DetectOOM(text); ok {
			a.mu.Lock()
			first := a.oom == nil
			if first || (a.oom.TriedBytes == 0 && o.TriedBytes > 0) {
				a.oom = o
			}
			a.mu.Unlock()
			if first {
				a.sup.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeOOM, Text: o.Summary(), OOM: o}})
			}
		}
	}
	pts := a.limitNames(a.parser.Line(text))
	if len(pts) == 0 {
		if a.nanWatch.Load() {
			a.observe(now, nil, text) // a progress bar may show the NaN loss again
		}
		return
	}
	keep, thin := a.thin.keep(now, pts)
	if len(keep) > 0 {
		a.sup.opts.Recorder.AddPoints(a.run.ID, keep)
	}
	for _, name := range thin {
		a.sup.opts.Recorder.ThinPoints(a.run.ID, name, a.thin.width(name))
	}
	a.observe(now, pts, text)
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
// too many. Call with parseMu held.
func (a *active) limitNames(pts []logparse.Point) []logparse.Point {
	keep := pts[:0]
	for _, p := range pts {
		if !a.names[p.Name] {
			n := len(a.names)
			if n >= maxMetricNames+maxLossNames || (n >= maxMetricNames && !IsLossName(p.Name)) {
				if !a.namesFull {
					a.namesFull = true
					a.cap.note("the output has named more than %d metrics: points of further metric names are not recorded (the log has them)", maxMetricNames)
				}
				continue
			}
			a.names[p.Name] = true
		}
		keep = append(keep, p)
	}
	return keep
}

// flushThinned stores the extremes the thinner still holds.
func (a *active) flushThinned() {
	a.parseMu.Lock()
	defer a.parseMu.Unlock()
	if rest := a.thin.flush(); len(rest) > 0 {
		a.sup.opts.Recorder.AddPoints(a.run.ID, rest)
	}
}

// observe updates progress, latest values and the NaN watch.
func (a *active) observe(now time.Time, pts []logparse.Point, line string) {
	a.mu.Lock()
	a.progress = a.parser.Progress()
	if len(pts) > 0 {
		if a.firstMetric.IsZero() {
			a.firstMetric = now
		}
		a.lastMetric = now
	}
	step := a.progress.Step
	a.run.Steps = step
	a.run.Total = a.progress.TotalSteps
	a.rate.add(now, step)
	var nanAlert string
	count := func(name string, v float64, r *nanRun, at int64) {
		r.n++
		if r.n == a.job.NaNAfter && a.nanText == "" {
			a.nanText = fmt.Sprintf("%s is %v for %d points in a row (step %d)", name, v, r.n, at)
			nanAlert = a.nanText
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
	a.nanWatch.Store(len(a.nan) > 0)
	a.mu.Unlock()
	if nanAlert != "" {
		a.sup.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeNaN, Text: nanAlert}})
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

// checkStall raises a stalled alert once per silence longer than StallAfter.
func (a *active) checkStall(now time.Time) {
	if a.job.StallAfter <= 0 {
		return
	}
	lastOut := a.cap.lastOutput()
	a.mu.Lock()
	quiet := now.Sub(lastOut)
	if m := now.Sub(a.lastMetric); !a.lastMetric.IsZero() && m < quiet {
		quiet = m
	}
	alert := ""
	switch {
	case quiet >= a.job.StallAfter && !a.stalled && a.stopReq == nil:
		a.stalled = true
		alert = fmt.Sprintf("no output and no metric for %s (stall_after %s); the process is still alive", quiet.Round(time.Second), a.job.StallAfter)
	case quiet < a.job.StallAfter && a.stalled:
		a.stalled = false
	}
	a.mu.Unlock()
	if alert != "" {
		a.cap.note("%s", alert)
		a.sup.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeStalled, Text: alert}})
	}
}

func (a *active) snapshot() *Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run.Clone()
}

// tailMetricsFile reads JSON lines a script appends to TRAINBOT_METRICS_FILE.
func (a *active) tailMetricsFile(stop <-chan struct{}) {
	var f *os.File
	var rd *bufio.Reader
	var partial []byte
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	readAll := func() {
		if f == nil {
			var err error
			if f, err = os.Open(a.metricsPath); err != nil {
				return
			}
			rd = bufio.NewReaderSize(f, 64<<10)
		}
		for {
			chunk, err := rd.ReadSlice('\n')
			if len(partial)+len(chunk) <= logparse.MaxLineLen {
				partial = append(partial, chunk...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil { // io.EOF: an incomplete line waits for the next read
				if err != io.EOF {
					a.log.Warn("read metrics file", "err", err)
				}
				return
			}
			a.handleLine(string(partial), true)
			partial = partial[:0]
		}
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			readAll()
			if len(partial) > 0 { // the run is over: its last line will not be ended
				a.handleLine(string(partial), true)
			}
			return
		case <-t.C:
			readAll()
		}
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
	Dropped     int64 // output lines not parsed because of a flood
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
		parts = append(parts, fmt.Sprintf("%s %s", m.Name, FormatValue(m.Value)))
	}
	parts = append(parts, "running for "+FormatDuration(s.Elapsed))
	return strings.Join(parts, ", ")
}

func (a *active) status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	st := Status{
		Run:      a.run.Clone(),
		Progress: a.progress,
		Elapsed:  a.run.Duration(now),
		Stopping: a.stopReq != nil,
		Dropped:  a.cap.dropped.Load(),
	}
	if st.Progress == (logparse.Progress{}) {
		st.Progress = emptyProgress()
	}
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

// FormatValue prints a metric value compactly.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e6):
		return fmt.Sprintf("%.3e", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// FormatDuration prints a duration for people: "45s", "3m05s", "2h04m", "3d02h".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, (s%3600)/60)
	default:
		return fmt.Sprintf("%dd%02dh", s/86400, (s%86400)/3600)
	}
}

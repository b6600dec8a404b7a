package trainer

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// The signals a run's points and silence raise while it runs: a NaN loss
// (nan_after points in a row), a stall (no output for stall_after), and
// the user's alert rules. Only the observer goroutine calls these.

// seen is what the observer has read of a run's progress and metrics, kept
// line by line by the observer alone (no lock: two atomic operations a
// line were 7 % of the bot's CPU under a burst). publishSeen copies it to
// the fields of the same names under a.mu, for status, snapshots and
// SetLive, with every queuePoints: once per read of the log, per 4,096
// points, and before any alert or end goes out, so that what the rest of
// trainbot sees of a run is never behind the points the store has of it
// by more than the line being read.
type seen struct {
	progress                logparse.Progress
	steps, total            int64
	firstMetric, lastMetric time.Time
	rate                    rateWindow
	last                    map[string]*float64 // the latest value of each metric
	lastOrder               []string            // last's names, in the order they came
	lastValName             string              // the metric of the last point observed, and
	lastValue               *float64            // its entry in last: a line's metric is mostly the line before's
	dirty                   bool                // changed since publishSeen
}

// latest is the latest value of a metric (0 before one).
func (s *seen) latest(name string) float64 {
	if v := s.last[name]; v != nil {
		return *v
	}
	return 0
}

// publishSeen publishes what the observer has seen since it last did.
func (a *active) publishSeen() {
	s := &a.seen
	if !s.dirty {
		return
	}
	s.dirty = false
	a.mu.Lock()
	a.progress = s.progress
	a.run.Steps, a.run.Total = s.steps, s.total
	a.firstMetric = s.firstMetric
	a.rate = s.rate
	for _, n := range s.lastOrder[len(a.lastOrder):] {
		a.last[n] = new(float64)
		a.lastOrder = append(a.lastOrder, n)
	}
	for _, n := range a.lastOrder {
		*a.last[n] = *s.last[n]
	}
	a.mu.Unlock()
}

// observePoints updates progress (to pr, the parser's after the points),
// latest values, the NaN watch and the alert rules, in a.seen.
func (a *active) observePoints(now time.Time, pts []logparse.Point, line string, replay bool, pr logparse.Progress) {
	s := &a.seen
	s.dirty = true
	s.progress = pr
	if len(pts) > 0 {
		if s.firstMetric.IsZero() {
			s.firstMetric = now
		}
		s.lastMetric = now
	}
	step := max(pr.Step, a.eventStep)
	s.steps, s.total = step, pr.TotalSteps
	s.rate.add(now, step)
	for _, p := range pts {
		v := s.lastValue
		if v == nil || p.Name != s.lastValName {
			if v = s.last[p.Name]; v == nil {
				if s.last == nil {
					s.last = map[string]*float64{}
				}
				v = new(float64)
				s.last[p.Name] = v
				s.lastOrder = append(s.lastOrder, p.Name)
			}
			s.lastValName, s.lastValue = p.Name, v
		}
		*v = p.Value
	}
	streak := a.nanW.observe(step, pts, line, s.latest)
	var nanAlert string
	if streak != nil {
		a.mu.Lock()
		a.nanStreak = streak
		a.mu.Unlock()
		nanAlert = streak.text()
	}
	var fired []string
	for i := range pts {
		p := &pts[i]
		for _, rs := range a.rules {
			if rs.rule.Metric == p.Name {
				if text := rs.observe(now, max(step, p.Step), p.Value); text != "" {
					fired = append(fired, text)
				}
			}
		}
	}
	if !replay {
		a.publishRules(fired)
	}
	if nanAlert != "" && !replay {
		a.queuePoints() // the points that raised it are in the store's queue, as the alert goes out
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
	n    int   // points in a row
	step int64 // the step of the last one counted
}

// nanWatch counts, per loss metric, the NaN or ±Inf points in a row; the
// after-th raises the run's one NaN alert. It is a pure function of the
// points and lines it is shown (no clock, no process), tested as such.
type nanWatch struct {
	after int                // nan_after
	runs  map[string]*nanRun // loss metrics whose latest value is NaN or Inf
	fired bool               // the alert was raised (once a run)
	// The name last asked IsLossName of, and its answer: a line's metric
	// is mostly the line before's.
	lossName string
	isLoss   bool
}

func newNANWatch(after int) *nanWatch { return &nanWatch{after: after, runs: map[string]*nanRun{}} }

// watching reports whether a loss is NaN now: lines without points count
// toward nan_after too (a progress bar shows the value again).
func (w *nanWatch) watching() bool { return len(w.runs) > 0 }

// observe takes the points of one line (the run's step now, the line as
// printed, the latest value of a metric) and returns the streak that
// raises the alert, once; nil otherwise.
func (w *nanWatch) observe(step int64, pts []logparse.Point, line string, last func(name string) float64) *NaNStreak {
	var streak *NaNStreak
	count := func(name string, v float64, r *nanRun, at int64) {
		r.n++
		if r.n == w.after && !w.fired {
			w.fired = true
			streak = &NaNStreak{Metric: name, Value: v, Count: r.n, Step: at}
		}
	}
	for _, p := range pts {
		if p.Name != w.lossName {
			w.lossName, w.isLoss = p.Name, IsLossName(p.Name)
		}
		if !w.isLoss {
			continue
		}
		// Each loss metric has its own streak: a finite val_loss on the
		// line does not end train_loss's.
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			r := w.runs[p.Name]
			if r == nil {
				r = &nanRun{}
				w.runs[p.Name] = r
			}
			r.step = max(step, p.Step)
			count(p.Name, p.Value, r, p.Step)
		} else if len(w.runs) > 0 {
			delete(w.runs, p.Name)
		}
	}
	// The parser reports a progress bar's value again only when it
	// changes: a bar that shows a NaN loss again, at a new step, counts
	// once more. (A line that does not show it, such as a bar without
	// values after one NaN eval_loss, does not.)
	if len(w.runs) == 0 {
		return streak // no loss is NaN now (most lines)
	}
	var lower string
	for name, r := range w.runs {
		if step <= r.step || slices.ContainsFunc(pts, func(p logparse.Point) bool { return p.Name == name }) {
			continue
		}
		if lower == "" {
			lower = strings.ToLower(line)
		}
		if showsNaN(lower, name) {
			r.step = step
			count(name, last(name), r, step)
		}
	}
	return streak
}

// text is the streak in the supervisor's words (the record's detail).
func (n *NaNStreak) text() string {
	return fmt.Sprintf("%s is %v for %d points in a row (step %d)", n.Metric, n.Value, n.Count, n.Step)
}

// IsLossName reports whether a metric name looks like a loss.
func IsLossName(name string) bool {
	if strings.Contains(name, "loss") { // the parser's names are lower-case: no copy
		return true
	}
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
	step, seen := a.seen.progress.Step, &a.seen
	var fired []string
	for _, rs := range a.rules {
		text := ""
		switch rs.rule.Metric {
		case MetricStepsPerSec:
			if !seen.firstMetric.IsZero() && now.Sub(seen.firstMetric) >= time.Minute/2 {
				text = rs.observe(now, step, seen.rate.perSecond())
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
	if len(fired) > 0 {
		a.queuePoints() // the points that fired them are in the store's queue, as the alerts go out
	}
	for _, text := range fired {
		a.log.Info("alert rule fired", "detail", text)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeRule, Text: text}})
	}
}

// unseenRules says which rules watched a metric the run never gave.
func (a *active) unseenRules() []UnseenRule {
	var out []UnseenRule
	for _, rs := range a.rules {
		if !rs.seen {
			out = append(out, UnseenRule{Rule: rs.rule.String(), Metric: rs.rule.Metric})
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
	stall := a.stall.observe(now, a.lastOutput, a.seen.lastMetric, a.stopReq != nil)
	a.mu.Unlock()
	if stall != nil {
		a.queuePoints()
		alert := stall.text()
		a.log.Warn("run stalled", "detail", alert)
		a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeStalled, Text: alert, Stall: stall}})
	}
}

// stallWatch raises a stalled alert once a run has printed nothing and
// reported no metric for after, and again only after it spoke meanwhile.
// A pure function of the times it is shown.
type stallWatch struct {
	after   time.Duration // stall_after; 0: off
	stalled bool
}

// observe returns the stall to raise now, nil if none: lastOutput and
// lastMetric are when the run last printed and last reported a metric
// (zero: never); a run being stopped raises none.
func (w *stallWatch) observe(now, lastOutput, lastMetric time.Time, stopping bool) *Stall {
	if w.after <= 0 {
		return nil
	}
	quiet := now.Sub(lastOutput)
	if m := now.Sub(lastMetric); !lastMetric.IsZero() && m < quiet {
		quiet = m
	}
	switch {
	case quiet >= w.after && !w.stalled && !stopping:
		w.stalled = true
		return &Stall{Quiet: quiet.Round(time.Second), After: w.after}
	case quiet < w.after && w.stalled:
		w.stalled = false
	}
	return nil
}

// text is the stall in the supervisor's words.
func (s *Stall) text() string {
	return fmt.Sprintf("no output and no metric for %s (stall_after %s); the process is still alive", s.Quiet, s.After)
}

package trainer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/units"
)

// AlertRule is one of the user's own alerts ([[alerts]] for every job,
// [[jobs.alerts]] for one): a condition on a metric that, once it has held
// for a number of steps or a time, raises an alert. It fires once per run
// until the condition clears.
type AlertRule struct {
	Metric string  // a metric the run prints, or MetricStepsPerSec, MetricGPUUtil
	When   string  // RuleAbove, RuleBelow, RuleNoImprovement, RuleRateBelow
	Value  float64 // the threshold; for no_improvement the least change that counts (default 0); for rate_below per second
	// ForSteps or ForTime is how long the condition must hold (at most one
	// is set; neither: at once). no_improvement needs one; rate_below
	// needs ForTime (its window).
	ForSteps int64
	ForTime  time.Duration
	Message  string // the alert's first words; "" says the rule
}

// Rule conditions.
const (
	RuleAbove         = "above"
	RuleBelow         = "below"
	RuleNoImprovement = "no_improvement"
	RuleRateBelow     = "rate_below"
)

// Metrics that the run does not print but trainbot measures.
const (
	MetricStepsPerSec = "steps_per_s" // steps per second over the last minute
	MetricGPUUtil     = "gpu_util"    // utilisation (%) of the GPUs the run's processes use, from NVML
)

// Validate checks a rule; errors name the key.
func (r AlertRule) Validate() error {
	var errs []error
	if strings.TrimSpace(r.Metric) == "" {
		errs = append(errs, keyErr("metric", "name the metric to watch (a metric the run prints, steps_per_s or gpu_util)"))
	}
	switch r.When {
	case RuleAbove, RuleBelow:
	case RuleNoImprovement:
		if r.ForSteps == 0 && r.ForTime == 0 {
			errs = append(errs, keyErr("for", `no_improvement needs how long, e.g. for = "20 steps" or "10m"`))
		}
		if r.Value < 0 {
			errs = append(errs, keyErr("value", "the least improvement that counts cannot be negative"))
		}
	case RuleRateBelow:
		if r.ForTime == 0 {
			errs = append(errs, keyErr("for", `rate_below needs a time window, e.g. for = "5m"`))
		}
	default:
		errs = append(errs, keyErr("when", "%q is not one of above, below, no_improvement, rate_below", r.When))
	}
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		errs = append(errs, keyErr("value", "want a finite number"))
	}
	if r.ForSteps < 0 || r.ForTime < 0 {
		errs = append(errs, keyErr("for", "cannot be negative"))
	}
	return errors.Join(errs...)
}

// String describes the rule: "loss no_improvement for 20 steps".
func (r AlertRule) String() string {
	s := r.Metric + " " + r.When
	if r.When != RuleNoImprovement || r.Value != 0 {
		s += " " + strconv.FormatFloat(r.Value, 'g', -1, 64)
	}
	switch {
	case r.ForSteps > 0:
		s += fmt.Sprintf(" for %d steps", r.ForSteps)
	case r.ForTime > 0:
		s += " for " + units.Duration(r.ForTime)
	}
	return s
}

// ParseFor reads a rule's for: "20 steps", "20 step", or a duration
// ("90s", "10m", "2h"; parse reads durations).
func ParseFor(s string, parse func(string) (time.Duration, error)) (steps int64, d time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	if n, unit, ok := strings.Cut(s, " "); ok && (strings.TrimSpace(unit) == "steps" || strings.TrimSpace(unit) == "step") {
		var k int64
		if _, err := fmt.Sscan(n, &k); err != nil || k <= 0 {
			return 0, 0, fmt.Errorf("%q: want a positive number of steps, e.g. \"20 steps\"", s)
		}
		return k, 0, nil
	}
	d, err = parse(s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: want a number of steps (\"20 steps\") or a duration (\"10m\")", s)
	}
	return 0, d, nil
}

// lowerIsBetter says which way a metric improves: losses, errors and
// perplexities go down; accuracies, scores and rewards go up.
func lowerIsBetter(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"loss", "err", "perplex", "ppl", "wer", "cer", "mse", "mae", "rmse", "nll"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// ruleState is a rule's state in one run.
type ruleState struct {
	rule  AlertRule
	seen  bool // the run gave the metric a value
	fired bool // the alert was raised and the condition has not cleared since

	holding   bool // above, below: the condition holds since
	sinceStep int64
	sinceAt   time.Time
	best      float64 // no_improvement
	bestStep  int64
	bestAt    time.Time
	hasBest   bool
	hist      []rulePoint // rate_below: the window's values
	lastValue float64
}

type rulePoint struct {
	at time.Time
	v  float64
}

// observe takes a new value of the rule's metric at step and time now;
// it returns the alert text when the rule fires.
func (s *ruleState) observe(now time.Time, step int64, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "" // the NaN watch tells those
	}
	s.seen, s.lastValue = true, v
	r := s.rule
	switch r.When {
	case RuleAbove, RuleBelow:
		cond := (r.When == RuleAbove && v > r.Value) || (r.When == RuleBelow && v < r.Value)
		if !cond {
			s.holding, s.fired = false, false
			return ""
		}
		if !s.holding {
			s.holding, s.sinceStep, s.sinceAt = true, step, now
		}
	case RuleNoImprovement:
		lower := lowerIsBetter(r.Metric)
		if !s.hasBest || (lower && v < s.best-r.Value) || (!lower && v > s.best+r.Value) {
			s.best, s.bestStep, s.bestAt, s.hasBest, s.fired = v, step, now, true, false
			return ""
		}
	case RuleRateBelow:
		s.hist = append(s.hist, rulePoint{now, v})
	}
	return s.check(now, step)
}

// check says whether the rule fires at now (and step), with no new value:
// conditions that hold for a time fire without one.
func (s *ruleState) check(now time.Time, step int64) string {
	r := s.rule
	if !s.seen || (s.fired && r.When != RuleRateBelow) {
		return ""
	}
	held := false
	detail := ""
	switch r.When {
	case RuleAbove, RuleBelow:
		held = s.holding && ((r.ForSteps == 0 && r.ForTime == 0) ||
			(r.ForSteps > 0 && step-s.sinceStep >= r.ForSteps) ||
			(r.ForTime > 0 && now.Sub(s.sinceAt) >= r.ForTime))
		detail = fmt.Sprintf("%s is %s", r.Metric, units.Metric(r.Metric, s.lastValue))
	case RuleNoImprovement:
		held = s.hasBest && ((r.ForSteps > 0 && step-s.bestStep >= r.ForSteps) ||
			(r.ForTime > 0 && now.Sub(s.bestAt) >= r.ForTime))
		since := fmt.Sprintf("step %d", s.bestStep)
		if r.ForTime > 0 {
			since += ", " + units.Duration(now.Sub(s.bestAt)) + " ago"
		}
		detail = fmt.Sprintf("%s is %s; its best was %s at %s", r.Metric, units.Metric(r.Metric, s.lastValue), units.Metric(r.Metric, s.best), since)
	case RuleRateBelow:
		// The window: the values of the last ForTime (the oldest one just
		// before it is the rate's start).
		cut := 0
		for cut+1 < len(s.hist) && now.Sub(s.hist[cut+1].at) >= r.ForTime {
			cut++
		}
		s.hist = s.hist[cut:]
		if len(s.hist) < 2 || now.Sub(s.hist[0].at) < r.ForTime {
			return ""
		}
		first, last := s.hist[0], s.hist[len(s.hist)-1]
		rate := (last.v - first.v) / now.Sub(first.at).Seconds()
		if rate >= r.Value {
			s.fired = false // cleared
			return ""
		}
		if s.fired {
			return ""
		}
		held = true
		detail = fmt.Sprintf("%s grew %s/s over the last %s", r.Metric, units.Metric(r.Metric, rate), units.Duration(now.Sub(first.at)))
	}
	if !held {
		return ""
	}
	s.fired = true
	msg := r.Message
	if msg == "" {
		msg = "rule " + r.String()
	}
	return fmt.Sprintf("%s (rule: %s): %s", msg, r.String(), detail)
}

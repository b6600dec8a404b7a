package trainer

import (
	"math"
	"slices"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// pointsPerWindow is how many points of one metric are stored per window
// before thinning starts; beyond it, only the minimum, the maximum and the
// last point of the window are. A window is one second during a run's
// first hour and then 1/3600 of the run's age (10 s at ten hours), so a
// metric printed thousands of times a second for three days keeps about a
// million points — a chart with the same envelope, read in about a second
// — while scripts that log less often (nearly all) keep every point.
// Progress, status and the NaN watch still see every point.
const pointsPerWindow = 50

// thinner decides which points are stored.
type thinner struct {
	start   time.Time // the run's start; zero means windows of one second
	metrics map[string]*thinWindow
}

// window is the thinning window at a given time.
func (t *thinner) window(now time.Time) time.Duration {
	if t.start.IsZero() {
		return time.Second
	}
	return max(time.Second, now.Sub(t.start)/3600)
}

type thinWindow struct {
	start          time.Time
	n              int
	min, max, last logparse.Point
	held           bool // min/max/last hold points not yet stored
}

// width is the step width a metric is thinned to in the store.
func (t *thinner) width(string) int64 { return 1 }

// keep returns the points to store now, and the metrics whose stored
// points the store must thin (none: this thinner decides in memory).
func (t *thinner) keep(now time.Time, pts []logparse.Point) ([]TimedPoint, []string) {
	var out []TimedPoint
	for _, p := range t.keepPoints(now, pts) {
		out = append(out, TimedPoint{Point: p, At: now})
	}
	return out, nil
}

func (t *thinner) keepPoints(now time.Time, pts []logparse.Point) []logparse.Point {
	if t.metrics == nil {
		t.metrics = map[string]*thinWindow{}
	}
	out := pts[:0:0]
	for _, p := range pts {
		w := t.metrics[p.Name]
		if w == nil {
			w = &thinWindow{start: now}
			t.metrics[p.Name] = w
		}
		if now.Sub(w.start) >= t.window(now) {
			out = w.release(out)
			w.start, w.n = now, 0
		}
		if w.n < pointsPerWindow {
			w.n++
			out = append(out, p)
			continue
		}
		if !w.held {
			w.min, w.max, w.held = p, p, true
		}
		if p.Value < w.min.Value || w.min.Value != w.min.Value {
			w.min = p
		}
		if p.Value > w.max.Value || w.max.Value != w.max.Value {
			w.max = p
		}
		w.last = p
	}
	return out
}

// release appends the held extremes of a window, in step order, once each.
func (w *thinWindow) release(out []logparse.Point) []logparse.Point {
	if !w.held {
		return out
	}
	w.held = false
	held := []logparse.Point{w.min, w.max, w.last}
	slices.SortStableFunc(held, func(a, b logparse.Point) int { return int(a.Step - b.Step) })
	for i, p := range held {
		if i > 0 && samePoint(p, held[i-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// flush returns every held point (at the end of a run).
func (t *thinner) flush() []TimedPoint {
	var out []TimedPoint
	for _, p := range t.flushPoints() {
		out = append(out, TimedPoint{Point: p, At: time.Now()})
	}
	return out
}

func (t *thinner) flushPoints() []logparse.Point {
	var out []logparse.Point
	for _, w := range t.metrics {
		out = w.release(out)
	}
	slices.SortStableFunc(out, func(a, b logparse.Point) int { return int(a.Step - b.Step) })
	return out
}

func samePoint(a, b logparse.Point) bool {
	return a.Step == b.Step && a.Name == b.Name && math.Float64bits(a.Value) == math.Float64bits(b.Value)
}

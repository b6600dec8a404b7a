package trainer

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// Storage thinning, in step space. Every point of a metric is stored while
// the metric's steps span at most MaxBuckets steps. Beyond that, the steps
// are cut into buckets of a width from the sequence 1, 2, 10, 20, 100, 200,
// 1000, … (each width divides the next, so buckets nest and merging two
// never loses an extreme), the smallest that leaves at most MaxBuckets
// buckets across the metric's step range, which makes at least
// MaxBuckets/5 = 2,000; and of each bucket only the first, the minimum, the
// maximum and the last point are stored. So a metric stores at most about
// 4×MaxBuckets points however many it printed (ThinBudget when its step
// counter goes back), and a chart of them has the exact envelope of every
// bucket. Of the NaN, +Inf and -Inf points of a bucket, the first and the
// last of each kind are stored (counted apart, against ThinBudget): a chart
// marks every pixel column that had one (a bucket is narrower than a
// column, so it spans at most two, and its first and last mark both), and
// a run that diverged and went on printing NaN stores at most 6 of them
// per bucket, not one per step.
//
// The decision depends only on the sequence of points (never on a clock):
// the same points give the same points to store, whatever the batches they
// come in (a thinning is asked after the batch that needs it, which may
// leave a few more or fewer points stored). In memory a metric holds only
// its open bucket (the latest step's); the points that bucket passes on to
// the store are decided when a later bucket begins. When the width grows,
// what is stored already is thinned to the new width by the store
// (Recorder.ThinPoints); the store applies the same rule in SQL.
//
// Progress, status and the NaN watch still see every point.
const (
	// MaxBuckets is the most buckets across a series' range.
	MaxBuckets = 10_000
	// ThinBudget is how many points of a series may be stored before the
	// store is asked to thin them at the current width: a step counter that
	// goes back (one per epoch) adds points to closed buckets. Thinning
	// leaves at most 4 points per bucket, so the budget leaves room for
	// MaxBuckets more points between two thinnings (each reads the whole
	// series: about 0.2 s for 40,000 points).
	ThinBudget = 5 * MaxBuckets
)

// BucketWidth is the width of the buckets of a series whose keys (steps,
// or milliseconds for time series) span span: the smallest of 1, 2, 10, 20,
// 100, … that leaves at most maxBuckets buckets (MaxBuckets for metrics),
// which leaves more than maxBuckets/5 once it is more than 1.
func BucketWidth(span, maxBuckets int64) int64 {
	w := int64(1)
	for span/w > maxBuckets {
		w = nextWidth(w)
	}
	return w
}

// nextWidth follows 1, 2, 10, 20, 100, …
func nextWidth(w int64) int64 {
	if leading(w) == 1 {
		return 2 * w
	}
	return 5 * w
}

// leading is the leading decimal digit of w > 0.
func leading(w int64) int64 {
	for w >= 10 {
		w /= 10
	}
	return w
}

// BucketOf is floor(key / width): the bucket of a step (or a time in ms)
// at a width, for the thinner here and the store.
func BucketOf(key, width int64) int64 {
	if key >= 0 {
		return key / width
	}
	return (key+1)/width - 1
}

// thinner decides which points of a run are stored.
type thinner struct {
	metrics map[string]*thinSeries
	// The series of the last point: a line's metric is mostly the one of
	// the line before (with the parser's copy of its name).
	lastName string
	last     *thinSeries
}

// thinSeries is one metric's state.
type thinSeries struct {
	width   int64
	noWiden int64 // the widest span of steps (hi - lo) the width holds: (MaxBuckets+1)·width - 1
	lo, hi  int64 // the range of steps seen
	stored  int   // an upper bound on the finite points stored
	open    bool  // bucket is open: first was passed on
	bucket  int64
	// The steps of the open bucket, [bStart, bNext), when it is one of
	// steps >= 0 (no division for a point inside it: most points).
	bStart, bNext int64
	n             int // points of the open bucket so far
	// The open bucket's first point (passed on) and its candidates: the
	// minimum, the maximum and the last point (by step) so far.
	first, min, max, last heldPoint
	// The non-finite points, by kind (nonFinite): the open bucket of each
	// kind, its first point's step (passed on) and its last point, held.
	nf       [3]nonFiniteBucket
	nfStored int // an upper bound on the non-finite points stored
}

// nonFiniteBucket is the open bucket of one kind of non-finite point.
type nonFiniteBucket struct {
	open, held bool
	bucket     int64
	firstStep  int64
	last       TimedPoint
}

// nonFinite is the kind of a non-finite value: 0 NaN, 1 +Inf, 2 -Inf.
func nonFinite(v float64) int {
	switch {
	case math.IsNaN(v):
		return 0
	case v > 0:
		return 1
	}
	return 2
}

// heldPoint is a point of the open bucket and its arrival index in it.
type heldPoint struct {
	TimedPoint
	k int
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// keep takes the points of one line, written at at, and returns the points
// to store now, and the names of the metrics whose stored points the store
// must thin to width(name) (after storing out).
func (t *thinner) keep(at time.Time, pts []logparse.Point) (out []TimedPoint, thin []string) {
	return t.appendKeep(nil, at, pts, SourceOutput)
}

// appendKeep is keep for points read from src, appending the points to
// store to out.
func (t *thinner) appendKeep(out []TimedPoint, at time.Time, pts []logparse.Point, src Source) (_ []TimedPoint, thin []string) {
	if t.metrics == nil {
		t.metrics = map[string]*thinSeries{}
	}
	for i := range pts {
		p := &pts[i]
		s := t.last
		if s == nil || p.Name != t.lastName {
			if s = t.metrics[p.Name]; s == nil {
				s = &thinSeries{lo: p.Step, hi: p.Step}
				s.setWidth(1)
				t.metrics[p.Name] = s
			}
			t.lastName, t.last = p.Name, s
		}
		var mustThin bool
		out, mustThin = s.add(out, p, at, src)
		if mustThin && !slices.Contains(thin, p.Name) {
			thin = append(thin, p.Name)
		}
	}
	return out, thin
}

// width is the current bucket width of a metric (1 when unknown).
func (t *thinner) width(name string) int64 {
	if s := t.metrics[name]; s != nil {
		return s.width
	}
	return 1
}

// flush returns every point still held (at the end of a run), metric by
// metric in name order, each in step order.
func (t *thinner) flush() []TimedPoint {
	names := slices.Sorted(maps.Keys(t.metrics))
	var out []TimedPoint
	for _, n := range names {
		s := t.metrics[n]
		start := len(out)
		out = s.release(out)
		for k := range s.nf {
			out = s.releaseNonFinite(out, k)
		}
		slices.SortStableFunc(out[start:], func(a, b TimedPoint) int { return cmp.Compare(a.Step, b.Step) })
	}
	return out
}

// setWidth sets the width of the buckets.
func (s *thinSeries) setWidth(w int64) {
	s.width, s.noWiden = w, math.MaxInt64 // a width this wide holds every span
	if w <= math.MaxInt64/(MaxBuckets+1) {
		s.noWiden = (MaxBuckets+1)*w - 1
	}
}

// setBucket makes b the open bucket.
func (s *thinSeries) setBucket(b int64) {
	s.bucket, s.bStart, s.bNext = b, 0, 0 // an empty range: BucketOf decides
	if b >= 0 && b < math.MaxInt64/s.width {
		s.bStart, s.bNext = b*s.width, (b+1)*s.width
	}
}

// timed is a point as stored: read at at from src.
func timed(p *logparse.Point, at time.Time, src Source) TimedPoint {
	return TimedPoint{Point: *p, At: at, Source: src}
}

// add takes one point, read at at from src; mustThin says the store must
// thin the metric.
func (s *thinSeries) add(out []TimedPoint, pt *logparse.Point, at time.Time, src Source) (_ []TimedPoint, mustThin bool) {
	s.lo, s.hi = min(s.lo, pt.Step), max(s.hi, pt.Step)
	if s.hi-s.lo > s.noWiden { // (hi-lo)/width > MaxBuckets, without a division
		s.setWidth(BucketWidth(s.hi-s.lo, MaxBuckets))
		mustThin = true
		s.setBucket(BucketOf(s.first.Step, s.width)) // the open bucket is inside this one
		s.stored = min(s.stored, 4*s.buckets())
		for k := range s.nf {
			s.nf[k].bucket = BucketOf(s.nf[k].firstStep, s.width)
		}
		s.nfStored = min(s.nfStored, 2*len(s.nf)*s.buckets())
	}
	if !finite(pt.Value) {
		out, mustThin = s.addNonFinite(out, timed(pt, at, src), mustThin)
		return out, mustThin
	}
	b := s.bucket
	if pt.Step < s.bStart || pt.Step >= s.bNext {
		b = BucketOf(pt.Step, s.width)
	}
	switch {
	case !s.open || b > s.bucket:
		out = s.release(out)
		h := heldPoint{TimedPoint: timed(pt, at, src)}
		s.open, s.n = true, 1
		s.setBucket(b)
		s.first, s.min, s.max, s.last = h, h, h, h
		out = append(out, h.TimedPoint)
		s.stored++
	case b == s.bucket:
		k := s.n
		s.n++
		v, step := pt.Value, pt.Step
		if v < s.min.Value || (v == s.min.Value && step < s.min.Step) {
			s.min = heldPoint{TimedPoint: timed(pt, at, src), k: k}
		}
		if v > s.max.Value || (v == s.max.Value && step >= s.max.Step) {
			s.max = heldPoint{TimedPoint: timed(pt, at, src), k: k}
		}
		if step >= s.last.Step {
			s.last = heldPoint{TimedPoint: timed(pt, at, src), k: k}
		}
	default: // a bucket already closed: the step counter went back
		out = append(out, timed(pt, at, src))
		s.stored++
	}
	if s.stored > ThinBudget {
		mustThin = true
		s.stored = 4 * s.buckets()
	}
	return out, mustThin
}

// addNonFinite takes a NaN or ±Inf point: the first of its kind in its
// bucket is passed on at once, the last is held until a later bucket of
// its kind begins (or the run ends); one of a closed bucket (the step
// counter went back) is passed on, for the store's thinning.
func (s *thinSeries) addNonFinite(out []TimedPoint, p TimedPoint, mustThin bool) ([]TimedPoint, bool) {
	k := nonFinite(p.Value)
	nf := &s.nf[k]
	b := BucketOf(p.Step, s.width)
	switch {
	case !nf.open || b > nf.bucket:
		out = s.releaseNonFinite(out, k)
		nf.open, nf.bucket, nf.firstStep = true, b, p.Step
		out = append(out, p)
		s.nfStored++
	case b == nf.bucket && p.Step >= nf.firstStep && (!nf.held || p.Step >= nf.last.Step):
		nf.last, nf.held = p, true
	default:
		out = append(out, p)
		s.nfStored++
	}
	if s.nfStored > ThinBudget {
		mustThin = true
		s.nfStored = 2 * len(s.nf) * s.buckets()
	}
	return out, mustThin
}

// releaseNonFinite appends the held last point of kind k, if any.
func (s *thinSeries) releaseNonFinite(out []TimedPoint, k int) []TimedPoint {
	if nf := &s.nf[k]; nf.held {
		out = append(out, nf.last)
		nf.held = false
		s.nfStored++
	}
	return out
}

// buckets is how many buckets the range spans.
func (s *thinSeries) buckets() int {
	return int(BucketOf(s.hi, s.width) - BucketOf(s.lo, s.width) + 1)
}

// release appends the candidates of the open bucket not passed on yet, in
// step order, once each; the bucket stays open with nothing held.
func (s *thinSeries) release(out []TimedPoint) []TimedPoint {
	if !s.open {
		return out
	}
	held := make([]heldPoint, 0, 3)
	for _, h := range []heldPoint{s.min, s.max, s.last} {
		if h.k != 0 && !slices.ContainsFunc(held, func(o heldPoint) bool { return o.k == h.k }) {
			held = append(held, h)
		}
	}
	slices.SortFunc(held, func(a, b heldPoint) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.k, b.k))
	})
	for _, h := range held {
		out = append(out, h.TimedPoint)
		s.stored++
	}
	s.min, s.max, s.last = s.first, s.first, s.first
	return out
}

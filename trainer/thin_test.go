package trainer

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// NoisyLoss is a known noisy, decaying loss curve at step i (exported for
// the child program of package trainer_test).
func NoisyLoss(i int64) float64 {
	// splitmix64 of i: noise that needs no state.
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := float64(z>>11) / (1 << 53)
	return 2*math.Exp(-float64(i)/250_000) + 0.5*u
}

// fakeStore holds what the thinner passes on and applies its thinning by
// the rule the store's SQL implements.
type fakeStore struct {
	pts   []storedPoint // in insertion order
	seq   int64
	thins []string // "name/width" in order
}

type storedPoint struct {
	TimedPoint
	seq int64
}

func (f *fakeStore) feed(t *testing.T, th *thinner, at time.Time, pts ...logparse.Point) {
	t.Helper()
	out, thin := th.keep(at, pts)
	f.add(out)
	for _, n := range thin {
		f.thin(n, th.width(n))
	}
}

func (f *fakeStore) add(out []TimedPoint) {
	for _, p := range out {
		f.seq++
		f.pts = append(f.pts, storedPoint{p, f.seq})
	}
}

// thin keeps, of each bucket of a metric's finite points, the first and
// last by (step, seq) and the minimum and maximum by value, then (step,
// seq).
func (f *fakeStore) thin(name string, width int64) {
	f.thins = append(f.thins, name+"/"+itoa(width))
	type agg struct{ first, last, lo, hi int }
	byStep := func(a, b storedPoint) int { return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.seq, b.seq)) }
	buckets := map[int64]*agg{}
	for i, p := range f.pts {
		if p.Name != name || !finite(p.Value) {
			continue
		}
		b := BucketOf(p.Step, width)
		g := buckets[b]
		if g == nil {
			buckets[b] = &agg{i, i, i, i}
			continue
		}
		if byStep(p, f.pts[g.first]) < 0 {
			g.first = i
		}
		if byStep(p, f.pts[g.last]) > 0 {
			g.last = i
		}
		if c := cmp.Or(cmp.Compare(p.Value, f.pts[g.lo].Value), byStep(p, f.pts[g.lo])); c < 0 {
			g.lo = i
		}
		if c := cmp.Or(cmp.Compare(f.pts[g.hi].Value, p.Value), byStep(p, f.pts[g.hi])); c < 0 {
			g.hi = i
		}
	}
	keep := map[int]bool{}
	for _, g := range buckets {
		keep[g.first], keep[g.last], keep[g.lo], keep[g.hi] = true, true, true, true
	}
	// Non-finite points: the first and the last of each kind per bucket.
	type kindBucket struct {
		b    int64
		kind int
	}
	ends := map[kindBucket]*agg{}
	for i, p := range f.pts {
		if p.Name != name || finite(p.Value) {
			continue
		}
		k := kindBucket{BucketOf(p.Step, width), nonFinite(p.Value)}
		g := ends[k]
		if g == nil {
			ends[k] = &agg{first: i, last: i}
			continue
		}
		if byStep(p, f.pts[g.first]) < 0 {
			g.first = i
		}
		if byStep(p, f.pts[g.last]) > 0 {
			g.last = i
		}
	}
	for _, g := range ends {
		keep[g.first], keep[g.last] = true, true
	}
	kept := f.pts[:0]
	for i, p := range f.pts {
		if p.Name != name || keep[i] {
			kept = append(kept, p)
		}
	}
	f.pts = kept
}

func (f *fakeStore) series(name string) []storedPoint {
	var out []storedPoint
	for _, p := range f.pts {
		if p.Name == name {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b storedPoint) int { return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.seq, b.seq)) })
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func loss(step int64, v float64) logparse.Point {
	return logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: v}
}

func TestBucketWidth(t *testing.T) {
	for _, c := range []struct{ span, want int64 }{
		{0, 1}, {9_999, 1}, {10_000, 1}, {10_001, 2}, {20_001, 2}, {20_002, 10},
		{100_000, 10}, {110_000, 20}, {999_999, 100}, {1_000_000, 100}, {1_000_200, 200},
		{9_999_999, 1000}, {1 << 62, 1_000_000_000_000_000},
	} {
		if got := BucketWidth(c.span, MaxBuckets); got != c.want {
			t.Errorf("BucketWidth(%d) = %d, want %d", c.span, got, c.want)
		}
	}
	// Every width leaves at most MaxBuckets buckets and, once past 1, more
	// than MaxBuckets/5.
	for span := int64(1); span < 1<<40; span = span*3 + 7 {
		w := BucketWidth(span, MaxBuckets)
		if span/w > MaxBuckets || (w > 1 && span/w < MaxBuckets/5) {
			t.Errorf("span %d: width %d leaves %d buckets", span, w, span/w)
		}
	}
}

func TestThinnerKeepsEveryPointBelowTheBound(t *testing.T) {
	var th thinner
	var f fakeStore
	at := time.Unix(1000, 0)
	for i := int64(0); i <= MaxBuckets; i++ {
		f.feed(t, &th, at.Add(time.Duration(i)*time.Millisecond), loss(i, NoisyLoss(i)), logparse.Point{Step: i, Name: "lr", Value: 1e-3})
	}
	f.add(th.flush())
	if len(f.thins) != 0 {
		t.Errorf("thinned %v, want nothing thinned", f.thins)
	}
	for _, name := range []string{"loss", "lr"} {
		got := f.series(name)
		if len(got) != MaxBuckets+1 {
			t.Fatalf("%s: stored %d points, want all %d", name, len(got), MaxBuckets+1)
		}
		for i, p := range got {
			if p.Step != int64(i) || !p.At.Equal(at.Add(time.Duration(i)*time.Millisecond)) {
				t.Fatalf("%s: point %d is step %d at %v, want step %d at the time it was given", name, i, p.Step, p.At, i)
			}
		}
	}
}

// runCurve feeds n points of NoisyLoss at steps 0..n-1, a line each, and
// checks the stored series: points in each of 1000 equal step buckets,
// each with the raw minimum and maximum of its bucket, and never more than
// ThinBudget points (and what one point may release).
func runCurve(t *testing.T, n int64) {
	var th thinner
	var f fakeStore
	at := time.Unix(1000, 0)
	rawMin, rawMax := make([]float64, 1000), make([]float64, 1000)
	per := n / 1000
	maxStored := 0
	for i := range n {
		v := NoisyLoss(i)
		b := i / per
		if i%per == 0 {
			rawMin[b], rawMax[b] = v, v
		}
		rawMin[b], rawMax[b] = min(rawMin[b], v), max(rawMax[b], v)
		f.feed(t, &th, at, loss(i, v))
		maxStored = max(maxStored, len(f.pts))
	}
	f.add(th.flush())
	got := f.series("loss")
	if len(got) > ThinBudget || maxStored > ThinBudget+4 {
		t.Errorf("%d points: stored %d at the end and %d at most, want at most %d", n, len(got), maxStored, ThinBudget)
	}
	t.Logf("%d points: %d stored, %d at most, width %d, thinned %d times", n, len(got), maxStored, th.width("loss"), len(f.thins))
	lo, hi := make([]float64, 1000), make([]float64, 1000)
	seen := make([]bool, 1000)
	for _, p := range got {
		b := p.Step / per
		if !seen[b] {
			lo[b], hi[b], seen[b] = p.Value, p.Value, true
		}
		lo[b], hi[b] = min(lo[b], p.Value), max(hi[b], p.Value)
	}
	for b := range 1000 {
		if !seen[b] || lo[b] != rawMin[b] || hi[b] != rawMax[b] {
			t.Fatalf("bucket %d: stored min %v max %v (points: %v), want %v and %v", b, lo[b], hi[b], seen[b], rawMin[b], rawMax[b])
		}
	}
	if first, last := got[0], got[len(got)-1]; first.Step != 0 || last.Step != n-1 {
		t.Errorf("the stored steps go from %d to %d, want 0 to %d", first.Step, last.Step, n-1)
	}
}

func TestThinnerKeepsTheEnvelopeOfAMillionPoints(t *testing.T) {
	runCurve(t, 1_000_000)
}

func TestThinnerKeepsTheEnvelopeOfTenMillionPoints(t *testing.T) {
	if testing.Short() || RaceEnabled {
		t.Skip("10⁷ points take about 10 s under -race (the 10⁶ test runs the same code)")
	}
	runCurve(t, 10_000_000)
}

func TestThinnerIsDeterministic(t *testing.T) {
	// The decisions are per point: the same points, one per line or a
	// hundred per batch at other times, give the same points to store in
	// the same order and end at the same width. (The thinnings asked come
	// after a batch, not after the point that asked: what a store keeps
	// then differs, within the same bounds.) The same batches give the
	// same thinnings too.
	type result struct {
		steps  []int64
		thins  []string
		width  int64
		stored int
	}
	runOnce := func(batch int, at time.Time) result {
		var th thinner
		var f fakeStore
		var r result
		var pts []logparse.Point
		feed := func() {
			out, thin := th.keep(at, pts)
			for _, p := range out {
				r.steps = append(r.steps, p.Step)
			}
			f.add(out)
			for _, n := range thin {
				r.thins = append(r.thins, n+"/"+itoa(th.width(n)))
				f.thin(n, th.width(n))
			}
			pts = pts[:0]
		}
		for i := int64(1); i <= 100_000; i++ {
			pts = append(pts, loss(i%40_000, NoisyLoss(i))) // back to 0 twice
			if len(pts) == batch {
				feed()
			}
		}
		feed()
		for _, p := range th.flush() {
			r.steps = append(r.steps, p.Step)
		}
		r.width, r.stored = th.width("loss"), len(f.pts)
		return r
	}
	a, b := runOnce(1, time.Unix(0, 0)), runOnce(100, time.Unix(99, 0))
	if !slices.Equal(a.steps, b.steps) || a.width != b.width {
		t.Fatalf("line by line: %d points, width %d; in batches: %d points, width %d", len(a.steps), a.width, len(b.steps), b.width)
	}
	if c := runOnce(100, time.Unix(5, 0)); !slices.Equal(b.thins, c.thins) || b.stored != c.stored {
		t.Fatalf("the same batches: thinned %v, stored %d, then %v, stored %d", b.thins, b.stored, c.thins, c.stored)
	}
	t.Logf("line by line: stored %d, thinned %d times; in batches: stored %d, thinned %d times", a.stored, len(a.thins), b.stored, len(b.thins))
}

func TestThinnerKeepsNaNAndInf(t *testing.T) {
	var th thinner
	var f fakeStore
	at := time.Unix(1000, 0)
	var special []int64
	for i := int64(1); i <= 200_000; i++ {
		v := NoisyLoss(i)
		switch i % 997 {
		case 0:
			v, special = math.NaN(), append(special, i)
		case 1:
			v, special = math.Inf(1), append(special, i)
		case 2:
			v, special = math.Inf(-1), append(special, i)
		}
		out, thin := th.keep(at, []logparse.Point{loss(i, v)})
		if !finite(v) && (len(out) == 0 || out[len(out)-1].Step != i) {
			t.Fatalf("step %d: %v not passed on at once (got %v)", i, v, out)
		}
		f.add(out)
		for _, n := range thin {
			f.thin(n, th.width(n))
		}
	}
	f.add(th.flush())
	var got []int64
	for _, p := range f.series("loss") {
		if !finite(p.Value) {
			got = append(got, p.Step)
		}
	}
	if !slices.Equal(got, special) {
		t.Fatalf("kept %d NaN/Inf points, want all %d", len(got), len(special))
	}
}

// TestThinnerBoundsANaNFlood: a run that diverged and printed NaN (and
// some Inf) at every step for 10⁶ steps stores the first and last of each
// kind per bucket, and every bucket that had one still has one.
func TestThinnerBoundsANaNFlood(t *testing.T) {
	var th thinner
	var f fakeStore
	at := time.Unix(1000, 0)
	const steps = 1_000_000
	had := map[[2]int64]bool{} // bucket of the final width, kind
	for i := int64(1); i <= steps; i++ {
		v := NoisyLoss(i)
		switch {
		case i > steps/10 && i%1000 == 7:
			v = math.Inf(1)
		case i > steps/10:
			v = math.NaN()
		}
		out, thin := th.keep(at, []logparse.Point{loss(i, v)})
		f.add(out)
		for _, n := range thin {
			f.thin(n, th.width(n))
		}
	}
	f.add(th.flush())
	width := th.width("loss")
	for i := int64(steps/10 + 1); i <= steps; i++ {
		kind := int64(0)
		if i%1000 == 7 {
			kind = 1
		}
		had[[2]int64{BucketOf(i, width), kind}] = true
	}
	got := map[[2]int64]bool{}
	nonFin := 0
	for _, p := range f.series("loss") {
		if !finite(p.Value) {
			nonFin++
			got[[2]int64{BucketOf(p.Step, width), int64(nonFinite(p.Value))}] = true
		}
	}
	if len(got) != len(had) {
		t.Errorf("%d buckets and kinds have a stored NaN/Inf, want the %d that had one", len(got), len(had))
	}
	if max := 2 * len(had); nonFin > max {
		t.Errorf("stored %d NaN/Inf points, want at most %d (width %d)", nonFin, max, width)
	}
	t.Logf("width %d: %d NaN/Inf points stored of %d printed", width, nonFin, steps-steps/10)
}

func TestThinnerBoundsAStepCounterThatGoesBack(t *testing.T) {
	// A step counter that starts over each epoch: 1000 epochs of steps
	// 0..999 put every point after the first epoch in a closed bucket.
	var th thinner
	var f fakeStore
	at := time.Unix(1000, 0)
	rawMin, rawMax := make([]float64, 1000), make([]float64, 1000)
	maxStored := 0
	for e := int64(0); e < 1000; e++ {
		for s := int64(0); s < 1000; s++ {
			v := NoisyLoss(e*1000 + s)
			if e == 0 {
				rawMin[s], rawMax[s] = v, v
			}
			rawMin[s], rawMax[s] = min(rawMin[s], v), max(rawMax[s], v)
			f.feed(t, &th, at, loss(s, v))
			maxStored = max(maxStored, len(f.pts))
		}
	}
	f.add(th.flush())
	if maxStored > ThinBudget+4 {
		t.Errorf("stored %d points at most, want at most %d", maxStored, ThinBudget)
	}
	lo, hi := map[int64]float64{}, map[int64]float64{}
	for _, p := range f.series("loss") {
		if _, ok := lo[p.Step]; !ok {
			lo[p.Step], hi[p.Step] = p.Value, p.Value
		}
		lo[p.Step], hi[p.Step] = min(lo[p.Step], p.Value), max(hi[p.Step], p.Value)
	}
	for s := range int64(1000) {
		if lo[s] != rawMin[s] || hi[s] != rawMax[s] {
			t.Fatalf("step %d: stored min %v max %v, want %v and %v", s, lo[s], hi[s], rawMin[s], rawMax[s])
		}
	}
	t.Logf("stored %d at the end, %d at most, thinned %d times", len(f.pts), maxStored, len(f.thins))
}

func TestThinnerHeldPointsKeepTheirTime(t *testing.T) {
	// 30,000 steps make buckets of 10: the minimum at step 30,005 is held
	// until step 30,010 arrives, and keeps the time its line was written.
	var th thinner
	var f fakeStore
	t0 := time.Unix(1000, 0)
	f.feed(t, &th, t0, loss(0, 1), loss(29_999, 1), loss(30_000, 1))
	if w := th.width("loss"); w != 10 {
		t.Fatalf("width %d, want 10", w)
	}
	for s := int64(30_001); s < 30_010; s++ {
		v := 1.0
		if s == 30_005 {
			v = 0.5
		}
		f.feed(t, &th, t0.Add(time.Duration(s-30_000)*time.Second), loss(s, v))
	}
	f.feed(t, &th, t0.Add(time.Hour), loss(30_010, 1))
	var steps []int64
	for _, p := range f.series("loss") {
		steps = append(steps, p.Step)
		if p.Step == 30_005 && !p.At.Equal(t0.Add(5*time.Second)) {
			t.Errorf("the minimum has time %v, want %v", p.At, t0.Add(5*time.Second))
		}
	}
	if want := []int64{0, 29_999, 30_000, 30_005, 30_009, 30_010}; !slices.Equal(steps, want) {
		t.Fatalf("stored steps %v, want %v", steps, want)
	}
}

// A metric whose steps span all of int64 (TensorBoard steps are raw
// int64) takes the widest width once, and is not thinned again at every
// point: no width is wider than one that holds every span.
func TestThinnerWidestSpanThinsOnce(t *testing.T) {
	var th thinner
	thins := 0
	for i, step := range []int64{0, math.MaxInt64, math.MaxInt64, math.MaxInt64 - 1, 5, math.MaxInt64} {
		if _, thin := th.keep(time.Unix(int64(i), 0), []logparse.Point{loss(step, 1)}); len(thin) > 0 {
			thins++
		}
	}
	if thins != 1 {
		t.Errorf("thinned %d times over a span of MaxInt64 (width %d), want once", thins, th.width("loss"))
	}
}

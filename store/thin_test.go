package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

func newRun(t testing.TB, s *Store) int64 {
	t.Helper()
	id, err := s.CreateRun(context.Background(), &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// noise is a deterministic value in [0, 1) for i.
func noise(i int64) float64 {
	z := uint64(i)*0x9e3779b97f4a7c15 + 1
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

type keyed struct {
	step, seq int64
	v         float64
}

// thinned is what thinning pts (in insertion order) to width keeps: per
// bucket, the first and last by (step, seq), the first minimum and the
// last maximum by (value, step, seq); the first and last NaN, +Inf and
// -Inf by (step, seq).
func thinned(pts []logparse.Point, width int64) []keyed {
	var all []keyed
	for i, p := range pts {
		all = append(all, keyed{p.Step, int64(i), p.Value})
	}
	byStep := func(a, b keyed) int { return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.seq, b.seq)) }
	slices.SortFunc(all, byStep)
	var out []keyed
	for i := 0; i < len(all); {
		j := i
		var fin []keyed
		var nonFin [3][]keyed // NaN, +Inf, -Inf
		for ; j < len(all) && all[j].step/width == all[i].step/width; j++ {
			switch v := all[j].v; {
			case math.IsNaN(v):
				nonFin[0] = append(nonFin[0], all[j])
			case math.IsInf(v, 1):
				nonFin[1] = append(nonFin[1], all[j])
			case math.IsInf(v, -1):
				nonFin[2] = append(nonFin[2], all[j])
			default:
				fin = append(fin, all[j])
			}
		}
		for _, ks := range nonFin {
			if len(ks) > 0 {
				out = append(out, ks[0])
			}
			if len(ks) > 1 {
				out = append(out, ks[len(ks)-1])
			}
		}
		i = j
		if len(fin) == 0 {
			continue
		}
		lo := slices.MinFunc(fin, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.v, b.v), byStep(a, b)) })
		hi := slices.MaxFunc(fin, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.v, b.v), byStep(a, b)) })
		for _, k := range []keyed{fin[0], lo, hi, fin[len(fin)-1]} {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, byStep)
	return out
}

// stored reads a metric's rows with seq (relative to the run's first).
func stored(t *testing.T, s *Store, run int64, name string) []keyed {
	t.Helper()
	rows, err := s.r.Query(`SELECT m.step, m.seq - (SELECT min(seq) FROM metrics WHERE run_id = ?1), m.value FROM metrics m
		JOIN metric_names n ON n.id = m.name_id WHERE m.run_id = ?1 AND n.name = ?2 ORDER BY m.step, m.seq`, run, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []keyed
	for rows.Next() {
		var k keyed
		var v *float64
		if err := rows.Scan(&k.step, &k.seq, &v); err != nil {
			t.Fatal(err)
		}
		k.v = math.NaN()
		if v != nil {
			k.v = *v
		}
		out = append(out, k)
	}
	return out
}

func sameKeyed(a, b []keyed) bool {
	return slices.EqualFunc(a, b, func(x, y keyed) bool {
		return x.step == y.step && x.seq == y.seq && (x.v == y.v || (math.IsNaN(x.v) && math.IsNaN(y.v)))
	})
}

func TestThinPoints(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	run, other := newRun(t, s), newRun(t, s)
	var pts []logparse.Point
	for i := range int64(2000) {
		v := noise(i)
		switch {
		case i%101 == 0:
			v = math.NaN()
		case i%103 == 0:
			v = math.Inf(1)
		case i%107 == 0:
			v = math.Inf(-1)
		case i >= 1600:
			v = 0.5 // ties: the first of them is the minimum and the maximum
		}
		pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: v})
		if i%3 == 0 { // the same step again, and a step counter that went back
			pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: noise(-i)})
			pts = append(pts, logparse.Point{Step: i / 2, Epoch: math.NaN(), Name: "loss", Value: noise(-i - 1)})
		}
	}
	acc := []logparse.Point{{Step: 1, Name: "acc", Value: 0.5}, {Step: 2, Name: "acc", Value: 0.5}, {Step: 3, Name: "acc", Value: 0.5}}
	s.AddPoints(run, timed(time.Now(), append(pts, acc...)...))
	s.AddPoints(other, timed(time.Now(), pts...))
	s.ThinPoints(run, "loss", 10)
	s.ThinPoints(run, "loss", 100) // merged into the one queued
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, want := stored(t, s, run, "loss"), thinned(pts, 100)
	if !sameKeyed(got, want) {
		t.Fatalf("kept %d points, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
	if n := len(stored(t, s, other, "loss")); n != len(pts) {
		t.Errorf("the other run has %d points, want all %d", n, len(pts))
	}
	if n := len(stored(t, s, run, "acc")); n != 3 {
		t.Errorf("acc has %d points, want all 3", n)
	}
	// Thinning again at the same width changes nothing.
	s.ThinPoints(run, "loss", 100)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if again := stored(t, s, run, "loss"); !sameKeyed(again, got) {
		t.Errorf("thinning twice: %d points, then %d", len(got), len(again))
	}
}

// TestThinPointsNaNFlood thins a metric that went NaN and stayed there
// (with some ±Inf, same steps again and a step counter that went back):
// the first and last of each kind per bucket stay.
func TestThinPointsNaNFlood(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	run := newRun(t, s)
	var pts []logparse.Point
	for i := range int64(3000) {
		v := noise(i)
		switch {
		case i >= 1000 && i%7 == 0:
			v = math.Inf(1)
		case i >= 1000 && i%11 == 0:
			v = math.Inf(-1)
		case i >= 1000:
			v = math.NaN()
		}
		pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: v})
		if i%5 == 0 {
			pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: math.NaN()})
			pts = append(pts, logparse.Point{Step: i / 3, Epoch: math.NaN(), Name: "loss", Value: math.NaN()})
		}
	}
	s.AddPoints(run, timed(time.Now(), pts...))
	s.ThinPoints(run, "loss", 100)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, want := stored(t, s, run, "loss"), thinned(pts, 100)
	if !sameKeyed(got, want) {
		t.Fatalf("kept %d points, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
	nonFin := 0
	for _, k := range got {
		if math.IsNaN(k.v) || math.IsInf(k.v, 0) {
			nonFin++
		}
	}
	if nonFin > 30*6 {
		t.Errorf("kept %d NaN/Inf points, want at most 6 in each of 30 buckets", nonFin)
	}
}

func firstDiff(a, b []keyed) string {
	for i := range min(len(a), len(b)) {
		if !sameKeyed(a[i:i+1], b[i:i+1]) {
			return fmt.Sprint(a[i:min(i+4, len(a))], " vs ", b[i:min(i+4, len(b))])
		}
	}
	return "one is a prefix of the other"
}

// A thinning runs after the points queued before it are written, however
// many batches they take.
func TestThinPointsRunsAfterThePointsBefore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.batchSize = 5000
	run := newRun(t, s)
	var pts []logparse.Point
	for i := range int64(2*s.batchSize + 1) {
		pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: noise(i)})
	}
	s.AddPoints(run, timed(time.Now(), pts...))
	s.ThinPoints(run, "loss", 1000)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := stored(t, s, run, "loss"), thinned(pts, 1000); !sameKeyed(got, want) {
		t.Fatalf("kept %d points, want %d", len(got), len(want))
	}
}

// yieldingBatch is the background writer's next batch, cut short after
// one statement as a waiting Flush makes it.
func yieldingBatch(s *Store) (more bool, err error) {
	s.flushing.Add(1)
	defer s.flushing.Add(-1)
	s.writing <- struct{}{}
	defer func() { <-s.writing }()
	return s.writeOne(s.taken+int64(len(s.pending)), true)
}

// A batch the background writer cut short (a Flush or an answer waited
// for the connection) keeps its points' seqs and its thinning: what is
// stored is what an uncut write stores, whenever the writer yielded (CI
// saw TestThinPoints keep other seqs when its Flush came mid-batch).
func TestACutBatchStoresWhatAWholeOneDoes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := newRun(t, s)
	var pts []logparse.Point
	for i := range int64(15 * rowsPerInsert) { // kept: more than one INSERT statement
		pts = append(pts, logparse.Point{Step: i / 3, Epoch: math.NaN(), Name: "loss", Value: noise(i)})
	}
	s.AddPoints(run, timed(time.Now(), pts...))
	s.ThinPoints(run, "loss", 10)
	more, err := yieldingBatch(s)
	if err != nil || !more {
		t.Fatalf("the cut batch: more %v, %v", more, err)
	}
	if n := len(stored(t, s, run, "loss")); n == 0 || n >= len(thinned(pts, 10)) {
		t.Fatalf("%d points stored by the cut batch: want some, not all", n)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := stored(t, s, run, "loss"), thinned(pts, 10); !sameKeyed(got, want) {
		t.Fatalf("kept %d points, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
}

// A thinning whose deletes the writer cut short (another write waited for
// the connection) keeps what it deleted and finishes with a later batch:
// the rows stored in the end are the thinning's, and the waiting write got
// the connection after one DELETE, not after all of them.
func TestACutThinningFinishesLater(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := newRun(t, s)
	var pts []logparse.Point
	for i := range int64(20 * rowsPerDelete) {
		pts = append(pts, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: noise(i)})
	}
	s.AddPoints(run, timed(time.Now(), pts...))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.ThinPoints(run, "loss", 100)
	if _, err := yieldingBatch(s); err != nil {
		t.Fatal(err)
	}
	want := thinned(pts, 100)
	if n := len(stored(t, s, run, "loss")); n != len(pts)-rowsPerDelete {
		t.Fatalf("%d rows after the cut thinning: want one DELETE's worth (%d) gone of %d", n, rowsPerDelete, len(pts))
	}
	s.pmu.Lock()
	queued := len(s.thins)
	s.pmu.Unlock()
	if queued != 1 {
		t.Fatalf("%d thinnings queued after the cut one, want it again", queued)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, run, "loss"); !sameKeyed(got, want) {
		t.Fatalf("kept %d points, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
}

// BenchmarkThinPoints times one thinning of 40,000 points (about the most
// a metric holds) to buckets five times wider, keeping about 16,000.
func BenchmarkThinPoints(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pts := make([]logparse.Point, 40_000)
	for i := range pts {
		pts[i] = logparse.Point{Step: int64(i) * 2, Epoch: math.NaN(), Name: "loss", Value: noise(int64(i))}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run := newRun(b, s)
		s.AddPoints(run, timed(time.Now(), pts...))
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s.ThinPoints(run, "loss", 10)
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// thinMetricsSQL is the statement the store thinned with before #35 (the
// rule in SQL, window functions over the metric's rows): the reference
// eachDrop is checked against.
const thinMetricsSQL = `DELETE FROM metrics WHERE run_id = ?1 AND name_id = ?2 AND (step, seq) IN (
	SELECT step, seq FROM (
		SELECT step, seq, row_number() OVER s AS f, count(*) OVER (s ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n,
			row_number() OVER v AS r
		FROM (SELECT step, seq, value, CASE WHEN step >= 0 THEN step / ?3 ELSE (step + 1) / ?3 - 1 END AS b
			FROM metrics WHERE run_id = ?1 AND name_id = ?2 AND value IS NOT NULL AND abs(value) < 9e999)
		WINDOW s AS (PARTITION BY b ORDER BY step, seq), v AS (PARTITION BY b ORDER BY value, step, seq))
	WHERE f > 1 AND f < n AND r > 1 AND r < n
	UNION ALL ` + nonFiniteToThin + `)`

// stepValues is a metric's stored (step, value) pairs in (step, seq) order.
func stepValues(t *testing.T, s *Store, run int64, name string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, k := range stored(t, s, run, name) {
		out = append(out, [2]float64{float64(k.step), k.v})
	}
	return out
}

// The thinning decided in Go keeps exactly the rows the SQL statement kept,
// whether the points were all stored before it or partly still queued (the
// batch's part is then never written): random series with ties, repeated
// steps, a step counter that goes back, negative steps, NaN and ±Inf.
func TestThinInGoKeepsWhatTheSQLKept(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	for c := range 12 {
		r := rand.New(rand.NewPCG(uint64(c), 35))
		n := 200 + r.IntN(3000)
		width := []int64{1, 2, 10, 20, 100}[c%5]
		pts := make([]logparse.Point, 0, n)
		step := int64(r.IntN(50)) - 25
		for range n {
			switch x := r.IntN(20); {
			case x == 0:
				step -= int64(r.IntN(300)) // the counter goes back
			case x < 4: // the same step again
			default:
				step += int64(1 + r.IntN(4))
			}
			v := float64(r.IntN(8)) / 4 // many ties
			switch x := r.IntN(30); {
			case x == 0:
				v = math.NaN()
			case x == 1:
				v = math.Inf(1)
			case x == 2:
				v = math.Inf(-1)
			case x < 10:
				v = r.Float64()
			}
			pts = append(pts, logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: v})
		}
		sqlRun, goRun, splitRun := newRun(t, s), newRun(t, s), newRun(t, s)
		for _, run := range []int64{sqlRun, goRun} {
			s.AddPoints(run, timed(time.Now(), pts...))
		}
		half := n / 2
		s.AddPoints(splitRun, timed(time.Now(), pts[:half]...))
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		id, err := s.nameID(ctx, "loss")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.w.ExecContext(ctx, thinMetricsSQL, sqlRun, id, width); err != nil {
			t.Fatal(err)
		}
		s.ThinPoints(goRun, "loss", width)
		s.AddPoints(splitRun, timed(time.Now(), pts[half:]...))
		s.ThinPoints(splitRun, "loss", width)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		want := stepValues(t, s, sqlRun, "loss")
		if len(want) == n && width > 2 {
			t.Fatalf("case %d: the SQL thinned nothing: a case that tests nothing", c)
		}
		same := func(a, b [][2]float64) bool {
			return slices.EqualFunc(a, b, func(x, y [2]float64) bool {
				return x[0] == y[0] && (x[1] == y[1] || math.IsNaN(x[1]) && math.IsNaN(y[1]))
			})
		}
		for _, k := range []struct {
			what string
			run  int64
		}{{"all stored", goRun}, {"half queued", splitRun}} {
			if got := stepValues(t, s, k.run, "loss"); !same(got, want) {
				t.Errorf("case %d (%d points, width %d), %s: kept %d rows, the SQL kept %d", c, n, width, k.what, len(got), len(want))
			}
		}
	}
}

// thinDrops collects what eachDrop drops.
func thinDrops(rows []thinRow, width int64) []thinRow {
	var drops []thinRow
	eachDrop(rows, width, func(r thinRow) { drops = append(drops, r) })
	return drops
}

// eachDrop is the rule on its own: in each bucket the first and last by
// (step, seq), the first of equal minima and the last of equal maxima, and
// the first and last of each non-finite kind stay.
func TestThinDrops(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	rows := []thinRow{
		{step: 0, seq: 1, value: 3}, {step: 1, seq: 2, value: 1}, {step: 2, seq: 3, value: 1}, {step: 3, seq: 4, value: 5},
		{step: 4, seq: 5, value: 5}, {step: 5, seq: 6, value: 2}, {step: 6, seq: 7, value: 4},
		{step: 6, seq: 8, value: nan}, {step: 7, seq: 9, value: nan}, {step: 8, seq: 10, value: nan},
		{step: 8, seq: 11, value: inf}, {step: 9, seq: 12, value: -inf}, {step: 9, seq: 13, value: 2},
		{step: 10, seq: 14, value: 7}, // the next bucket: alone, kept
	}
	var got []int64
	for _, r := range thinDrops(rows, 10) {
		got = append(got, r.seq)
	}
	// Kept: 1 (first), 2 (first minimum), 5 (last maximum), 13 (last), 8 and 10
	// (first and last NaN), 11 (the one +Inf), 12 (the one -Inf), 14.
	if want := []int64{3, 4, 6, 7, 9}; !slices.Equal(got, want) {
		t.Errorf("dropped seqs %v, want %v", got, want)
	}
}

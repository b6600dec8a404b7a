package store

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// longMetric stores what thinning keeps of a loss printed at every step of
// a 10⁷-step run: 10,000 buckets of 1,000 steps, the first, lowest,
// highest and last point of each; and a val_loss printed every 1,000
// steps (10,000 points, one per bucket).
func longMetric(b *testing.B) (*Store, int64) {
	b.Helper()
	s, err := Open(b.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: time.Unix(0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	var pts []logparse.Point
	for bucket := range int64(10_000) {
		for _, k := range []int64{0, 17 + bucket%300, 400 + bucket%500, 999} {
			step := bucket*1000 + k
			pts = append(pts, logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: noise(step)})
		}
		pts = append(pts, logparse.Point{Step: bucket*1000 + 999, Epoch: math.NaN(), Name: "val_loss", Value: noise(-bucket)})
	}
	s.AddPoints(id, timed(time.Unix(1, 0), pts...))
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return s, id
}

// BenchmarkSeriesLong reads the 40,000 stored points of a 10⁷-step
// metric, as a chart does.
func BenchmarkSeriesLong(b *testing.B) {
	s, id := longMetric(b)
	ctx := context.Background()
	for b.Loop() {
		pts, err := s.Series(ctx, id, "loss")
		if err != nil || len(pts) != 40_000 {
			b.Fatalf("%d points, %v", len(pts), err)
		}
	}
}

// BenchmarkChartReadLong reads what the loss chart of that run reads
// (bot/render Charts.Loss): its metric names, then each loss series.
func BenchmarkChartReadLong(b *testing.B) {
	s, id := longMetric(b)
	ctx := context.Background()
	for b.Loop() {
		names, err := s.MetricNames(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, name := range names {
			pts, err := s.Series(ctx, id, name)
			if err != nil {
				b.Fatal(err)
			}
			n += len(pts)
		}
		if n != 50_000 {
			b.Fatalf("%d points of %v, want 50,000", n, names)
		}
	}
}

// BenchmarkStepValuesLong reads the steps and values alone (the web
// page's summaries).
func BenchmarkStepValuesLong(b *testing.B) {
	s, id := longMetric(b)
	ctx := context.Background()
	for b.Loop() {
		st, _, err := s.StepValues(ctx, id, "loss", math.MinInt64, math.MaxInt64)
		if err != nil || len(st) != 40_000 {
			b.Fatalf("%d points, %v", len(st), err)
		}
	}
}

// BenchmarkScanLong is what SQLite alone costs to visit those rows (a
// count and a sum, one result row): the rest of BenchmarkSeriesLong is the
// driver's and database/sql's cost per row and column.
func BenchmarkScanLong(b *testing.B) {
	s, id := longMetric(b)
	ctx := context.Background()
	nid, _, _ := s.lookupName(ctx, "loss")
	for b.Loop() {
		var n int
		var sum float64
		if err := s.r.QueryRowContext(ctx, `SELECT count(*), sum(value) FROM metrics WHERE run_id = ? AND name_id = ?`, id, nid).Scan(&n, &sum); err != nil || n != 40_000 {
			b.Fatalf("%d rows, %v", n, err)
		}
	}
}

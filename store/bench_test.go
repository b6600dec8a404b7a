package store

import (
	"context"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// BenchmarkWritePoints measures how fast queued metric points reach the
// database (points/s), two metrics per step.
func BenchmarkWritePoints(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	id, _ := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.AddPoints(id, timed(now, logparse.Point{Step: int64(i), Name: "loss", Value: 0.5}, logparse.Point{Step: int64(i), Name: "acc", Value: 0.9}))
		if i%100000 == 99999 {
			s.Flush(ctx)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "points/s")
}

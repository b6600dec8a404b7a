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
func BenchmarkWritePoints(b *testing.B) { benchmarkWritePoints(b, trainer.SourceOutput) }

// BenchmarkWriteEventPoints is BenchmarkWritePoints for points of event
// files: each deletes the output's points of its metric and step.
func BenchmarkWriteEventPoints(b *testing.B) { benchmarkWritePoints(b, trainer.SourceEvents) }

// BenchmarkWritePointsBehindEvents is BenchmarkWritePoints for output
// points of metrics the event files report too: each looks for an event
// point of its step.
func BenchmarkWritePointsBehindEvents(b *testing.B) {
	benchmarkWritePoints(b, trainer.SourceOutputBehindEvents)
}

func benchmarkWritePoints(b *testing.B, src trainer.Source) {
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
		pts := timed(now, logparse.Point{Step: int64(i), Name: "loss", Value: 0.5}, logparse.Point{Step: int64(i), Name: "acc", Value: 0.9})
		for j := range pts {
			pts[j].Source = src
		}
		s.AddPoints(id, pts)
		if i%100000 == 99999 {
			s.Flush(ctx)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "points/s")
}

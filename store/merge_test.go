package store

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// TestEventPointsWinAtTheSameStep: where the output and an event file
// report a metric at the same step, the event file's point is the one
// stored, whichever came first, in one batch or across batches; the
// output's other steps stay.
func TestEventPointsWinAtTheSameStep(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	pt := func(step int64, v float64, src trainer.Source) trainer.TimedPoint {
		return trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: v}, At: time.Now(), Source: src}
	}
	// The output first (stored), then the events for steps 2 and 4.
	s.AddPoints(id, []trainer.TimedPoint{pt(1, 10, trainer.SourceOutput), pt(2, 20, trainer.SourceOutput), pt(3, 30, trainer.SourceOutput), pt(4, 40, trainer.SourceOutput)})
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.AddPoints(id, []trainer.TimedPoint{pt(2, 2.5, trainer.SourceEvents), pt(4, 4.5, trainer.SourceEvents)})
	// Then, in one batch: output of a metric the events report, at a step
	// they have (6, in the batch before it) and at one they do not (7).
	s.AddPoints(id, []trainer.TimedPoint{pt(6, 6.5, trainer.SourceEvents), pt(6, 60, trainer.SourceOutputBehindEvents),
		pt(7, 70, trainer.SourceOutputBehindEvents), pt(4, 41, trainer.SourceOutputBehindEvents)})
	s.SetEventOffset(id, "events.out.tfevents.1.h.1.0", 1234)
	s.SetEventOffset(id, "sub/events.out.tfevents.1.h.1.1", 99)
	s.SetEventOffset(id, "events.out.tfevents.1.h.1.0", 2345)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	series, err := s.Series(ctx, id, "loss")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]float64{1: 10, 2: 2.5, 3: 30, 4: 4.5, 6: 6.5, 7: 70}
	if len(series) != len(want) {
		t.Fatalf("got %d points %+v, want %v", len(series), series, want)
	}
	for _, p := range series {
		if want[p.Step] != p.Value {
			t.Errorf("step %d = %g, want %g", p.Step, p.Value, want[p.Step])
		}
	}
	off, err := s.EventOffsets(ctx, id)
	if err != nil || len(off) != 2 || off["events.out.tfevents.1.h.1.0"] != 2345 || off["sub/events.out.tfevents.1.h.1.1"] != 99 {
		t.Errorf("EventOffsets = %v, %v", off, err)
	}
}

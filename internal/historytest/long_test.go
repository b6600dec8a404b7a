package historytest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// TestAddThinnedKeepsWhatThinningKeeps records a run's loss twice: every
// point then the store's thinning to the recorder's width, and AddThinned;
// the stored series must be the same.
func TestAddThinnedKeepsWhatThinningKeeps(t *testing.T) {
	const steps = 30_000 // spans more than trainer.MaxBuckets: width 10
	ctx := context.Background()
	value := func(s int64) float64 {
		switch {
		case s == 12_345 || s == 20_000 || s > 28_000 && s%3 != 0:
			return math.NaN() // two, then a flood
		case s == 7_777 || s > 28_000 && s%9 == 0:
			return math.Inf(1)
		case s > 28_000:
			return math.Inf(-1)
		case s > 25_000 && s < 25_100:
			return 0.5 // ties: the first is the minimum, the last the maximum
		}
		return NoisyLoss(s, steps)
	}
	st := OpenHistory(t)
	all := AddRun(t, st, nil, time.Hour, steps)
	var pts []trainer.TimedPoint
	for s := int64(1); s <= steps; s++ {
		pts = append(pts, trainer.TimedPoint{Point: logparse.Point{Step: s, Epoch: math.NaN(), Name: "loss", Value: value(s)}, At: all.StartedAt})
	}
	st.AddPoints(all.ID, pts)
	st.ThinPoints(all.ID, "loss", trainer.BucketWidth(steps-1, trainer.MaxBuckets))
	gen := AddRun(t, st, nil, time.Hour, steps)
	AddThinned(st, gen, "loss", steps, 1, value)
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := st.Series(ctx, all.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Series(ctx, gen.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) >= steps/2 || len(want) < steps/10 {
		t.Fatalf("thinning kept %d of %d points: the test no longer thins", len(want), steps)
	}
	if len(got) != len(want) {
		t.Fatalf("AddThinned stored %d points, thinning kept %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Step != w.Step || !(g.Value == w.Value || math.IsNaN(g.Value) && math.IsNaN(w.Value)) {
			t.Fatalf("point %d: got step %d value %v, want step %d value %v", i, g.Step, g.Value, w.Step, w.Value)
		}
	}
}

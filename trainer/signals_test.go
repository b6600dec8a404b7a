package trainer

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

func lossPoint(name string, step int64, v float64) logparse.Point {
	return logparse.Point{Name: name, Step: step, Epoch: math.NaN(), Value: v}
}

// The NaN watch is a function of the points and lines it is shown: no
// process, no clock.
func TestNaNWatch(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	type line struct {
		step int64
		pts  []logparse.Point
		text string
	}
	cases := []struct {
		name  string
		after int
		lines []line
		want  *NaNStreak // nil: no alert
		at    int        // the line that raises it
	}{
		{"three in a row", 3, []line{
			{1, []logparse.Point{lossPoint("loss", 1, nan)}, "loss=nan"},
			{2, []logparse.Point{lossPoint("loss", 2, nan)}, "loss=nan"},
			{3, []logparse.Point{lossPoint("loss", 3, inf)}, "loss=inf"},
		}, &NaNStreak{Metric: "loss", Value: inf, Count: 3, Step: 3}, 2},
		{"a finite value ends the streak", 3, []line{
			{1, []logparse.Point{lossPoint("loss", 1, nan)}, ""},
			{2, []logparse.Point{lossPoint("loss", 2, 0.5)}, ""},
			{3, []logparse.Point{lossPoint("loss", 3, nan)}, ""},
			{4, []logparse.Point{lossPoint("loss", 4, nan)}, ""},
		}, nil, 0},
		{"each loss has its own streak", 2, []line{
			{1, []logparse.Point{lossPoint("train_loss", 1, nan), lossPoint("val_loss", 1, 0.3)}, ""},
			{2, []logparse.Point{lossPoint("train_loss", 2, nan), lossPoint("val_loss", 2, 0.3)}, ""},
		}, &NaNStreak{Metric: "train_loss", Value: nan, Count: 2, Step: 2}, 1},
		{"not a loss", 1, []line{
			{1, []logparse.Point{lossPoint("lr", 1, nan)}, "lr=nan"},
		}, nil, 0},
		{"a bar that shows the NaN again at a new step", 2, []line{
			{10, []logparse.Point{lossPoint("loss", 10, nan)}, "10/100 [00:01<00:09, loss=nan]"},
			{11, nil, "11/100 [00:01<00:09, loss=nan]"},
		}, &NaNStreak{Metric: "loss", Value: nan, Count: 2, Step: 11}, 1},
		{"a line that does not show it", 2, []line{
			{10, []logparse.Point{lossPoint("eval_loss", 10, nan)}, "{'eval_loss': nan}"},
			{11, nil, "11/100 [00:01<00:09]"},
		}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newNANWatch(c.after)
			last := map[string]float64{}
			var got *NaNStreak
			at := -1
			for i, l := range c.lines {
				for _, p := range l.pts {
					last[p.Name] = p.Value
				}
				if s := w.observe(l.step, l.pts, l.text, func(n string) float64 { return last[n] }); s != nil {
					if got != nil {
						t.Fatalf("line %d raised a second alert %+v after %+v", i, s, got)
					}
					got, at = s, i
				}
			}
			switch {
			case c.want == nil && got != nil:
				t.Fatalf("got %+v, want no alert", got)
			case c.want != nil && got == nil:
				t.Fatalf("got no alert, want %+v", c.want)
			case c.want != nil && (got.Metric != c.want.Metric || got.Count != c.want.Count || got.Step != c.want.Step ||
				math.IsNaN(got.Value) != math.IsNaN(c.want.Value) || (!math.IsNaN(c.want.Value) && got.Value != c.want.Value) || at != c.at):
				t.Fatalf("got %+v at line %d, want %+v at line %d", got, at, c.want, c.at)
			}
		})
	}
}

// The stall watch is a function of the times it is shown.
func TestStallWatch(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	w := stallWatch{after: time.Minute}
	if s := w.observe(t0.Add(59*time.Second), t0, time.Time{}, false); s != nil {
		t.Fatalf("59 s quiet: got %+v, want none", s)
	}
	s := w.observe(t0.Add(61*time.Second), t0, time.Time{}, false)
	if s == nil || s.Quiet != 61*time.Second || s.After != time.Minute {
		t.Fatalf("61 s quiet: got %+v, want a stall of 61s", s)
	}
	if s := w.observe(t0.Add(2*time.Minute), t0, time.Time{}, false); s != nil {
		t.Fatalf("still quiet: got a second alert %+v", s)
	}
	// A metric (from the metrics file, say) counts as speaking.
	if s := w.observe(t0.Add(2*time.Minute), t0, t0.Add(110*time.Second), false); s != nil {
		t.Fatalf("a metric 10 s ago: got %+v", s)
	}
	if s := w.observe(t0.Add(3*time.Minute), t0, t0.Add(110*time.Second), false); s == nil {
		t.Fatal("quiet again for 70 s after speaking: want a new alert")
	}
	stopping := stallWatch{after: time.Minute}
	if s := stopping.observe(t0.Add(time.Hour), t0, time.Time{}, true); s != nil {
		t.Fatalf("a run being stopped: got %+v, want none", s)
	}
	if s := (&stallWatch{}).observe(t0.Add(time.Hour), t0, time.Time{}, false); s != nil {
		t.Fatalf("stall_after off: got %+v", s)
	}
}

// A job's faults name their key as a field, not inside a sentence.
func TestNormalizeNamesKeys(t *testing.T) {
	lo, hi := 5.0, 1.0
	j := &Job{Name: "j", Command: []string{"x", "{nope}"}, Params: map[string]ParamSpec{"bs": {Type: ParamInt, Min: &lo, Max: &hi}},
		Alerts: []AlertRule{{Metric: "loss", When: "sideways"}}}
	var keys []string
	for _, e := range flatten(j.Normalize()) {
		ke, ok := e.(*KeyError)
		if !ok {
			t.Fatalf("%v (%T) is not a KeyError", e, e)
		}
		keys = append(keys, ke.Key)
	}
	slices.Sort(keys)
	if want := []string{"alerts[0].when", "command", "params.bs"}; !slices.Equal(keys, want) {
		t.Fatalf("got keys %q, want %q", keys, want)
	}
}

// The rate window keeps one sample per second, the step of its last line:
// lines that share a time (one clock reading, one index record) only move
// the step of the sample they fall in.
func TestRateWindowOneSamplePerSecond(t *testing.T) {
	var w rateWindow
	t0 := time.Now()
	for step := int64(1); step <= 100; step++ {
		w.add(t0, step) // one read's lines
	}
	w.add(t0.Add(500*time.Millisecond), 150)
	for step := int64(160); step <= 200; step++ {
		w.add(t0.Add(1200*time.Millisecond), step)
	}
	w.add(t0.Add(1900*time.Millisecond), 250)
	w.add(t0.Add(2500*time.Millisecond), 300)
	if w.n != 3 {
		t.Errorf("%d samples, want 3 (t0, t0+1.2 s, t0+2.5 s)", w.n)
	}
	// (300 - 150) steps over the 2.5 s from the first sample to the last.
	if got := w.perSecond(); math.Abs(got-60) > 1e-9 {
		t.Errorf("rate %g steps/s, want 60", got)
	}
}

// Past the bound on metric names, a line keeps the points of the names it
// had and of new losses, in order, and loses only those of other new names,
// wherever on the line they are.
func TestLimitNamesKeepsKnownNamesAroundADroppedOne(t *testing.T) {
	a := &active{names: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
	for i := range maxMetricNames {
		a.names[fmt.Sprintf("m%d", i)] = true
	}
	line := []logparse.Point{{Name: "m1"}, {Name: "img_1"}, {Name: "m2"}, {Name: "img_2"}, {Name: "val_loss"}, {Name: "m2"}}
	var got []string
	for _, p := range a.limitNames(line, false) {
		got = append(got, p.Name)
	}
	if want := []string{"m1", "m2", "val_loss", "m2"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if !a.full || a.names["img_1"] || !a.names["val_loss"] {
		t.Errorf("full %v, img_1 recorded %v, val_loss recorded %v: want the bound told, the score dropped, the loss recorded", a.full, a.names["img_1"], a.names["val_loss"])
	}
	known := []logparse.Point{{Name: "m3"}, {Name: "m4"}}
	if kept := a.limitNames(known, false); len(kept) != 2 || &kept[0] != &known[0] {
		t.Errorf("a line of known names: kept %d points (in place %v), want both, in place", len(kept), len(kept) > 0 && &kept[0] == &known[0])
	}
}

// Package historytest fills a real store with ended runs, their metric
// points and memory samples, for the tests of the packages that read the
// history (charts, comparisons, the chat's 画图 and 对比).
package historytest

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// T0 is when the runs AddRun records started.
var T0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// OpenHistory opens a store in a temporary directory, closed at the end of the test.
func OpenHistory(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// AddRun records an ended run of dur with the given parameters.
func AddRun(t *testing.T, st *store.Store, params map[string]string, dur time.Duration, steps int64) *trainer.Run {
	t.Helper()
	r := &trainer.Run{Job: "demo", Params: params, State: trainer.StateEnded, Outcome: trainer.OutcomeFinished,
		StartedAt: T0, EndedAt: T0.Add(dur), Steps: steps, Total: steps}
	id, err := st.CreateRun(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	r.ID = id
	return r
}

// AddLoss records a metric: value(i) at step (i+1)*every, read at even
// intervals over the run.
func AddLoss(st *store.Store, r *trainer.Run, name string, n int, every int64, value func(i int) float64) {
	dur := r.EndedAt.Sub(r.StartedAt)
	for i := range n {
		at := r.StartedAt.Add(dur * time.Duration(i+1) / time.Duration(n))
		st.AddPoints(r.ID, []trainer.TimedPoint{{Point: logparse.Point{Step: int64(i+1) * every, Epoch: math.NaN(), Name: name, Value: value(i)}, At: at}})
	}
}

// AddMemory records n memory samples over the run; gpu and host may be nil.
func AddMemory(t *testing.T, st *store.Store, r *trainer.Run, n int, gpu, host func(i int) int64, total int64) {
	t.Helper()
	dur := r.EndedAt.Sub(r.StartedAt)
	var ms []history.RunMemory
	for i := range n {
		m := history.RunMemory{RunID: r.ID, T: r.StartedAt.Add(dur * time.Duration(i) / time.Duration(n))}
		if gpu != nil {
			g, tot := gpu(i), total
			m.GPUBytes, m.GPUTotal = &g, &tot
		}
		if host != nil {
			h := host(i)
			m.HostBytes = &h
		}
		ms = append(ms, m)
	}
	if err := st.AddRunMemory(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

// DecodePNG fails the test unless b is a PNG of the charts' size.
func DecodePNG(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{plots.Width, plots.Height}) {
		t.Fatalf("size %v, want %dx%d", got, plots.Width, plots.Height)
	}
}

// EnglishPainter draws charts without a CJK font.
func EnglishPainter(t *testing.T) *plots.Painter {
	t.Helper()
	p, err := plots.New(plots.Options{Font: plots.FontNone})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Decay is a decaying loss curve.
func Decay(i int) float64 { return 2 * math.Exp(-float64(i)/40) }

package command

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func openHistory(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// addRun records an ended run of dur with the given parameters.
func addRun(t *testing.T, st *store.Store, params map[string]string, dur time.Duration, steps int64) *trainer.Run {
	t.Helper()
	r := &trainer.Run{Job: "demo", Params: params, State: trainer.StateEnded, Outcome: trainer.OutcomeFinished,
		StartedAt: t0, EndedAt: t0.Add(dur), Steps: steps, Total: steps}
	id, err := st.CreateRun(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	r.ID = id
	return r
}

// addLoss records a metric: value(i) at step (i+1)*every, read at even
// intervals over the run.
func addLoss(st *store.Store, r *trainer.Run, name string, n int, every int64, value func(i int) float64) {
	dur := r.EndedAt.Sub(r.StartedAt)
	for i := range n {
		at := r.StartedAt.Add(dur * time.Duration(i+1) / time.Duration(n))
		st.AddPoints(r.ID, []trainer.TimedPoint{{Point: logparse.Point{Step: int64(i+1) * every, Epoch: math.NaN(), Name: name, Value: value(i)}, At: at}})
	}
}

// addMemory records n memory samples over the run; gpu and host may be nil.
func addMemory(t *testing.T, st *store.Store, r *trainer.Run, n int, gpu, host func(i int) int64, total int64) {
	t.Helper()
	dur := r.EndedAt.Sub(r.StartedAt)
	var ms []store.RunMemory
	for i := range n {
		m := store.RunMemory{RunID: r.ID, T: r.StartedAt.Add(dur * time.Duration(i) / time.Duration(n))}
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

func decodePNG(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{plots.Width, plots.Height}) {
		t.Fatalf("size %v, want %dx%d", got, plots.Width, plots.Height)
	}
}

func englishPainter(t *testing.T) *plots.Painter {
	t.Helper()
	p, err := plots.New(plots.Options{Font: plots.FontNone})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decay(i int) float64 { return 2 * math.Exp(-float64(i)/40) }

// routerFor returns a Router over a real supervisor (no jobs) and store.
func routerFor(t *testing.T, st *store.Store) *Router {
	t.Helper()
	sup, err := trainer.New(context.Background(), trainer.Options{Recorder: st, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &Router{Trainer: sup, History: st, Plots: englishPainter(t)}
}

func say(r *Router, text string) chat.Reply {
	return r.Handle(context.Background(), chat.Message{Transport: "console", Text: text, Local: true})
}

func TestRouterPlotAndCompare(t *testing.T) {
	st := openHistory(t)
	r := routerFor(t, st)
	a := addRun(t, st, map[string]string{"lr": "0.1"}, 10*time.Minute, 100)
	b := addRun(t, st, map[string]string{"lr": "0.01"}, 12*time.Minute, 100)
	addLoss(st, a, "loss", 50, 2, decay)
	addLoss(st, b, "loss", 50, 2, decay)
	addMemory(t, st, a, 20, func(int) int64 { return 8 << 30 }, func(int) int64 { return 2 << 30 }, 24<<30)

	rep := say(r, "画图 1")
	if len(rep.Images) != 2 || rep.Images[0].Name != "run-1-loss.png" || rep.Images[1].Name != "run-1-memory.png" || rep.Text != "" {
		t.Fatalf("画图 1: text %q, %d images", rep.Text, len(rep.Images))
	}
	for _, img := range rep.Images {
		decodePNG(t, img.PNG)
	}
	// Run 2 has no memory samples: the loss chart alone, no complaint.
	rep = say(r, "/plot")
	if len(rep.Images) != 1 || rep.Images[0].Name != "run-2-loss.png" || rep.Text != "" || rep.RunID != 2 {
		t.Fatalf("/plot: text %q, %d images, run %d", rep.Text, len(rep.Images), rep.RunID)
	}
	for text, want := range map[string]string{
		"画图 1 memory":    "run-1-memory.png",
		"画图 1 loss time": "run-1-loss.png",
		"画图1 显存":         "run-1-memory.png",
	} {
		rep := say(r, text)
		if len(rep.Images) != 1 || rep.Images[0].Name != want {
			t.Errorf("%s: text %q, %d images", text, rep.Text, len(rep.Images))
		}
	}
	for text, want := range map[string]string{
		"画图 2 memory":       "run #2 has no memory sample, so there is no memory chart",
		"画图 1 util":         "no GPU was sampled while run #1 ran, so there is no utilisation chart",
		"画图 1 bleu":         `run #1 has no metric "bleu"; it has loss`,
		"画图 1 loss val_acc": `画图 takes a run, a metric and memory, util or time, e.g. 画图 12 val_loss; "val_acc" is one word too many.`,
		"画图 9":              "There is no run #9.",
		"对比 1":              "对比 takes two or more run ids, e.g. 对比 12 13.",
		"对比 1 9":            "There is no run #9.",
		"对比 1 2 loss bleu":  `对比 takes run ids and one metric, e.g. 对比 12 13 val_loss; "bleu" is one word too many.`,
		"对比 1 2 bleu":       `none of the runs has a metric "bleu"`,
	} {
		if rep := say(r, text); rep.Text != want || len(rep.Images) != 0 {
			t.Errorf("%s: got %q (%d images), want %q", text, rep.Text, len(rep.Images), want)
		}
	}
	rep = say(r, "对比 1 #2")
	if len(rep.Images) != 1 || rep.Images[0].Name != "compare-1-2.png" {
		t.Fatalf("对比: %d images", len(rep.Images))
	}
	if !strings.Contains(rep.Text, "#2 vs #1: time +20 %") || !strings.Contains(rep.Text, "lr=0.01") {
		t.Errorf("对比 text:\n%s", rep.Text)
	}
	rep = say(r, "/compare 1 2 loss time")
	if len(rep.Images) != 1 {
		t.Errorf("/compare with time: %q", rep.Text)
	}
}

package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/internal/historytest"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// The history fixtures, shared with the other packages that read it.
var (
	openHistory    = historytest.OpenHistory
	addRun         = historytest.AddRun
	addLoss        = historytest.AddLoss
	addMemory      = historytest.AddMemory
	decodePNG      = historytest.DecodePNG
	englishPainter = historytest.EnglishPainter
	decay          = historytest.Decay
)

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
	// Without a metric: the loss overlay and the memory overlay.
	rep = say(r, "对比 1 #2")
	if len(rep.Images) != 2 || rep.Images[0].Name != "compare-1-2.png" || rep.Images[1].Name != "compare-1-2-memory.png" {
		t.Fatalf("对比: %d images", len(rep.Images))
	}
	for text, want := range map[string]string{"对比 1 2 显存": "compare-1-2-memory.png", "/compare 1 2 memory step": "compare-1-2-memory.png", "对比 1 2 loss": "compare-1-2.png"} {
		if rep := say(r, text); len(rep.Images) != 1 || rep.Images[0].Name != want {
			t.Errorf("%s: text %q, %d images, want %s", text, rep.Text, len(rep.Images), want)
		}
	}
	if !strings.Contains(rep.Text, "#2 vs #1: time +20 %") || !strings.Contains(rep.Text, "lr=0.01") {
		t.Errorf("对比 text:\n%s", rep.Text)
	}
	rep = say(r, "/compare 1 2 loss time")
	if len(rep.Images) != 1 {
		t.Errorf("/compare with time: %q", rep.Text)
	}
}

func TestPlotReplyOpensTheRunsPage(t *testing.T) {
	// With [http] public_url, a chart reply carries a [网页 Open] URL
	// button to the run's page; without, no button.
	st := openHistory(t)
	r := routerFor(t, st)
	a := addRun(t, st, nil, 10*time.Minute, 100)
	addLoss(st, a, "loss", 50, 2, decay)
	if rep := say(r, "画图 1"); len(rep.Buttons) != 0 {
		t.Errorf("no public_url: got buttons %+v, want none", rep.Buttons)
	}
	r.PageURL = func(id int64) string { return fmt.Sprintf("https://gpu.example.org/runs/%d?t=tok", id) }
	rep := say(r, "画图 1")
	if len(rep.Images) == 0 || len(rep.Buttons) != 1 || len(rep.Buttons[0]) != 1 {
		t.Fatalf("got %d images and buttons %+v, want a chart and one button", len(rep.Images), rep.Buttons)
	}
	if b := rep.Buttons[0][0]; b.Label != "网页 Open" || b.URL != "https://gpu.example.org/runs/1?t=tok" || b.Data != "" {
		t.Errorf("got button %+v, want [网页 Open] to run 1's page", b)
	}
}

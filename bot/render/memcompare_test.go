package render

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/trainer"
)

// Identical curves (gradient checkpointing changes no number) are told
// apart: the later one is dashed and its legend says "#2 = #1".
func TestCompareIdenticalCurves(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}
	a := addRun(t, st, map[string]string{"ckpt": "0"}, 10*time.Minute, 100)
	b := addRun(t, st, map[string]string{"ckpt": "1"}, 13*time.Minute, 100)
	d := addRun(t, st, map[string]string{"ckpt": "2"}, 13*time.Minute, 100)
	addLoss(st, a, "loss", 50, 2, decay)
	addLoss(st, b, "loss", 50, 2, decay)
	addLoss(st, d, "loss", 50, 2, func(i int) float64 { return decay(i) * 1.5 })
	_, series, err := c.comparison(ctx, []*trainer.Run{a, b, d}, "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if series[1].Name != "#2 = #1 (ckpt=1)" || !series[1].Dashed || series[0].Dashed || series[2].Dashed || series[2].Name != "#3 ckpt=2" {
		t.Errorf("series %q %v, %q %v, %q %v", series[0].Name, series[0].Dashed, series[1].Name, series[1].Dashed, series[2].Name, series[2].Dashed)
	}
	img, _, err := c.Compare(ctx, []*trainer.Run{a, b}, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if !strings.HasSuffix(img.Caption, "identical point for point (drawn dashed): #2 = #1") {
		t.Errorf("caption %q", img.Caption)
	}
}

// 对比 A B 显存: each run's memory over time with its peak; a recorded
// high-water mark above every sample is the peak, and its caption says it.
func TestCompareMemory(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}
	a := addRun(t, st, map[string]string{"ckpt": "0"}, 10*time.Minute, 100)
	b := addRun(t, st, map[string]string{"ckpt": "1"}, 13*time.Minute, 100)
	addLoss(st, a, "loss", 50, 2, decay)
	addLoss(st, b, "loss", 50, 2, decay)
	addMemory(t, st, a, 20, nil, func(i int) int64 { return int64(300+i) << 20 }, 0)
	addMemory(t, st, b, 20, nil, func(i int) int64 { return int64(200+i) << 20 }, 0)
	hwm := int64(400 << 20)
	b.PeakHostMem, b.PeakHostHow = &hwm, history.PeakMain
	if err := st.UpdateRun(ctx, b); err != nil {
		t.Fatal(err)
	}
	img, text, err := c.CompareMemory(ctx, []*trainer.Run{a, b}, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if want := "memory of runs #1, #2 · peaks #1 319.00 MiB, #2 400.00 MiB"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}
	if img.Name != "compare-1-2-memory.png" || !strings.Contains(text, "peak host 400.00 MiB (+25 %)") {
		t.Errorf("name %q text:\n%s", img.Name, text)
	}
	// Over steps, and the whole 对比: loss and memory.
	if img, _, err := c.CompareMemory(ctx, []*trainer.Run{a, b}, LossOptions{XStep: true}); err != nil || !strings.Contains(img.Command, "--x step") {
		t.Errorf("--x step: %v %q", err, img.Command)
	}
	imgs, _, err := c.CompareAll(ctx, []*trainer.Run{a, b}, LossOptions{})
	if err != nil || len(imgs) != 2 || imgs[0].Name != "compare-1-2.png" || imgs[1].Name != "compare-1-2-memory.png" {
		t.Errorf("CompareAll: %d images, %v", len(imgs), err)
	}
	// Runs with no memory figure: no overlay.
	e := addRun(t, st, nil, time.Minute, 10)
	f := addRun(t, st, nil, time.Minute, 10)
	if _, _, err := c.CompareMemory(ctx, []*trainer.Run{e, f}, LossOptions{}); !errors.Is(err, ErrNoSamples) {
		t.Errorf("no samples: %v", err)
	}
}

// A metric that holds bytes (parsed from "gpu_mem 14.2 GiB") is drawn in
// binary units; one the script printed in MB without a unit is not.
func TestByteMetric(t *testing.T) {
	if !byteMetric("max_mem", []plots.Series{{Points: []plots.XY{{X: 1, Y: 3 << 30}}}}) {
		t.Error("max_mem in bytes is a byte metric")
	}
	if byteMetric("memory", []plots.Series{{Points: []plots.XY{{X: 1, Y: 3000}}}}) || byteMetric("loss", []plots.Series{{Points: []plots.XY{{X: 1, Y: 3 << 30}}}}) {
		t.Error("MB as printed, or a loss, is no byte metric")
	}
}

// latinWords are the words of a zh chart text that stay Latin: metric
// names, units and the names of what measured (issue 31 item 9).
var latinWords = map[string]bool{"loss": true, "vs": true, "MiB": true, "GiB": true, "VmHWM": true, "RSS": true, "NVML": true, "cgroup": true}

// The compare charts' captions a zh user sees are Chinese but for metric
// names and units (issue 31: "memory of runs #1, #2 · peaks …").
func TestCompareChartsInChinese(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t), Lang: i18n.Zh}
	a := addRun(t, st, map[string]string{"grad_ckpt": "false"}, 10*time.Minute, 600)
	b := addRun(t, st, map[string]string{"grad_ckpt": "true"}, 12*time.Minute, 600)
	addLoss(st, a, "loss", 60, 10, decay)
	addLoss(st, b, "loss", 60, 10, decay)
	addMemory(t, st, a, 10, nil, func(int) int64 { return 400 << 20 }, 0)
	addMemory(t, st, b, 10, nil, func(int) int64 { return 500 << 20 }, 0)
	imgs, _, err := c.CompareAll(ctx, []*trainer.Run{a, b}, LossOptions{})
	if err != nil || len(imgs) != 2 {
		t.Fatalf("CompareAll: %d images, %v", len(imgs), err)
	}
	word := regexp.MustCompile(`[A-Za-z][A-Za-z_]+`)
	for _, img := range imgs {
		for _, w := range word.FindAllString(img.Caption, -1) {
			if !latinWords[w] {
				t.Errorf("zh caption %q has the English word %q", img.Caption, w)
			}
		}
	}
	if !strings.Contains(imgs[1].Caption, "内存") || strings.Contains(imgs[1].Caption, "显存") {
		t.Errorf("host memory overlay's caption %q: want 内存, not 显存", imgs[1].Caption)
	}
}

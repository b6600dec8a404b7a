package web

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ (the screenshots, the scrape)")

// Issue 31 item 6: the page of a live CPU run at 320–430 px. The memory
// chart's y axis is as wide as its labels ("248 MiB" was cut), its x axis
// is time since the start written as the PNGs write it (not "12/1/26
// 7:49pm"), the empty GPU panel is not shown, and the header says step /
// total and the ETA. The screenshot at 390 px is kept in testdata (go
// test ./web -update rewrites it; the page's clock-dependent texts make a
// pixel comparison meaningless, so only its size is checked).
func TestRunPageOnAPhone(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	run := s.addRun(t, "mnist", true, 120)
	var mem []history.RunMemory
	now := time.Now()
	for i := range int64(60) {
		host := int64(240<<20) + i*(140<<10)
		mem = append(mem, history.RunMemory{RunID: run, T: now.Add(-time.Duration(60-i) * time.Minute), HostBytes: &host})
	}
	if err := s.st.AddRunMemory(context.Background(), mem); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.active[run].Progress.TotalSteps = 500
	s.active[run].StepsPerSec = 2
	s.active[run].ETA = 190 * time.Second
	s.active[run].Last = []trainer.Metric{{Name: "loss", Value: 0.5}, {Name: "memory", Value: 257300000}}
	s.mu.Unlock()
	liveLine := regexp.MustCompile(`120 / 500 .*3m10s`)
	page := s.base + "/runs/" + strconv.FormatInt(run, 10) + "?t=" + url.QueryEscape(s.token(Scope(run), time.Hour))
	for _, width := range []int64{320, 390, 430} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 844), chromedp.Navigate(page),
			chromedp.WaitVisible(chromedp.CSS(`#chart-memory canvas`))); err != nil {
			t.Fatalf("%d px: the memory chart is not drawn: %v", width, err)
		}
		if err := waitJS(ctx, `Number(document.querySelector('#chart-memory').dataset.points) > 0 && document.querySelector('#eta').textContent !== ''`, 20*time.Second); err != nil {
			t.Fatalf("%d px: no memory points or no ETA: %v", width, err)
		}
		// The y labels and the room uPlot gave them, in CSS pixels.
		fit, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){
			var u = trainbot.charts['chart-memory'].u, a = u.axes[1];
			var ctx = document.createElement('canvas').getContext('2d');
			ctx.font = '12px system-ui, -apple-system, sans-serif';
			var w = 0; a._values.forEach(function (v) { if (v != null) w = Math.max(w, ctx.measureText(v).width); });
			return [w, a._size, document.documentElement.scrollWidth, window.innerWidth];
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if fit[0]+10 > fit[1] {
			t.Errorf("%d px: the memory chart's y labels need %.0f px, the axis has %.0f", width, fit[0], fit[1])
		}
		if fit[2] > fit[3] {
			t.Errorf("%d px: the page scrolls sideways (%.0f > %.0f)", width, fit[2], fit[3])
		}
		xs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`trainbot.charts['chart-memory'].u.axes[0]._values.filter(function (v) { return v != null; })`))
		if err != nil {
			t.Fatal(err)
		}
		since := regexp.MustCompile(`^-?\d+(s|m(\d\ds)?|h(\d\dm)?|d(\d+h)?)$`)
		for _, v := range xs {
			if !since.MatchString(v) {
				t.Errorf("%d px: x label %q is not a time since the start (want 45s, 3m05s, 2h04m)", width, v)
			}
		}
		if len(xs) == 0 {
			t.Errorf("%d px: the memory chart has no x labels", width)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[String(document.querySelector('#chart-util').closest('section').hidden),
			document.querySelector('.live-line').textContent.replace(/\s+/g, ' '), document.querySelector('#last').textContent,
			String(document.querySelector('.live-line').scrollWidth <= document.querySelector('.live-line').clientWidth)]`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "true" {
			t.Errorf("%d px: the empty GPU utilisation panel is shown", width)
		}
		if !liveLine.MatchString(got[1]) {
			t.Errorf("%d px: the live line %q lacks step / total and the ETA", width, got[1])
		}
		if got[3] != "true" {
			t.Errorf("%d px: the live line is cut", width)
		}
		if got[2] != "loss 0.5 · memory 245.38 MiB" {
			t.Errorf("%d px: the header's values %q, want memory in binary units", width, got[2])
		}
		if width != 390 {
			continue
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join("testdata", "run-page-390.png")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(artifacts(t), "run-page-390.png"), shot, 0o600); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test ./web -run TestRunPageOnAPhone -update writes it)", err)
		}
		wimg, err := png.Decode(bytes.NewReader(want))
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds().Dx() != wimg.Bounds().Dx() {
			t.Errorf("screenshot %d px wide, golden %d", img.Bounds().Dx(), wimg.Bounds().Dx())
		}
	}
}

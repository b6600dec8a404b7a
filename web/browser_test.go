package web

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer"
)

// chromium finds a Chromium to drive (Debian's chromium, which .ci/run
// installs), or skips the test saying so.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found (apt-get install chromium): the browser tests of the run pages need one")
	return ""
}

// browser starts a headless Chromium with a phone's viewport (390 × 844)
// and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(390, 844), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	return ctx
}

// artifacts is where screenshots go: $TRAINBOT_ARTIFACTS when set (to
// keep them), else the test's temp dir.
func artifacts(t *testing.T) string {
	if d := os.Getenv("TRAINBOT_ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// waitJS polls a JavaScript condition until it is true or the step's
// deadline passes.
func waitJS(ctx context.Context, cond string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond)))
	return err
}

// TestRunPageInBrowser: the page of a running run, in a real headless
// Chromium at 390 px: the loss chart is drawn, the step shown advances
// without a reload (Server-Sent Events), a drag on the chart narrows its x
// range, the reset widens it again, and nothing scrolls sideways.
func TestRunPageInBrowser(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	run := s.addRun(t, "mnist", true, 1000)
	s.addSamples(t, run)
	if err := s.st.RecordChange(context.Background(), trainer.LiveChange{RunID: run, Version: 1, At: time.Now(), Step: 500, By: "ann", Values: map[string]string{"lr": "0.5"}}); err != nil {
		t.Fatal(err)
	}
	page := s.base + "/runs/" + strconv.FormatInt(run, 10) + "?t=" + url.QueryEscape(s.token(Scope(run), time.Hour))

	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#chart-loss canvas`))); err != nil {
		t.Fatalf("the chart is not drawn: %v", err)
	}
	if err := waitJS(ctx, `Number(document.querySelector('#chart-loss').dataset.points) > 0 && document.querySelector('#chart-loss').dataset.xmax == 1000`, 20*time.Second); err != nil {
		t.Fatalf("the loss chart has no points up to step 1000: %v", err)
	}
	if err := waitJS(ctx, `document.querySelector('#chart-loss').dataset.markers === '1'`, 10*time.Second); err != nil {
		t.Errorf("the loss chart does not mark the live change lr=0.5: %v", err)
	}
	for _, c := range []string{"chart-metric", "chart-memory", "chart-util"} {
		if err := waitJS(ctx, `Number(document.querySelector('#`+c+`').dataset.points) > 0`, 20*time.Second); err != nil {
			t.Errorf("#%s has no points: %v", c, err)
		}
	}
	// The header writes a byte count as the chat does (it showed
	// "memory 257300000").
	for _, c := range []struct {
		name string
		v    float64
	}{{"memory", 2.573e8}, {"gpu_mem", 21.5 * (1 << 30)}, {"max_memory_allocated", 3 << 20}} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`window.trainbot.fmtMetric(%q, %v)`, c.name, c.v)))
		if want := units.Metric(c.name, c.v); err != nil || got != want {
			t.Errorf("the page writes %s %v as %q (%v), the chat as %q", c.name, c.v, got, err, want)
		}
	}
	loadedAt, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.trainbot.loadedAt`))
	if err != nil {
		t.Fatal(err)
	}

	// The run goes on: the step shown follows, and so does the chart.
	s.advance(t, run, 1500)
	if err := waitJS(ctx, `document.querySelector('#step').textContent === '1500'`, 20*time.Second); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#step`)))
		t.Fatalf("the step shown did not advance to 1500 (shows %q): %v", shown, err)
	}
	if err := waitJS(ctx, `document.querySelector('#chart-loss').dataset.xmax == 1500`, 20*time.Second); err != nil {
		t.Errorf("the chart did not extend to step 1500: %v", err)
	}
	again, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.trainbot.loadedAt`))
	if err != nil {
		t.Fatal(err)
	}
	if again != loadedAt {
		t.Errorf("the page was reloaded (loadedAt %v, then %v): the step must advance in place", loadedAt, again)
	}

	// Drag across the middle third of the plot: the x range narrows.
	span := func() (float64, float64) {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){var d=document.querySelector('#chart-loss').dataset;return [Number(d.xmin),Number(d.xmax)]})()`))
		if err != nil {
			t.Fatal(err)
		}
		return r[0], r[1]
	}
	min0, max0 := span()
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){var o=document.querySelector('#chart-loss .u-over');o.scrollIntoView({block:'center'});var r=o.getBoundingClientRect();return [r.left,r.top,r.width,r.height]})()`))
	if err != nil {
		t.Fatal(err)
	}
	x0, x1, y := box[0]+box[2]/3, box[0]+2*box[2]/3, box[1]+box[3]/2
	held := func(p *input.DispatchMouseEventParams) {
		p.Button, p.Buttons, p.ClickCount = input.MouseButtonLeft, 1, 1
	}
	drag := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(chromedp.MouseMoved, x0, y), chromedp.MouseEvent(chromedp.MousePressed, x0, y, held)}
	for i := 1; i <= 10; i++ {
		drag = append(drag, chromedp.MouseEvent(chromedp.MouseMoved, x0+(x1-x0)*float64(i)/10, y, held))
	}
	drag = append(drag, chromedp.MouseEvent(chromedp.MouseReleased, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	if err := chromedp.Do(ctx, drag...); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, fmt.Sprintf(`(function(){var d=document.querySelector('#chart-loss').dataset;return Number(d.xmax)-Number(d.xmin) < %f})()`, (max0-min0)*0.6), 10*time.Second); err != nil {
		min1, max1 := span()
		t.Fatalf("a drag over the middle third did not narrow the x range: [%v, %v], then [%v, %v]", min0, max0, min1, max1)
	}
	min1, max1 := span()
	t.Logf("drag-zoom: x range [%v, %v] -> [%v, %v]", min0, max0, min1, max1)
	if min1 <= min0 || max1 >= max0 {
		t.Errorf("the zoomed range [%v, %v] is not inside [%v, %v]", min1, max1, min0, max0)
	}

	// No horizontal scroll on a 390 px phone.
	widths, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[document.documentElement.scrollWidth, window.innerWidth]`))
	if err != nil {
		t.Fatal(err)
	}
	if widths[1] != 390 {
		t.Errorf("viewport %v px wide, want 390", widths[1])
	}
	if widths[0] > widths[1] {
		t.Errorf("the page scrolls sideways: %v px of content in a %v px viewport", widths[0], widths[1])
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifacts(t), "run-page-390.png")
	if err := os.WriteFile(path, shot, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KB)", path, len(shot)/1024)

	// Reset: the whole range again. (Clicked where the button is on the
	// screen, as the drag; a live update may move it between the look and
	// the click, so up to three tries.)
	reset := `(function(){var d=document.querySelector('#chart-loss').dataset;return d.xmin == 1 && d.xmax == 1500})()`
	for try := 1; ; try++ {
		btn, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){var b=document.querySelector('button[data-chart=chart-loss]');b.scrollIntoView({block:'center'});var r=b.getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2]})()`))
		if err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(btn[0], btn[1])); err != nil {
			t.Fatal(err)
		}
		err = waitJS(ctx, reset, 5*time.Second)
		if err == nil {
			break
		}
		if try == 3 {
			min2, max2 := span()
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){var c=window.trainbot.charts['chart-loss'];return JSON.stringify({view:c.view,busy:c.busy,err:c.el.dataset.error||''})})()`))
			t.Fatalf("reset did not show the whole run again: [%v, %v], want [1, 1500]; chart %s", min2, max2, state)
		}
	}
}

// TestListAndCompareInBrowser: the runs list and the comparison of two
// runs draw at 390 px without sideways scrolling.
func TestListAndCompareInBrowser(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	a := s.addRun(t, "mnist", false, 800)
	b := s.addRun(t, "mnist-wide", false, 600)
	tok := url.QueryEscape(s.token(ScopeList, time.Hour))
	for _, tc := range []struct{ name, path, ready string }{
		{"list", "/?t=" + tok, `document.querySelectorAll('.card').length === 2`},
		{"compare", fmt.Sprintf("/compare?runs=%d,%d&t=%s", a, b, tok),
			`Number((document.querySelector('#chart-compare')||{dataset:{}}).dataset.points) > 0 && document.querySelector('#chart-compare').dataset.xmax == 800`},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.base+tc.path)); err != nil {
			t.Fatal(err)
		}
		if err := waitJS(ctx, tc.ready, 20*time.Second); err != nil {
			t.Fatalf("%s: not ready: %v", tc.name, err)
		}
		w, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatal(err)
		}
		if w[0] > w[1] {
			t.Errorf("%s scrolls sideways: %v px of content in %v px", tc.name, w[0], w[1])
		}
	}
}

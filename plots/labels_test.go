package plots

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// drawnLabels renders with a painter that records each chart's label
// boxes and fails when two of them overlap.
func checkLabels(t *testing.T, name string, draw func(p *Painter) ([]byte, error), want int) {
	t.Helper()
	p := painter(t, FontNone)
	var boxes []vg.Rectangle
	p.labelsDrawn = func(b []vg.Rectangle) { boxes = append(boxes, b...) }
	png, err := draw(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	decode(t, png)
	if len(boxes) != want {
		t.Errorf("%s: %d labels drawn, want %d", name, len(boxes), want)
	}
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			if overlaps(boxes[i], boxes[j]) {
				t.Errorf("%s: label %d %v overlaps label %d %v", name, i, boxes[i], j, boxes[j])
			}
		}
	}
	if dir := os.Getenv("TRAINBOT_CHART_DIR"); dir != "" { // to look at them
		os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
}

// series ending at nearly the same value: the worst case of the labels at
// the line ends, at the bottom of the plot where they used to pile up.
func endingTogether(n int, end float64) []Series {
	var out []Series
	for k := range n {
		pts := make([]XY, 300)
		for i := range pts {
			pts[i] = XY{float64(i), end + (2.3-end)*math.Exp(-float64(i)/30) + float64(k)*end*1e-3}
		}
		out = append(out, Series{Name: fmt.Sprintf("#%d", k+1), Points: pts})
	}
	return out
}

// No two labels of a chart overlap, whatever the number of series: the
// demo chart's 0.0977 was half under 0.0885, the compare chart's 0.0178
// over 0.0172, the memory overlay's peak note under a line-end label.
func TestLabelsNeverOverlap(t *testing.T) {
	demo := endingTogether(2, 0.0885)
	demo[1].Name = "val_loss"
	checkLabels(t, "labels-demo", func(p *Painter) ([]byte, error) { return p.Loss(LossChart{Title: "demo", Series: demo}) }, 2)
	for _, n := range []int{3, 5, 8} {
		checkLabels(t, fmt.Sprintf("labels-compare-%d", n), func(p *Painter) ([]byte, error) {
			return p.Loss(LossChart{Title: "compare", Series: endingTogether(n, 0.0172)})
		}, n)
	}
	// The memory overlay: byte series ending at their peaks at the right
	// edge, a recorded peak above every sample with its note, a ceiling.
	var mem []Series
	for k := range 4 {
		pts := make([]XY, 100)
		for i := range pts {
			pts[i] = XY{float64(i), float64(int64(26+k/2)<<20) * float64(i+1) / 100}
		}
		mem = append(mem, Series{Name: fmt.Sprintf("#%d", k+4), Points: pts, Peak: float64(int64(27+k/2) << 20), PeakNote: "VmHWM, exact"})
	}
	checkLabels(t, "labels-memory-overlay", func(p *Painter) ([]byte, error) {
		return p.Loss(LossChart{Title: "memory", Series: mem, YBytes: true, Peaks: true})
	}, 8)
	// The memory chart: GPU and host peaks close together at the end.
	var gpu, host, total []XY
	for i := range 50 {
		gpu = append(gpu, XY{float64(i * 10), float64(int64(i) << 24)})
		host = append(host, XY{float64(i * 10), float64(int64(i) << 24)})
		total = append(total, XY{float64(i * 10), float64(int64(1) << 30)})
	}
	checkLabels(t, "labels-memory", func(p *Painter) ([]byte, error) {
		return p.Memory(MemoryChart{Title: "memory", GPU: gpu, GPUTotal: total, Host: host, HostPeak: float64(int64(50) << 24), HostPeakNote: "VmHWM, exact"})
	}, 2)
}

// A loss that hardly changed is drawn on an axis of a sensible span, and
// the chart says by how little it changed: 2.2932 → 2.2949 filled the whole
// height as a cliff.
func TestTinyRangeIsWidened(t *testing.T) {
	p := plot.New()
	p.Y.Min, p.Y.Max = 2.2932, 2.2949
	span, ok := widenTiny(p, false)
	if !ok || math.Abs(span-0.0017) > 1e-9 {
		t.Fatalf("widenTiny = %v, %v; want the span 0.0017", span, ok)
	}
	if got := p.Y.Max - p.Y.Min; math.Abs(got-tinySpan*2.2949) > 1e-9 || p.Y.Min > 2.2932 || p.Y.Max < 2.2949 {
		t.Errorf("axis [%v, %v]: want a span of 2 %% around the values", p.Y.Min, p.Y.Max)
	}
	p.Y.Min, p.Y.Max = 0.05, 2.3 // a loss that fell: as it is
	if _, ok := widenTiny(p, false); ok || p.Y.Min != 0.05 || p.Y.Max != 2.3 {
		t.Errorf("a real range was changed to [%v, %v]", p.Y.Min, p.Y.Max)
	}
	p.Y.Min, p.Y.Max = 100, 100.1 // bytes or log axes are left alone
	if _, ok := widenTiny(p, true); ok {
		t.Error("a byte axis was widened")
	}
	png, err := painter(t, FontNone).Loss(LossChart{Title: "two points", Series: []Series{{Name: "loss", Points: []XY{{1, 2.2949}, {2, 2.2932}}}}})
	if err != nil {
		t.Fatal(err)
	}
	decode(t, png)
}

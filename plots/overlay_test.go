package plots

import (
	"image"
	"image/color"
	"testing"
)

// countNear counts the pixels within the chart's data area (below the
// title and legend) of about colour c.
func countNear(img image.Image, c color.RGBA, top int) int {
	n := 0
	b := img.Bounds()
	for y := top; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if absDiff(uint8(r>>8), c.R) < 24 && absDiff(uint8(g>>8), c.G) < 24 && absDiff(uint8(bl>>8), c.B) < 24 {
				n++
			}
		}
	}
	return n
}

// Two identical series: the later one is drawn dashed over the first, so
// both colours show along the line; without dashes the first would be
// hidden under the second.
func TestCoincidingSeriesStayVisible(t *testing.T) {
	p := painter(t, FontNone)
	pts := make([]XY, 200)
	for i := range pts {
		pts[i] = XY{float64(i), 1 / float64(i+1)}
	}
	b, err := p.Loss(LossChart{Series: []Series{{Name: "#1", Points: pts}, {Name: "#2 = #1", Points: pts}}})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, b)
	first, second := countNear(img, Palette[0], 160), countNear(img, Palette[1], 160)
	if first < 300 || second < 300 {
		t.Errorf("pixels of the first series %d, of the second %d: want both visible", first, second)
	}
	// A series that only nearly coincides is dashed too.
	near := make([]XY, len(pts))
	for i, q := range pts {
		near[i] = XY{q.X, q.Y * 1.0001}
	}
	b, err = p.Loss(LossChart{Series: []Series{{Name: "a", Points: pts}, {Name: "b", Points: near}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := countNear(decode(t, b), Palette[0], 160); n < 300 {
		t.Errorf("a nearly identical series hides the first: %d pixels of it", n)
	}
}

// A memory overlay: binary units, each series' peak marked (also a
// recorded peak above every sample), and a ceiling.
func TestMemoryOverlay(t *testing.T) {
	p := painter(t, FontNone)
	const gib = 1 << 30
	a := []XY{{0, 1 * gib}, {10, 3 * gib}, {20, 2 * gib}}
	b := []XY{{0, 1 * gib}, {10, 2 * gib}, {20, 1.5 * gib}}
	out, err := p.Loss(LossChart{
		KindZH: "显存对比", KindEN: "Memory", XTime: true, YBytes: true, Peaks: true,
		Ceiling: 8 * gib, CeilingLabel: "GPU total 8 GiB",
		Series: []Series{{Name: "#1", Points: a}, {Name: "#2", Points: b, Peak: 5 * gib, PeakNote: "VmHWM, exact"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, out)
	if n := countNear(img, Palette[1], 160); n < 200 {
		t.Errorf("series #2 and its peak mark: %d pixels", n)
	}
	if n := countNear(img, colGrey, 160); n < 200 {
		t.Errorf("the ceiling: %d grey pixels", n)
	}
}

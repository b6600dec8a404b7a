package plots

import (
	"image"
	"testing"
)

// markerColumns counts the columns of img with at least minPixels pixels
// of the marker colour (a dashed vertical line).
func markerColumns(img image.Image, minPixels int) int {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -12 && d < 12 }
	bd := img.Bounds()
	cols := 0
	for x := bd.Min.X; x < bd.Max.X; x++ {
		n := 0
		for y := bd.Min.Y; y < bd.Max.Y; y++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r, colMarker.R) && near(g, colMarker.G) && near(b, colMarker.B) {
				n++
			}
		}
		if n >= minPixels {
			cols++
		}
	}
	return cols
}

// A live change is a vertical line across the loss chart, labelled.
func TestLossChartDrawsMarkers(t *testing.T) {
	pt := painter(t, "none")
	pts := make([]XY, 100)
	for i := range pts {
		pts[i] = XY{float64(i + 1), 1 / float64(i+1)}
	}
	chart := LossChart{Title: "run #1", Series: []Series{{Name: "loss", Points: pts}}}
	plain, err := pt.Loss(chart)
	if err != nil {
		t.Fatal(err)
	}
	if n := markerColumns(decode(t, plain), 100); n != 0 {
		t.Fatalf("a chart without markers has %d marker columns", n)
	}
	chart.Markers = []Marker{{X: 50, Label: "lr=0.5"}}
	marked, err := pt.Loss(chart)
	if err != nil {
		t.Fatal(err)
	}
	if n := markerColumns(decode(t, marked), 100); n == 0 {
		t.Fatal("no vertical marker line on the chart")
	}
}

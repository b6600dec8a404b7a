package plots

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Marker is a vertical line across a chart at X with a label at its top:
// a live change of the run ("lr=0.0001", 调参) at the step it was made.
type Marker struct {
	X     float64
	Label string
}

// MarkerColor draws markers: a colour no series takes.
var MarkerColor = color.RGBA{128, 48, 160, 255}

var colMarker = MarkerColor

// vmarks draws Markers: dashed lines from the bottom to the top of the
// data area, each label in a white box right of its line near the top
// (left of it where it would leave the chart), lower labels for markers
// close together.
type vmarks struct {
	marks  []Marker
	styles []text.Style // one for each mark's label
	width  vg.Length
}

// DataRange widens X to take every marker in; Y is the series'.
func (m *vmarks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, mk := range m.marks {
		xmin, xmax = math.Min(xmin, mk.X), math.Max(xmax, mk.X)
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}

func (m *vmarks) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	line := draw.LineStyle{Color: colMarker, Width: m.width, Dashes: []vg.Length{vg.Points(6), vg.Points(4)}}
	row := 0
	lastRight := vg.Length(math.Inf(-1))
	for i, mk := range m.marks {
		x := trX(mk.X)
		c.StrokeLine2(line, x, c.Min.Y, x, c.Max.Y)
		if mk.Label == "" {
			continue
		}
		sty := m.styles[i]
		gap := vg.Points(4)
		w, h := sty.Width(mk.Label), sty.Height(mk.Label)
		tp := vg.Point{X: x + gap, Y: c.Max.Y - gap}
		sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
		if tp.X+w > c.Max.X {
			tp.X = x - gap
			sty.XAlign = draw.XRight
		}
		left := tp.X
		if sty.XAlign == draw.XRight {
			left = tp.X - w
		}
		if left < lastRight+gap {
			row++ // would overlap the previous label: one line lower
		} else {
			row = 0
		}
		tp.Y -= vg.Length(row) * (h + 2*gap)
		lastRight = left + w
		boxedText(c, sty, tp, mk.Label)
	}
}

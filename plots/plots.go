// Package plots draws trainbot's charts with gonum.org/v1/plot and returns
// them as PNG bytes, sized and lettered to be read on a phone (1280x800,
// large fonts).
//
// Every series is reduced to its minimum and maximum per pixel column before
// drawing (Downsample): a million-point loss curve draws as a few thousand
// points and looks the same.
package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart size in pixels.
const (
	Width  = 1280
	Height = 800
	dpi    = 96
)

// ErrNoData is returned when there is nothing to draw.
var ErrNoData = errors.New("no data to draw")

// XY is one point.
type XY struct{ X, Y float64 }

// Series is a named line.
type Series struct {
	Name   string
	Points []XY // in increasing X
}

// LossChart describes a loss chart.
type LossChart struct {
	Title  string
	XLabel string // "step" when empty
	YLabel string // "loss" when empty
	Series []Series
	// Smoothing is TensorBoard's exponential moving average weight in [0, 1);
	// each series is drawn raw (thin, light) and smoothed (bold). 0 draws
	// the raw line only.
	Smoothing float64
}

// DefaultSmoothing is TensorBoard's default.
const DefaultSmoothing = 0.6

// palette is colour-blind friendly (Okabe–Ito).
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky
	{240, 228, 66, 255},  // yellow
	{0, 0, 0, 255},       // black
}

func lighter(c color.RGBA) color.RGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*0.6) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 255}
}

// Loss draws loss curves: each series raw and EMA-smoothed.
func Loss(c LossChart) ([]byte, error) {
	p := newPlot(c.Title, def(c.XLabel, "step"), def(c.YLabel, "loss"))
	drawn := 0
	for i, s := range c.Series {
		pts := finite(s.Points)
		if len(pts) == 0 {
			continue
		}
		col := palette[i%len(palette)]
		raw := Downsample(pts, Width)
		if c.Smoothing > 0 {
			l, err := line(raw, lighter(col), 1.2)
			if err != nil {
				return nil, err
			}
			p.Add(l)
			sm, err := line(Downsample(EMA(pts, c.Smoothing), Width), col, 3)
			if err != nil {
				return nil, err
			}
			p.Add(sm)
			p.Legend.Add(fmt.Sprintf("%s (smoothed %.2g)", s.Name, c.Smoothing), sm)
		} else {
			l, err := line(raw, col, 2.5)
			if err != nil {
				return nil, err
			}
			p.Add(l)
			p.Legend.Add(s.Name, l)
		}
		drawn++
	}
	if drawn == 0 {
		return nil, ErrNoData
	}
	p.Add(plotter.NewGrid())
	return render(p)
}

func def(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

func finite(pts []XY) []XY {
	out := pts[:0:0]
	for _, p := range pts {
		if !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) && !math.IsNaN(p.X) && !math.IsInf(p.X, 0) {
			out = append(out, p)
		}
	}
	return out
}

// EMA smooths a series the way TensorBoard does (debiased exponential
// moving average with the given weight).
func EMA(pts []XY, weight float64) []XY {
	out := make([]XY, len(pts))
	last, n := 0.0, 0.0
	for i, p := range pts {
		last = last*weight + (1-weight)*p.Y
		n = n*weight + (1 - weight)
		out[i] = XY{p.X, last / n}
	}
	return out
}

// Downsample keeps, for each of about columns equal-width X buckets, the
// first point and the points with the minimum and maximum Y, in X order, so
// the drawn line has the same envelope. Series of at most 2*columns points
// are returned unchanged.
func Downsample(pts []XY, columns int) []XY {
	if columns < 1 || len(pts) <= 2*columns {
		return pts
	}
	x0, x1 := pts[0].X, pts[len(pts)-1].X
	if !(x1 > x0) {
		return pts
	}
	width := (x1 - x0) / float64(columns)
	out := make([]XY, 0, 3*columns+1)
	i := 0
	for i < len(pts) {
		bucket := int((pts[i].X - x0) / width)
		first, lo, hi := i, i, i
		j := i + 1
		for j < len(pts) && int((pts[j].X-x0)/width) == bucket {
			if pts[j].Y < pts[lo].Y {
				lo = j
			}
			if pts[j].Y > pts[hi].Y {
				hi = j
			}
			j++
		}
		last := j - 1
		for _, k := range sortedUnique(first, lo, hi, last) {
			out = append(out, pts[k])
		}
		i = j
	}
	return out
}

func sortedUnique(a ...int) []int {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	out := a[:0]
	for i, v := range a {
		if i == 0 || v != a[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func line(pts []XY, c color.Color, width vg.Length) (*plotter.Line, error) {
	xys := make(plotter.XYs, len(pts))
	for i, p := range pts {
		xys[i].X, xys[i].Y = p.X, p.Y
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.Color = c
	l.Width = width
	return l, nil
}

// newPlot returns a plot with phone-sized fonts.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(plot.DefaultFont, 22)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(plot.DefaultFont, 18)
		ax.Tick.Label.Font = font.From(plot.DefaultFont, 15)
		ax.LineStyle.Width = vg.Points(1)
	}
	p.X.Tick.Marker = siTicks{}
	p.Y.Tick.Marker = siTicks{}
	p.Legend.TextStyle.Font = font.From(plot.DefaultFont, 16)
	p.Legend.Top = true
	return p
}

// siTicks labels ticks with SI suffixes: 12k, 1.5M.
type siTicks struct{}

func (siTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = FormatSI(ticks[i].Value)
		}
	}
	return ticks
}

// FormatSI prints a number compactly: 950, 12k, 1.5M, 0.25, 3e-05.
func FormatSI(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e9:
		return trimZeros(fmt.Sprintf("%.2f", v/1e9)) + "G"
	case a >= 1e6:
		return trimZeros(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e4:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 1:
		return trimZeros(fmt.Sprintf("%.2f", v))
	case a >= 1e-3:
		return trimZeros(fmt.Sprintf("%.4f", v))
	default:
		return fmt.Sprintf("%.0e", v)
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// render draws the plot into a Width x Height PNG.
func render(p *plot.Plot) ([]byte, error) {
	w := vg.Length(Width) * vg.Inch / dpi
	h := vg.Length(Height) * vg.Inch / dpi
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}

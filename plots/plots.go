// Package plots draws trainbot's charts with gonum.org/v1/plot and returns
// them as PNG bytes, sized and lettered to be read on a phone (1280x800,
// large fonts, SI and binary units on the axes, the legend above the data
// so it never hides it).
//
// Every series is reduced to its first, last, lowest and highest point per
// pixel column before drawing (Downsample), and lines are painted one
// vertical span per pixel column: a million-point loss curve draws in tens
// of milliseconds and looks the same as the full line.
//
// A Painter holds the fonts: the embedded Liberation Sans, and a CJK font
// (configured, or found in the usual Debian paths) for Chinese titles and
// legends. Without one, Chinese labels are replaced by English ones
// instead of being drawn as empty boxes.
package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"sync"

	"github.com/trainbot/trainbot/i18n"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
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
	// Color is the line's colour; nil picks the next one of the palette.
	Color color.Color
	// Dashed draws the line dashed. A loss chart also dashes, by itself,
	// a series that coincides with one drawn before it, so that neither
	// hides the other.
	Dashed bool
	// Peak, on a chart that marks peaks, is the series' peak when it is
	// higher than its highest point (a high-water mark the samples
	// missed); PeakNote follows the value in its label: "VmHWM, exact".
	Peak     float64
	PeakNote string
}

// DefaultSmoothing is TensorBoard's default.
const DefaultSmoothing = 0.6

// Palette is colour-blind friendly (Okabe–Ito); charts use its colours in
// order, so the first series of every chart is blue, the second vermillion.
var Palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky
	{0, 0, 0, 255},       // black
	{240, 228, 66, 255},  // yellow
}

var (
	colGrey  = color.RGBA{110, 110, 110, 255}
	colAlert = color.RGBA{200, 0, 0, 255}
	colNote  = color.RGBA{70, 70, 70, 255} // the note under the legend: read at phone size
	colGrid  = color.RGBA{225, 225, 225, 255}
)

func toRGBA(c color.Color, i int) color.RGBA {
	if c == nil {
		return Palette[i%len(Palette)]
	}
	r, g, b, a := c.RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
}

// lighter mixes a colour with white.
func lighter(c color.RGBA, amount float64) color.RGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*amount + 0.5) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 255}
}

// Font sizes, in points at 96 dpi on a 1280-pixel-wide image: on a phone
// the image is shown about 400 points wide, so these read like 7–8 points.
const (
	sizeTitle  = 26
	sizeLabel  = 21
	sizeTick   = 19
	sizeLegend = 19
	sizeNote   = 17
)

// Options configure a Painter.
type Options struct {
	// Font is a TTF, OTF, TTC or OTC file with Chinese glyphs. "" looks in
	// CJKFontPaths; FontNone uses none.
	Font string
}

// Painter draws charts. It is safe for concurrent use.
type Painter struct {
	fonts *fonts
	// labelsDrawn, when set (tests), is told the boxes of each chart's
	// text labels as they are drawn.
	labelsDrawn func([]vg.Rectangle)
}

// New returns a Painter. It fails only when a configured font cannot be
// read or draws no Chinese.
func New(o Options) (*Painter, error) {
	f, err := loadFonts(o.Font)
	if err != nil {
		return nil, err
	}
	return &Painter{fonts: f}, nil
}

var defaultPainter = sync.OnceValue(func() *Painter {
	p, err := New(Options{})
	if err != nil { // only a configured font can fail
		panic(err)
	}
	return p
})

// Default returns a Painter that uses the first CJK font of CJKFontPaths,
// if any. It is made once.
func Default() *Painter { return defaultPainter() }

// CJK returns the CJK font file in use and its name, or "" when Chinese is
// replaced by English.
func (pt *Painter) CJK() (path, name string) {
	if pt == nil || pt.fonts.cjk == nil {
		return "", ""
	}
	return pt.fonts.cjkPath, pt.fonts.cjkName
}

// Label returns s as a chart will draw it: itself, or with Chinese
// replaced by English when no font can draw it.
func (pt *Painter) Label(s string) string {
	_, out := pt.fonts.text(s, sizeLegend, false)
	return out
}

// bilingual is a chart's own wording: Chinese and English when a CJK font
// is there, English alone otherwise.
func (pt *Painter) bilingual(zh, en string) string {
	if pt.fonts.cjk == nil {
		return en
	}
	return zh + " " + en
}

// kind is a chart's kind in its title in l: bilingual in zh+en ("损失
// Loss"), Chinese in zh, English in en; English whenever there is no
// Chinese font.
func (pt *Painter) kind(l i18n.Lang, m i18n.Msg) string {
	switch {
	case l == i18n.ZhEn && m.Mix != "" && pt.fonts.cjk != nil:
		return m.Mix
	case l == i18n.ZhEn:
		return pt.bilingual(m.ZH, m.EN)
	case l == i18n.Zh && pt.fonts.cjk != nil:
		return m.ZH
	}
	return m.EN
}

// say is m in l for a label or legend: zh+en labels are English, as they
// always were, and Chinese ones are English without a Chinese font.
func (pt *Painter) say(l i18n.Lang, m i18n.Msg, args ...any) string {
	if l == i18n.Zh && pt.fonts.cjk == nil {
		l = i18n.En
	}
	return l.T(m, args...)
}

// style returns a text style for s, and s as it will be drawn.
func (pt *Painter) style(s string, size vg.Length, bold bool) (text.Style, string) {
	fnt, out := pt.fonts.text(s, size, bold)
	return text.Style{
		Color:   color.Black,
		Font:    fnt,
		XAlign:  draw.XLeft,
		YAlign:  draw.YBottom,
		Handler: text.Plain{Fonts: pt.fonts.cache},
	}, out
}

// newPlot returns a plot with phone-sized fonts, a light grid and the
// given axis labels; the title and legend are drawn above it by render.
func (pt *Painter) newPlot(xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil // the canvas starts white; filling it again through the rasterizer costs ms
	p.TextHandler = text.Plain{Fonts: pt.fonts.cache}
	// The legend and title are drawn by render; these styles only keep
	// gonum away from fonts the cache does not have.
	p.Legend.TextStyle, _ = pt.style("", sizeLegend, false)
	p.Title.TextStyle, _ = pt.style("", sizeTitle, true)
	var s text.Style
	s, p.X.Label.Text = pt.style(xlabel, sizeLabel, false)
	p.X.Label.TextStyle = s
	p.X.Label.Padding = vg.Points(4)
	s, p.Y.Label.Text = pt.style(ylabel, sizeLabel, false)
	p.Y.Label.TextStyle = s
	p.Y.Label.TextStyle.XAlign = draw.XCenter
	p.Y.Label.TextStyle.YAlign = draw.YBottom
	p.X.Label.TextStyle.XAlign = draw.XCenter
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		tick, _ := pt.style("0", sizeTick, false)
		tick.Color = color.RGBA{40, 40, 40, 255}
		ax.Tick.Label = tick
		ax.LineStyle.Width = vg.Points(1)
		ax.Tick.LineStyle.Width = vg.Points(1)
		ax.Tick.Length = vg.Points(6)
		ax.Padding = vg.Points(2)
	}
	p.X.Tick.Label.XAlign = draw.XCenter
	p.X.Tick.Label.YAlign = draw.YTop
	p.Y.Tick.Label.XAlign = draw.XRight
	p.Y.Tick.Label.YAlign = draw.YCenter
	p.X.Tick.Marker = numberTicks{want: 8}
	p.Y.Tick.Marker = numberTicks{want: 6}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = colGrid, colGrid
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(1), vg.Points(1)
	p.Add(grid)
	return p
}

// legendEntry is one item of the legend row above the chart.
type legendEntry struct {
	label string
	line  *draw.LineStyle  // a line sample, or
	glyph *draw.GlyphStyle // a mark
}

func lineEntry(label string, c color.Color, width vg.Length, dashes ...vg.Length) legendEntry {
	return legendEntry{label: label, line: &draw.LineStyle{Color: c, Width: width, Dashes: dashes}}
}

// frame is a whole chart: a title, a legend and one or more plots stacked
// top to bottom, and an optional note under the legend.
type frame struct {
	title  string
	legend []legendEntry
	note   string
	plots  []*plot.Plot
}

// render draws the frame into a Width x Height PNG.
func (pt *Painter) render(f frame) ([]byte, error) {
	w := vg.Length(Width) * vg.Inch / dpi
	h := vg.Length(Height) * vg.Inch / dpi
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(c)
	margin := vg.Points(12)
	dc = draw.Crop(dc, margin, -margin, margin/2, -margin/2)
	top := dc.Max.Y

	// Title, shrunk to fit the width.
	if f.title != "" {
		size := vg.Length(sizeTitle)
		l := pt.line(f.title, size, true, color.Black)
		for l.width > dc.Size().X && size > 14 {
			size--
			l = pt.line(f.title, size, true, color.Black)
		}
		l.draw(dc, vg.Point{X: dc.Center().X, Y: top}, draw.XCenter, draw.YTop)
		top -= l.height() + vg.Points(6)
	}
	// Legend: entries in rows, left to right, wrapped at the width.
	indent := dc.Min.X + vg.Points(50)
	if len(f.legend) > 0 {
		sample := vg.Points(34)
		gap := vg.Points(22)
		rowH := vg.Length(0)
		x := indent
		for _, e := range f.legend {
			l := pt.line(e.label, sizeLegend, false, color.Black)
			ew := sample + vg.Points(8) + l.width
			if x+ew > dc.Max.X && x > indent {
				x = indent
				top -= rowH + vg.Points(4)
				rowH = 0
			}
			rowH = max(rowH, l.height())
			mid := top - l.height()/2
			switch {
			case e.line != nil:
				dc.StrokeLine2(*e.line, x, mid, x+sample, mid)
			case e.glyph != nil:
				dc.DrawGlyph(*e.glyph, vg.Point{X: x + sample/2, Y: mid})
			}
			l.draw(dc, vg.Point{X: x + sample + vg.Points(8), Y: mid}, draw.XLeft, draw.YCenter)
			x += ew + gap
		}
		top -= rowH + vg.Points(6)
	}
	if f.note != "" {
		l := pt.line(f.note, sizeTick, false, colNote)
		l.draw(dc, vg.Point{X: indent, Y: top}, draw.XLeft, draw.YTop)
		top -= l.height() + vg.Points(4)
	}
	for _, p := range f.plots {
		widen(&p.X)
		widen(&p.Y)
	}
	body := draw.Crop(dc, 0, 0, 0, top-dc.Max.Y-vg.Points(4))
	switch len(f.plots) {
	case 0:
	case 1:
		f.plots[0].Draw(body)
	default:
		tiles := draw.Tiles{Rows: len(f.plots), Cols: 1, PadY: vg.Points(16)}
		grid := make([][]*plot.Plot, len(f.plots))
		for i, p := range f.plots {
			grid[i] = []*plot.Plot{p}
		}
		canvases := plot.Align(grid, tiles, body)
		for i, p := range f.plots {
			p.Draw(canvases[i][0])
		}
	}
	return encodePNG(c.Image())
}

// widen gives an axis whose data is (nearly) one value a range around it,
// as gonum does only for exactly equal ends: a single point smoothed by
// the EMA is off by one ulp, and ticks at a 1e-17 step are no use.
func widen(a *plot.Axis) {
	lo, hi := a.Min, a.Max
	if !isFinite(lo) || !isFinite(hi) || hi < lo {
		return
	}
	scale := math.Max(math.Abs(lo), math.Abs(hi))
	if hi-lo > scale*1e-9 {
		return
	}
	pad := scale * 0.05
	if nt, ok := a.Tick.Marker.(numberTicks); pad == 0 || ok && nt.integer {
		pad = math.Max(pad, 1)
	}
	a.Min, a.Max = lo-pad, hi+pad
}

var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngPool{}}

type pngPool struct{ p sync.Pool }

func (b *pngPool) Get() *png.EncoderBuffer {
	v, _ := b.p.Get().(*png.EncoderBuffer)
	return v
}
func (b *pngPool) Put(v *png.EncoderBuffer) { b.p.Put(v) }

func encodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(256 << 10)
	if err := pngEncoder.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}

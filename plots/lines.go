package plots

import (
	"cmp"
	"image"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// reducer keeps, for each of a fixed number of equal-width X buckets, the
// first, last, lowest and highest point (in X order), so a line through what
// it keeps has the same envelope, pixel column by pixel column, as the line
// through every point. It takes points one at a time: a million points cost
// no memory beyond what it keeps.
type reducer struct {
	x0, scale float64
	cols      int
	out       []XY

	open                    bool
	bucket                  int
	n                       int // points in the open bucket
	first, lo, hi, last     XY
	iFirst, iLo, iHi, iLast int
}

func newReducer(x0, x1 float64, columns int) *reducer {
	r := &reducer{x0: x0, cols: max(columns, 1)}
	if x1 > x0 {
		r.scale = float64(r.cols) / (x1 - x0)
	}
	r.out = make([]XY, 0, 4*r.cols+4)
	return r
}

func (r *reducer) add(p XY) {
	b := int((p.X - r.x0) * r.scale)
	b = min(max(b, 0), r.cols-1)
	if !r.open || b != r.bucket {
		r.flush()
		r.open, r.bucket, r.n = true, b, 0
		r.first, r.lo, r.hi = p, p, p
		r.iFirst, r.iLo, r.iHi = 0, 0, 0
	}
	if p.Y < r.lo.Y {
		r.lo, r.iLo = p, r.n
	}
	if p.Y > r.hi.Y {
		r.hi, r.iHi = p, r.n
	}
	r.last, r.iLast = p, r.n
	r.n++
}

// flush appends the open bucket's points in the order they came.
func (r *reducer) flush() {
	if !r.open {
		return
	}
	r.open = false
	pts := [4]XY{r.first, r.lo, r.hi, r.last}
	idx := [4]int{r.iFirst, r.iLo, r.iHi, r.iLast}
	for i := 1; i < 4; i++ {
		for j := i; j > 0 && idx[j] < idx[j-1]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
			pts[j], pts[j-1] = pts[j-1], pts[j]
		}
	}
	for i := range 4 {
		if i == 0 || idx[i] != idx[i-1] {
			r.out = append(r.out, pts[i])
		}
	}
}

func (r *reducer) points() []XY {
	r.flush()
	return r.out
}

// Downsample keeps, for each of columns equal-width X buckets, the first,
// last, lowest and highest point, in X order, so the drawn line has the
// same envelope. pts must be in increasing X. Series of at most 2*columns
// points are returned unchanged.
func Downsample(pts []XY, columns int) []XY {
	if columns < 1 || len(pts) <= 2*columns {
		return pts
	}
	r := newReducer(pts[0].X, pts[len(pts)-1].X, columns)
	for _, p := range pts {
		r.add(p)
	}
	return r.points()
}

// ema is TensorBoard's debiased exponential moving average, one value at a
// time.
type ema struct{ weight, last, norm float64 }

func (e *ema) add(y float64) float64 {
	e.last = e.last*e.weight + (1-e.weight)*y
	e.norm = e.norm*e.weight + (1 - e.weight)
	return e.last / e.norm
}

// EMA smooths a series the way TensorBoard does (debiased exponential
// moving average with the given weight); non-finite values are skipped.
func EMA(pts []XY, weight float64) []XY {
	out := make([]XY, 0, len(pts))
	e := ema{weight: weight}
	for _, p := range pts {
		if isFinite(p.Y) {
			out = append(out, XY{p.X, e.add(p.Y)})
		}
	}
	return out
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// spanLine is a line drawn straight into the image, one vertical span per
// pixel column: the range the line covers in that column, widened by the
// line width and anti-aliased at both ends. A dense noisy series (many
// points per column) costs the same as a smooth one, where a stroked
// polyline would cost seconds (golang/freetype's rasterizer is quadratic in
// the crossings per scanline). Points must be in increasing X.
type spanLine struct {
	pts   []XY
	color color.RGBA
	width vg.Length
	// dash, when > 0, draws dash pixel columns and leaves the next dash
	// columns out: a dashed line, for a series drawn over one it
	// coincides with, so both stay visible.
	dash int
}

// dashPixels is the dash (and gap) length of a dashed spanLine, in pixel
// columns.
const dashPixels = 14

var _ plot.DataRanger = (*spanLine)(nil)

func (l *spanLine) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, p := range l.pts {
		xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
		ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
	}
	return
}

func (l *spanLine) Plot(c draw.Canvas, plt *plot.Plot) {
	if len(l.pts) == 0 {
		return
	}
	vc, ok := imageCanvas(c.Canvas)
	var img *image.RGBA
	if ok {
		img, ok = vc.Image().(*image.RGBA)
	}
	if !ok { // another backend (SVG, PDF): stroke it
		xys := make(plotter.XYs, len(l.pts))
		for i, p := range l.pts {
			xys[i].X, xys[i].Y = p.X, p.Y
		}
		if ln, err := plotter.NewLine(xys); err == nil {
			ln.Color, ln.Width = l.color, l.width
			if l.dash > 0 {
				ln.Dashes = []vg.Length{vg.Points(float64(l.dash)), vg.Points(float64(l.dash))}
			}
			ln.Plot(c, plt)
		}
		return
	}
	dpi := vc.DPI()
	h := float64(img.Bounds().Dy())
	trX, trY := plt.Transforms(&c)
	px := func(p XY) (float64, float64) {
		return float64(trX(p.X).Dots(dpi)), h - float64(trY(p.Y).Dots(dpi))
	}
	left, right := float64(c.Min.X.Dots(dpi)), float64(c.Max.X.Dots(dpi))
	top, bottom := h-float64(c.Max.Y.Dots(dpi)), h-float64(c.Min.Y.Dots(dpi))
	col0 := int(math.Floor(left))
	ncol := int(math.Ceil(right)) - col0
	if ncol <= 0 {
		return
	}
	lo := make([]float64, ncol)
	hi := make([]float64, ncol)
	for i := range lo {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
	}
	mark := func(x, ya, yb float64) {
		k := int(math.Floor(x)) - col0
		if k < 0 || k >= ncol {
			return
		}
		lo[k] = math.Min(lo[k], math.Min(ya, yb))
		hi[k] = math.Max(hi[k], math.Max(ya, yb))
	}
	ax, ay := px(l.pts[0])
	mark(ax, ay, ay)
	for _, p := range l.pts[1:] {
		bx, by := px(p)
		if bx-ax < 1e-6 {
			mark(ax, ay, by)
		} else {
			s := (by - ay) / (bx - ax)
			k0, k1 := math.Floor(ax), math.Floor(bx)
			k0 = math.Max(k0, float64(col0)-1)
			k1 = math.Min(k1, float64(col0+ncol))
			for k := k0; k <= k1; k++ {
				xa, xb := math.Max(ax, k), math.Min(bx, k+1)
				if xb < xa {
					continue
				}
				mark(k, ay+(xa-ax)*s, ay+(xb-ax)*s)
			}
		}
		ax, ay = bx, by
	}
	half := float64(l.width.Dots(dpi)) / 2
	r := max(int(math.Round(half-0.5)), 0) // columns on each side: a thick line stays thick where it is steep
	pix, stride := img.Pix, img.Stride
	for k := range ncol {
		top0, bot0 := math.Inf(1), math.Inf(-1)
		for j := max(k-r, 0); j <= min(k+r, ncol-1); j++ {
			top0, bot0 = math.Min(top0, lo[j]), math.Max(bot0, hi[j])
		}
		if top0 > bot0 {
			continue
		}
		x := col0 + k
		if l.dash > 0 && (x/l.dash)%2 == 1 {
			continue
		}
		if x < img.Rect.Min.X || x >= img.Rect.Max.X || float64(x)+1 <= left || float64(x) >= right {
			continue
		}
		y0, y1 := math.Max(top0-half, top), math.Min(bot0+half, bottom)
		for y := int(math.Floor(y0)); float64(y) < y1; y++ {
			if y < img.Rect.Min.Y || y >= img.Rect.Max.Y {
				continue
			}
			cov := math.Min(float64(y+1), y1) - math.Max(float64(y), y0)
			if cov <= 0 {
				continue
			}
			a := uint32(math.Min(cov, 1)*float64(l.color.A) + 0.5)
			i := (y-img.Rect.Min.Y)*stride + (x-img.Rect.Min.X)*4
			d := pix[i : i+4 : i+4]
			d[0] = uint8((uint32(d[0])*(255-a) + uint32(l.color.R)*a + 127) / 255)
			d[1] = uint8((uint32(d[1])*(255-a) + uint32(l.color.G)*a + 127) / 255)
			d[2] = uint8((uint32(d[2])*(255-a) + uint32(l.color.B)*a + 127) / 255)
			d[3] = uint8((uint32(d[3])*(255-a) + 255*a + 127) / 255)
		}
	}
}

// edgeMarks marks X positions (NaN or Inf values) with a cross along the
// bottom of the data area.
type edgeMarks struct {
	xs    []float64
	style draw.GlyphStyle
}

func (m *edgeMarks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, x := range m.xs {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}

func (m *edgeMarks) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	y := c.Min.Y + m.style.Radius + vg.Points(3)
	for _, x := range m.xs {
		c.DrawGlyph(m.style, vg.Point{X: trX(x), Y: y})
	}
}

// annotation marks one point and writes a label beside it, on the side
// where it fits.
type annotation struct {
	x, y  float64
	label string
	text  text.Style
	glyph draw.GlyphStyle
	// layer places and draws the label, with the other labels of the
	// chart, so that none covers another; the annotation draws its glyph.
	layer *labelLayer
}

// DataRange is the marked point: a peak above every line (a high-water
// mark the samples missed) still gets room on the chart.
func (a *annotation) DataRange() (xmin, xmax, ymin, ymax float64) {
	return a.x, a.x, a.y, a.y
}

func (a *annotation) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	c.DrawGlyph(a.glyph, vg.Point{X: trX(a.x), Y: trY(a.y)})
	if a.layer == nil {
		a.layer = &labelLayer{}
		defer a.layer.Plot(c, plt)
	}
	a.layer.notes = append(a.layer.notes, a)
}

// boxedText draws a label on a white box, which keeps it legible over
// grid and lines.
func boxedText(c draw.Canvas, sty draw.TextStyle, tp vg.Point, label string) {
	c.SetColor(color.White)
	c.Fill(labelBox(sty, tp, label).Path())
	c.FillText(sty, tp, label)
}

// labelPad is the white margin around a label's text.
var labelPad = vg.Points(3)

// labelBox is the box a label drawn at tp with sty covers, its margin in.
func labelBox(sty draw.TextStyle, tp vg.Point, label string) vg.Rectangle {
	box := sty.Rectangle(label).Add(tp)
	box.Min.X -= labelPad
	box.Min.Y -= labelPad
	box.Max.X += labelPad
	box.Max.Y += labelPad
	return box
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// labelLayer draws every text label of a chart last, in one place, so
// that no label covers another: the latest value of each series at the
// plot's right edge (edge labels, moved apart vertically), then the peak
// notes, each at the first spot around its point that is free. It is
// added to the plot after everything else.
type labelLayer struct {
	edges []edgeLabel
	notes []*annotation
	// drawn, when set, is told the boxes of the labels drawn (the tests'
	// check that none overlaps another).
	drawn func([]vg.Rectangle)
}

type edgeLabel struct {
	x, y  float64
	label string
	text  text.Style
	glyph draw.GlyphStyle
}

// note adds a peak's annotation to the layer (the annotation must be added
// to the plot too, for its glyph and its data range).
func (l *labelLayer) note(a *annotation) *annotation {
	a.layer = l
	return a
}

func (l *labelLayer) Plot(c draw.Canvas, plt *plot.Plot) {
	var boxes []vg.Rectangle
	boxes = l.plotEdges(c, plt, boxes)
	trX, trY := plt.Transforms(&c)
	for _, a := range l.notes {
		pt := vg.Point{X: trX(a.x), Y: trY(a.y)}
		sty, tp := placeNote(c, a, pt, boxes)
		boxedText(c, sty, tp, a.label)
		boxes = append(boxes, labelBox(sty, tp, a.label))
	}
	if l.drawn != nil {
		l.drawn(boxes)
	}
}

// placeNote finds where a peak's label goes: above right of its point,
// else above left, below right, below left (each kept on the canvas); the
// first that covers no label already drawn, else the first of those moved
// down (then up) a label's height at a time until one is free.
func placeNote(c draw.Canvas, a *annotation, pt vg.Point, taken []vg.Rectangle) (draw.TextStyle, vg.Point) {
	gap := a.glyph.Radius + vg.Points(4)
	w, hgt := a.text.Width(a.label), a.text.Height(a.label)
	type spot struct {
		sty draw.TextStyle
		tp  vg.Point
	}
	var spots []spot
	for _, right := range []bool{true, false} {
		for _, up := range []bool{true, false} {
			sty := a.text
			tp := pt
			if right {
				tp.X, sty.XAlign = pt.X+gap, draw.XLeft
				if tp.X+w > c.Max.X {
					tp.X, sty.XAlign = c.Max.X-w, draw.XLeft
				}
			} else {
				tp.X, sty.XAlign = pt.X-gap, draw.XRight
				if tp.X-w < c.Min.X {
					tp.X, sty.XAlign = c.Min.X, draw.XLeft
				}
			}
			if up {
				tp.Y, sty.YAlign = min(pt.Y+gap, c.Max.Y-hgt), draw.YBottom
			} else {
				tp.Y, sty.YAlign = max(pt.Y-gap, c.Min.Y+hgt), draw.YTop
			}
			spots = append(spots, spot{sty, tp})
		}
	}
	// Above right and below right first, then the left side.
	spots[1], spots[2] = spots[2], spots[1]
	free := func(s spot) bool {
		box := labelBox(s.sty, s.tp, a.label)
		for _, t := range taken {
			if overlaps(box, t) {
				return false
			}
		}
		return true
	}
	for _, s := range spots {
		if free(s) {
			return s.sty, s.tp
		}
	}
	step := hgt + 2*labelPad + vg.Points(1)
	for _, dir := range []vg.Length{-1, 1} {
		for i := 1; i <= 40; i++ {
			s := spots[0]
			s.tp.Y += dir * step * vg.Length(i)
			box := labelBox(s.sty, s.tp, a.label)
			if box.Min.Y < c.Min.Y || box.Max.Y > c.Max.Y {
				break
			}
			if free(s) {
				return s.sty, s.tp
			}
		}
	}
	return spots[0].sty, spots[0].tp
}

// plotEdges marks the latest point of each series and writes its value at
// the plot's right edge, level with the point where it can be, the labels
// moved apart so that none hides another; it returns boxes with theirs.
func (l *labelLayer) plotEdges(c draw.Canvas, plt *plot.Plot, boxes []vg.Rectangle) []vg.Rectangle {
	trX, trY := plt.Transforms(&c)
	type placed struct {
		l        edgeLabel
		pt       vg.Point
		top, hgt vg.Length
	}
	gap := vg.Points(6)
	between := 2*labelPad + vg.Points(1) // boxes a point apart
	ps := make([]placed, len(l.edges))
	for i, e := range l.edges {
		pt := vg.Point{X: trX(e.x), Y: trY(e.y)}
		hgt := e.text.Height(e.label)
		ps[i] = placed{l: e, pt: pt, hgt: hgt, top: pt.Y + gap + hgt}
	}
	// Highest first; each label sits below the one above it. Then from
	// the bottom up: a label pushed below the plot goes back up, and
	// pushes the ones above it up too (they used to pile up on the
	// bottom edge, over each other).
	slices.SortStableFunc(ps, func(a, b placed) int { return cmp.Compare(b.top, a.top) })
	limit := c.Max.Y - labelPad
	for i := range ps {
		ps[i].top = min(ps[i].top, limit)
		limit = ps[i].top - ps[i].hgt - between
	}
	floor := c.Min.Y + labelPad
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].top = max(ps[i].top, floor+ps[i].hgt)
		floor = ps[i].top + between
	}
	for _, p := range ps {
		c.DrawGlyph(p.l.glyph, p.pt)
		sty := p.l.text
		sty.XAlign, sty.YAlign = draw.XRight, draw.YTop
		tp := vg.Point{X: c.Max.X - labelPad, Y: p.top}
		// A white box behind the label keeps it legible over the lines.
		box := labelBox(sty, tp, p.l.label)
		c.SetColor(color.NRGBA{255, 255, 255, 215})
		c.Fill(box.Path())
		c.FillText(sty, tp, p.l.label)
		boxes = append(boxes, box)
	}
	return boxes
}

// strokeLine is a gonum line, for the few straight lines (ceilings) that
// need dashes.
func strokeLine(pts []XY, c color.Color, width vg.Length, dashes ...vg.Length) (*plotter.Line, error) {
	xys := make(plotter.XYs, len(pts))
	for i, p := range pts {
		xys[i].X, xys[i].Y = p.X, p.Y
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width, l.Dashes = c, width, dashes
	return l, nil
}

// imageCanvas finds the image canvas under the draw.Canvas wrappers that
// cropping adds.
func imageCanvas(c vg.Canvas) (*vgimg.Canvas, bool) {
	for range 64 {
		switch v := c.(type) {
		case *vgimg.Canvas:
			return v, true
		case draw.Canvas:
			c = v.Canvas
		case *draw.Canvas:
			c = v.Canvas
		default:
			return nil, false
		}
	}
	return nil, false
}

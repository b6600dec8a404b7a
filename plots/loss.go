package plots

import (
	"cmp"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// LossChart describes a loss chart: one or more series (the losses of a
// run, or one loss of several runs), each drawn raw as a thin light line
// and smoothed as a bold one.
type LossChart struct {
	// Title says what the chart shows, e.g. "demo · run #12 · finished";
	// the chart puts its kind in front.
	Title string
	// Lang is the language of the kind, the axes and the legend.
	Lang   i18n.Lang
	XLabel string // "step" (or "time" with XTime) when empty
	YLabel string // "loss" when empty
	// XTime says X is seconds since the start: the axis shows durations.
	XTime  bool
	Series []Series
	// Smoothing is TensorBoard's exponential moving average weight in
	// [0, 1); 0 draws the raw line only, in full colour.
	Smoothing float64
	// Kind replaces the chart's kind in the title ("损失 Loss"), as Chinese
	// and English; the comparison chart uses it.
	KindZH, KindEN string
	// YBytes says the values are bytes: binary units on a linear Y axis
	// from 0.
	YBytes bool
	// Peaks marks each series' highest point (or its Peak) with its value.
	Peaks bool
	// Ceiling, when > 0, is drawn as a dashed grey line across the chart
	// (a device's capacity), named CeilingLabel in the legend.
	Ceiling      float64
	CeilingLabel string
	// Markers are vertical lines with a label (live changes, 调参), at
	// their X (a step, or seconds with XTime).
	Markers []Marker
}

// coincideTolerance is how close, as a fraction of the chart's Y range,
// two series' points must be for the later one to be drawn dashed.
const coincideTolerance = 0.004

// coincide reports whether two reduced series lie on each other: the same
// X positions and Y values within tol.
func coincide(a, b []XY, tol float64) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if a[i].X != b[i].X || math.Abs(a[i].Y-b[i].Y) > tol {
			return false
		}
	}
	return true
}

// markersBelow is the series length under which points are also drawn as
// dots, so that a run with one or two values shows something.
const markersBelow = 60

// Loss draws loss curves. It returns ErrNoData when no series has a
// finite value. NaN and Inf values are skipped and marked with a cross
// along the bottom; Y is logarithmic when the values span more than two
// decades.
func (pt *Painter) Loss(c LossChart) ([]byte, error) {
	xlabel := c.XLabel
	if strings.TrimSpace(xlabel) == "" {
		xlabel = pt.say(c.Lang, i18n.AxisStep)
		if c.XTime {
			xlabel = pt.say(c.Lang, i18n.AxisTime)
		}
	}
	ylabel := c.YLabel
	if strings.TrimSpace(ylabel) == "" {
		ylabel = pt.say(c.Lang, i18n.AxisLoss)
	}
	type prepared struct {
		name     string
		col      int
		raw, sm  []XY
		nanXs    []float64
		last     XY // the latest finite point, labelled at the line's end
		finite   int
		nonFin   int
		original int
	}
	var series []prepared
	smoothed := false
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for i, s := range c.Series {
		pts := sortedByX(s.Points)
		var p prepared
		p.name, p.col, p.original = s.Name, i, len(pts)
		x0, x1, ok := xRange(pts)
		if !ok {
			continue
		}
		raw := newReducer(x0, x1, Width)
		sm := newReducer(x0, x1, Width)
		weight := SmoothingFor(c.Smoothing, finiteCount(pts))
		e := ema{weight: weight}
		lastNaN := -1
		for _, q := range pts {
			if !isFinite(q.X) {
				continue
			}
			if !isFinite(q.Y) {
				p.nonFin++
				// One mark per pixel column is enough.
				if b := int((q.X - x0) * raw.scale); b != lastNaN {
					p.nanXs = append(p.nanXs, q.X)
					lastNaN = b
				}
				continue
			}
			p.finite++
			p.last = q
			raw.add(q)
			if weight > 0 {
				sm.add(XY{q.X, e.add(q.Y)})
			}
		}
		p.raw = raw.points()
		if weight > 0 {
			p.sm = sm.points()
			smoothed = true
		}
		for _, q := range p.raw {
			ymin, ymax = math.Min(ymin, q.Y), math.Max(ymax, q.Y)
		}
		if p.finite > 0 || p.nonFin > 0 {
			series = append(series, p)
		}
	}
	drawn := 0
	for _, s := range series {
		drawn += s.finite
	}
	if drawn == 0 {
		return nil, ErrNoData
	}

	dashed := make([]bool, len(series))
	for i := range series {
		dashed[i] = c.Series[series[i].col].Dashed
		for j := 0; j < i && !dashed[i]; j++ {
			dashed[i] = coincide(series[j].raw, series[i].raw, coincideTolerance*math.Max(ymax-ymin, math.Abs(ymax)*1e-9))
		}
	}
	logY := !c.YBytes && ymin > 0 && ymax/ymin > 100
	if logY {
		ylabel += " (log scale)"
	}
	p := pt.newPlot(xlabel, ylabel)
	if c.XTime {
		p.X.Tick.Marker = durationTicks{want: 8}
	} else {
		p.X.Tick.Marker = numberTicks{want: 8, integer: true}
	}
	if c.YBytes {
		p.Y.Tick.Marker = byteTicks{want: 6}
		p.Y.Min = 0
	}
	if logY {
		p.Y.Tick.Marker = logTicks{}
		for i := range series {
			series[i].raw = log10Y(series[i].raw)
			series[i].sm = log10Y(series[i].sm)
		}
	}
	var legend []legendEntry
	var marks []float64
	nonFinite := 0
	latest := &labelLayer{drawn: pt.labelsDrawn}
	rawWidth, smWidth := vg.Points(1.8), vg.Points(3)
	for i, s := range series {
		col := toRGBA(c.Series[s.col].Color, s.col)
		dash := 0
		var dashes []vg.Length
		if dashed[i] {
			dash = dashPixels
			dashes = []vg.Length{vg.Points(8), vg.Points(5)}
		}
		if s.finite > 0 {
			if s.sm != nil {
				p.Add(&spanLine{pts: s.raw, color: lighter(col, 0.5), width: rawWidth, dash: dash})
				p.Add(&spanLine{pts: s.sm, color: col, width: smWidth, dash: dash})
			} else {
				p.Add(&spanLine{pts: s.raw, color: col, width: vg.Points(2.4), dash: dash})
			}
			if s.finite < markersBelow {
				if sc := dots(s.raw, col); sc != nil {
					p.Add(sc)
				}
			}
			// The latest value, written at the line's end: what the run
			// is at now, whatever the smoothing draws.
			y := s.last.Y
			if logY {
				y = math.Log10(y)
			}
			sty, label := pt.style(formatLatest(s.name, s.last.Y, c.YBytes), sizeTick, true)
			sty.Color = col
			latest.edges = append(latest.edges, edgeLabel{x: s.last.X, y: y, label: label, text: sty,
				glyph: draw.GlyphStyle{Color: col, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}})
		}
		label := s.name
		if s.finite == 0 {
			label += " (no finite value)"
		}
		if c.Peaks && s.finite > 0 {
			pk := latest.note(pt.peakMark(c.Lang, s.raw, c.Series[s.col], col, logY))
			p.Add(pk)
			label += " · " + pk.label
		}
		legend = append(legend, lineEntry(label, col, smWidth, dashes...))
		marks = append(marks, s.nanXs...)
		nonFinite += s.nonFin
	}
	if len(latest.edges)+len(latest.notes) > 0 {
		p.Add(latest)
	}
	if len(marks) > 0 {
		slices.Sort(marks)
		glyph := draw.GlyphStyle{Color: colAlert, Radius: vg.Points(7), Shape: boldCross{width: vg.Points(2.5)}}
		p.Add(&edgeMarks{xs: marks, style: glyph})
		legend = append(legend, legendEntry{label: pt.say(c.Lang, i18n.LegendNaN, nonFinite), glyph: &glyph})
	}
	if c.Peaks && c.YBytes {
		// Room above the highest peak for its label.
		top := ymax
		for _, s := range c.Series {
			top = math.Max(top, s.Peak)
		}
		p.Y.Max = top * 1.08
	}
	if c.Ceiling > 0 {
		x0, x1 := math.Inf(1), math.Inf(-1)
		for _, s := range series {
			if len(s.raw) > 0 {
				x0, x1 = math.Min(x0, s.raw[0].X), math.Max(x1, s.raw[len(s.raw)-1].X)
			}
		}
		if x1 >= x0 {
			grey := []vg.Length{vg.Points(8), vg.Points(5)}
			if l, err := strokeLine([]XY{{x0, c.Ceiling}, {x1, c.Ceiling}}, colGrey, vg.Points(2), grey...); err == nil {
				p.Add(l)
			}
			legend = append(legend, lineEntry(cmpOr(c.CeilingLabel, pt.say(c.Lang, i18n.LegendTotal, units.Bytes(int64(c.Ceiling)))), colGrey, vg.Points(2), grey...))
			p.Y.Max = math.Max(p.Y.Max, c.Ceiling*1.04)
		}
	}
	if len(c.Markers) > 0 {
		marks := slices.Clone(c.Markers)
		slices.SortStableFunc(marks, func(a, b Marker) int { return cmp.Compare(a.X, b.X) })
		styles := make([]text.Style, len(marks))
		for i := range marks {
			styles[i], marks[i].Label = pt.style(marks[i].Label, sizeTick, true)
			styles[i].Color = colMarker
		}
		p.Add(&vmarks{marks: marks, styles: styles, width: vg.Points(2)})
	}
	note := ""
	if smoothed {
		note = pt.say(c.Lang, i18n.NoteSmoothed, c.Smoothing)
	}
	if span, ok := widenTiny(p, c.YBytes || logY); ok && span > 0 { // one value needs no words
		note = strings.TrimPrefix(note+" · "+pt.say(c.Lang, i18n.NoteNarrowRange, strconv.FormatFloat(span, 'g', 2, 64)), " · ")
	}
	return pt.render(frame{title: joinTitle(pt.lossKind(c), c.Title), legend: legend, note: note, plots: []*plot.Plot{p}})
}

// tinySpan is the least span of a loss chart's Y axis, relative to the
// values' size: a 2-point chart from 2.2932 to 2.2949 (0.07 %) drew a
// change of nothing as a cliff.
const tinySpan = 0.02

// widenTiny widens a linear Y axis whose values span less than tinySpan of
// their size to that span around them, and returns the values' own span
// (so the chart can say it did). Byte and log axes are left alone.
func widenTiny(p *plot.Plot, skip bool) (float64, bool) {
	lo, hi := p.Y.Min, p.Y.Max
	if skip || math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return 0, false
	}
	size := math.Max(math.Abs(lo), math.Abs(hi))
	if size == 0 || hi-lo >= tinySpan*size {
		return 0, false
	}
	mid, half := (lo+hi)/2, tinySpan*size/2
	p.Y.Min, p.Y.Max = mid-half, mid+half
	return hi - lo, true
}

// lossKind is what the chart's title says it shows: "损失 Loss", the
// chart's own kind, or the metrics drawn when none is a loss ("acc", not
// "Loss").
func (pt *Painter) lossKind(c LossChart) string {
	switch {
	case c.KindEN != "" && c.KindZH != "":
		return pt.kind(c.Lang, i18n.Msg{ZH: c.KindZH, EN: c.KindEN})
	case c.KindEN != "":
		return c.KindEN
	case !anyLoss(c.Series):
		var names []string
		for _, s := range c.Series {
			names = append(names, s.Name)
		}
		return strings.Join(names, ", ")
	}
	return pt.kind(c.Lang, i18n.KindLoss)
}

// SmoothingFor is the EMA weight a series of n finite points is smoothed
// with: none under minSmoothed points (a few values are shown as they are),
// and at most the weight whose window (1/(1-w) points) is a tenth of the
// series, so that the bold line of a short series ends near its last value
// (4 points of val_loss with weight 0.6 ended at 0.113 where the last value
// was 0.0756).
func SmoothingFor(weight float64, n int) float64 {
	if weight <= 0 || n < minSmoothed {
		return 0
	}
	return min(weight, 1-10/float64(n))
}

// minSmoothed is the fewest points a smoothed line is drawn for.
const minSmoothed = 20

func finiteCount(pts []XY) int {
	n := 0
	for _, p := range pts {
		if isFinite(p.X) && isFinite(p.Y) {
			n++
		}
	}
	return n
}

// anyLoss reports whether a series is named like a loss.
func anyLoss(series []Series) bool {
	for _, s := range series {
		if strings.Contains(strings.ToLower(s.Name), "loss") {
			return true
		}
	}
	return len(series) == 0
}

// formatLatest writes a latest value with 4 significant digits, or a
// byte count (a chart in bytes, or a metric whose name and size say so)
// in binary units.
func formatLatest(name string, v float64, bytes bool) string {
	if bytes || units.IsBytes(name, v) {
		return units.Bytes(int64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// boldCross is a cross glyph drawn with a line width of its own (gonum's
// CrossGlyph uses 0.5 pt, a hairline at phone size).
type boldCross struct{ width vg.Length }

func (b boldCross) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: b.width})
	r := sty.Radius * 0.7071
	var p vg.Path
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
	c.Stroke(p)
	p = p[:0]
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
	c.Stroke(p)
}

// log10Y maps Y to log10(Y) in place (min and max per column survive a
// monotonic map).
func log10Y(pts []XY) []XY {
	for i := range pts {
		pts[i].Y = math.Log10(pts[i].Y)
	}
	return pts
}

func joinTitle(kind, title string) string {
	if strings.TrimSpace(title) == "" {
		return kind
	}
	return kind + " — " + title
}

// sortedByX returns pts, or a sorted copy when they are not in X order.
func sortedByX(pts []XY) []XY {
	for i := 1; i < len(pts); i++ {
		if pts[i].X < pts[i-1].X {
			out := slices.Clone(pts)
			slices.SortStableFunc(out, func(a, b XY) int {
				switch {
				case a.X < b.X:
					return -1
				case a.X > b.X:
					return 1
				}
				return 0
			})
			return out
		}
	}
	return pts
}

// xRange returns the first and last finite X of sorted points.
func xRange(pts []XY) (x0, x1 float64, ok bool) {
	i, j := 0, len(pts)-1
	for i <= j && !isFinite(pts[i].X) {
		i++
	}
	for j >= i && !isFinite(pts[j].X) {
		j--
	}
	if i > j {
		return 0, 0, false
	}
	return pts[i].X, pts[j].X, true
}

// dots marks each point of a short series.
func dots(pts []XY, col color.Color) *plotter.Scatter {
	xys := make(plotter.XYs, len(pts))
	for i, p := range pts {
		xys[i].X, xys[i].Y = p.X, p.Y
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return nil
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	return sc
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// peakMark marks the highest point of a series (reduced points, drawn in
// col), or the series' own Peak above it, with "peak 1.25 GiB".
func (pt *Painter) peakMark(l i18n.Lang, raw []XY, s Series, col color.RGBA, logY bool) *annotation {
	top := raw[0]
	for _, q := range raw {
		if q.Y > top.Y {
			top = q
		}
	}
	v := top.Y
	if logY {
		v = math.Pow(10, v)
	}
	label := pt.say(l, i18n.LegendPeak, units.Bytes(int64(v)))
	if s.Peak > v {
		v = s.Peak
		label = pt.say(l, i18n.LegendPeak, units.Bytes(int64(v)))
		top.Y = v
		if logY {
			top.Y = math.Log10(v)
		}
	}
	if s.PeakNote != "" {
		label += " (" + s.PeakNote + ")"
	}
	sty, txt := pt.style(label, sizeNote, true)
	sty.Color = col
	return &annotation{x: top.X, y: top.Y, label: txt, text: sty,
		glyph: draw.GlyphStyle{Color: col, Radius: vg.Points(6), Shape: draw.RingGlyph{}}}
}

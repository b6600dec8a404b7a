package plots

import (
	"fmt"
	"math"
	"strconv"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// MemoryChart describes what a run held over time. X is seconds since the
// run started; Y is bytes.
type MemoryChart struct {
	Title string
	// Lang is the language of the kind, the axes and the legend.
	Lang i18n.Lang
	// GPU is the accelerator memory held by the run's processes.
	GPU []XY
	// GPUTotal is the capacity of the devices the run uses, drawn as a
	// dashed ceiling.
	GPUTotal []XY
	// Host is the resident memory of the run's process tree.
	Host []XY
	// GPUPeak and HostPeak are the run's peaks as recorded (0: none): the
	// peak shown is the higher of each and its samples' highest, at the
	// highest sample's time, so the chart says what the end report says
	// (VmHWM above every sample, say). HostPeakNote says how HostPeak was
	// measured ("VmHWM, exact"); it is shown when HostPeak is the one.
	GPUPeak, HostPeak float64
	HostPeakNote      string
}

// Memory draws a memory chart: GPU memory of the run with the devices'
// capacity as a dashed ceiling, host memory, and each peak labelled. It
// returns ErrNoData when there is no sample.
func (pt *Painter) Memory(c MemoryChart) ([]byte, error) {
	gpu, total, host := finitePoints(c.GPU), finitePoints(c.GPUTotal), finitePoints(c.Host)
	if len(gpu) == 0 && len(host) == 0 {
		return nil, ErrNoData
	}
	p := pt.newPlot(pt.say(c.Lang, i18n.AxisSinceStart), pt.say(c.Lang, i18n.AxisMemory))
	p.X.Tick.Marker = durationTicks{want: 8}
	p.Y.Tick.Marker = byteTicks{want: 6}
	p.Y.Min = 0
	var legend []legendEntry
	width := vg.Points(2.6)
	ceiling := 0.0
	if len(total) > 0 {
		for _, q := range total {
			ceiling = math.Max(ceiling, q.Y)
		}
		// Stretch the ceiling over the whole time axis.
		x0, x1 := math.Inf(1), math.Inf(-1)
		for _, s := range [][]XY{gpu, host, total} {
			if len(s) > 0 {
				x0, x1 = math.Min(x0, s[0].X), math.Max(x1, s[len(s)-1].X)
			}
		}
		line := stepLine(total, x0, x1)
		if l, err := strokeLine(line, colGrey, vg.Points(2), vg.Points(8), vg.Points(5)); err == nil {
			p.Add(l)
		}
		label := pt.say(c.Lang, i18n.LegendGPUTotal, units.Bytes(int64(ceiling)))
		legend = append(legend, lineEntry(label, colGrey, vg.Points(2), vg.Points(8), vg.Points(5)))
	}
	type part struct {
		name string
		pts  []XY
		col  int
		peak float64
		note string
	}
	labels := &labelLayer{drawn: pt.labelsDrawn}
	for _, s := range []part{{pt.say(c.Lang, i18n.LegendGPURun), gpu, 0, c.GPUPeak, ""}, {pt.say(c.Lang, i18n.LegendHostRun), host, 2, c.HostPeak, c.HostPeakNote}} {
		if len(s.pts) == 0 {
			continue
		}
		col := Palette[s.col]
		p.Add(&spanLine{pts: Downsample(s.pts, Width), color: col, width: width})
		if len(s.pts) < markersBelow {
			if sc := dots(s.pts, col); sc != nil {
				p.Add(sc)
			}
		}
		peak := s.pts[0]
		for _, q := range s.pts {
			if q.Y > peak.Y {
				peak = q
			}
		}
		note := ""
		if s.peak > peak.Y {
			peak.Y, note = s.peak, s.note
		}
		label := pt.say(c.Lang, i18n.LegendPeak, units.Bytes(int64(peak.Y)))
		if note != "" {
			label += " (" + note + ")"
		}
		if ceiling > 0 && s.col == 0 {
			label += fmt.Sprintf(" (%.0f%%)", 100*peak.Y/ceiling)
		}
		sty, txt := pt.style(label, sizeNote, true)
		sty.Color = col
		p.Add(labels.note(&annotation{x: peak.X, y: peak.Y, label: txt, text: sty,
			glyph: draw.GlyphStyle{Color: col, Radius: vg.Points(5), Shape: draw.RingGlyph{}}}))
		legend = append(legend, lineEntry(s.name+" · "+label, col, width))
	}
	p.Add(labels)
	if ceiling > 0 {
		p.Y.Max = math.Max(p.Y.Max, ceiling*1.04)
	}
	// 显存 is accelerator memory; a CPU-only run's chart is 内存 (host memory).
	kind := i18n.KindMemoryHost
	if len(gpu) > 0 {
		kind = i18n.KindMemoryGPU
	}
	return pt.render(frame{title: joinTitle(pt.kind(c.Lang, kind), c.Title), legend: legend, plots: []*plot.Plot{p}})
}

// stepLine turns capacity samples into a line from x0 to x1 that holds
// each value until the next sample.
func stepLine(pts []XY, x0, x1 float64) []XY {
	out := []XY{{x0, pts[0].Y}}
	for i, q := range pts {
		if i > 0 && q.Y != pts[i-1].Y {
			out = append(out, XY{q.X, pts[i-1].Y}, q)
		}
	}
	return append(out, XY{x1, pts[len(pts)-1].Y})
}

// DeviceSeries is one accelerator over time. X is seconds since the run
// started.
type DeviceSeries struct {
	Name  string // "GPU 0 · NVIDIA H100 80GB HBM3"
	Util  []XY   // percent
	TempC []XY   // degrees Celsius
}

// DeviceChart describes the utilisation and temperature of the devices a
// run used.
type DeviceChart struct {
	Title string
	// Lang is the language of the kind, the axes and the legend.
	Lang    i18n.Lang
	Devices []DeviceSeries
}

// Device draws utilisation (top) and temperature (bottom) of each device.
// It returns ErrNoData when there is no sample.
func (pt *Painter) Device(c DeviceChart) ([]byte, error) {
	util := pt.newPlot("", pt.say(c.Lang, i18n.AxisUtil))
	util.Y.Tick.Marker = unitTicks{want: 5, unit: "%"}
	util.Y.Min, util.Y.Max = 0, 100
	temp := pt.newPlot(pt.say(c.Lang, i18n.AxisSinceStart), pt.say(c.Lang, i18n.AxisTemp))
	temp.Y.Tick.Marker = unitTicks{want: 4, unit: " °C"}
	var legend []legendEntry
	width := vg.Points(2.4)
	hasUtil, hasTemp := false, false
	x0, x1 := math.Inf(1), math.Inf(-1)
	for i, d := range c.Devices {
		col := Palette[i%len(Palette)]
		u, t := finitePoints(d.Util), finitePoints(d.TempC)
		if len(u) == 0 && len(t) == 0 {
			continue
		}
		if len(u) > 0 {
			hasUtil = true
			util.Add(&spanLine{pts: Downsample(u, Width), color: col, width: width})
			x0, x1 = math.Min(x0, u[0].X), math.Max(x1, u[len(u)-1].X)
		}
		if len(t) > 0 {
			hasTemp = true
			temp.Add(&spanLine{pts: Downsample(t, Width), color: col, width: width})
			x0, x1 = math.Min(x0, t[0].X), math.Max(x1, t[len(t)-1].X)
		}
		label := d.Name
		if len(u) > 0 {
			label += fmt.Sprintf(" (mean %.0f%%)", meanY(u))
		}
		legend = append(legend, lineEntry(label, col, width))
	}
	if !hasUtil && !hasTemp {
		return nil, ErrNoData
	}
	plots := []*plot.Plot{}
	for _, pl := range []struct {
		p   *plot.Plot
		has bool
	}{{util, hasUtil}, {temp, hasTemp}} {
		if !pl.has {
			continue
		}
		pl.p.X.Tick.Marker = durationTicks{want: 8}
		pl.p.X.Min, pl.p.X.Max = x0, x1
		plots = append(plots, pl.p)
	}
	last := plots[len(plots)-1]
	_, last.X.Label.Text = pt.style(pt.say(c.Lang, i18n.AxisSinceStart), sizeLabel, false)
	title := joinTitle(pt.kind(c.Lang, i18n.KindUtilTemp), c.Title)
	if !hasTemp {
		title = joinTitle(pt.kind(c.Lang, i18n.KindUtil), c.Title)
	}
	return pt.render(frame{title: title, legend: legend, plots: plots})
}

// unitTicks labels plain numbers followed by a unit: 50%, 70 °C.
type unitTicks struct {
	want int
	unit string
}

func (t unitTicks) Ticks(min, max float64) []plot.Tick {
	return niceTicks(min, max, t.want, func(v, step float64) string {
		return units.TrimZeros(strconv.FormatFloat(v, 'f', decimals(step), 64)) + t.unit
	})
}

func finitePoints(pts []XY) []XY {
	pts = sortedByX(pts)
	for _, q := range pts {
		if !isFinite(q.X) || !isFinite(q.Y) {
			out := make([]XY, 0, len(pts))
			for _, q := range pts {
				if isFinite(q.X) && isFinite(q.Y) {
					out = append(out, q)
				}
			}
			return out
		}
	}
	return pts
}

func meanY(pts []XY) float64 {
	s := 0.0
	for _, q := range pts {
		s += q.Y
	}
	return s / float64(len(pts))
}

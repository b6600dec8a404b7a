package plots

import (
	"math"
	"strconv"

	"github.com/trainbot/trainbot/internal/units"
	"gonum.org/v1/plot"
)

// niceTicks returns labelled ticks at a round step (1, 2, 2.5 or 5 times a
// power of ten) so that about want labels fit between min and max, with
// minor ticks between them; format labels a value given the step.
func niceTicks(min, max float64, want int, format func(v, step float64) string) []plot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) || want < 2 {
		return []plot.Tick{{Value: min, Label: format(min, 1)}}
	}
	step, minors := niceStep((max - min) / float64(want))
	return stepTicks(min, max, step, minors, format)
}

// stepTicks labels every multiple of step in [min, max] and puts minors-1
// minor ticks between two labels.
func stepTicks(min, max, step float64, minors int, format func(v, step float64) string) []plot.Tick {
	first := math.Ceil(min/step - 1e-9)
	last := math.Floor(max/step + 1e-9)
	// A degenerate range (labels beyond float precision, or too many):
	// label the ends only, and never loop for long.
	if last-first > 1000 || math.Abs(first) > 1<<50 || math.Abs(last) > 1<<50 || step <= 0 {
		return []plot.Tick{{Value: min, Label: format(min, max-min)}, {Value: max, Label: format(max, max-min)}}
	}
	var ticks []plot.Tick
	minor := step / float64(minors)
	for i := range int(last-first) + 2 {
		k := first - 1 + float64(i)
		v := k * step
		if k >= first && v >= min-step*1e-9 && v <= max+step*1e-9 {
			if math.Abs(v) < step*1e-9 {
				v = 0
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: format(v, step)})
		}
		for m := 1; m < minors; m++ {
			if mv := v + float64(m)*minor; mv >= min && mv <= max {
				ticks = append(ticks, plot.Tick{Value: mv})
			}
		}
	}
	return ticks
}

// niceStep rounds a raw step up to 1, 2, 2.5 or 5 times a power of ten and
// says how many minor intervals divide it.
func niceStep(raw float64) (float64, int) {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []struct {
		f      float64
		minors int
	}{{1, 5}, {2, 4}, {2.5, 5}, {5, 5}, {10, 5}} {
		if raw <= m.f*mag*(1+1e-9) {
			return m.f * mag, m.minors
		}
	}
	return 10 * mag, 5
}

// numberTicks labels plain numbers with SI suffixes: 12k, 1.5M, 0.25;
// integer axes (steps) get no tick between two integers.
type numberTicks struct {
	want    int
	integer bool
}

func (t numberTicks) Ticks(min, max float64) []plot.Tick {
	if t.integer && max > min && (max-min)/float64(t.want) < 1 {
		return stepTicks(min, max, 1, 1, formatStep)
	}
	return niceTicks(min, max, t.want, formatStep)
}

// formatStep prints v with as many digits as the step needs, with an SI
// suffix chosen by the step: 12k, 12.5k, 1.25M, 0.035.
func formatStep(v, step float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Max(math.Abs(v), step)
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if a >= u.div && step >= u.div/100 {
			return units.TrimZeros(strconv.FormatFloat(v/u.div, 'f', decimals(step/u.div), 64)) + u.suffix
		}
	}
	if step < 1e-4 && v != 0 && math.Abs(v) < 1e-3 {
		return strconv.FormatFloat(v, 'e', 1, 64)
	}
	return units.TrimZeros(strconv.FormatFloat(v, 'f', decimals(step), 64))
}

// decimals is how many digits after the point show a multiple of step.
func decimals(step float64) int {
	if step <= 0 {
		return 2
	}
	d := int(math.Ceil(-math.Log10(step) - 1e-9))
	if frac := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9)); math.Abs(frac-2.5) < 1e-9 {
		d++ // 0.25, 2.5k
	}
	return min(max(d, 0), 10)
}

// byteTicks labels bytes in binary units: 512 MiB, 14.5 GiB.
type byteTicks struct{ want int }

var byteUnits = []struct {
	size float64
	name string
}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}, {1, "B"}}

func (t byteTicks) Ticks(min, max float64) []plot.Tick {
	unit := byteUnits[len(byteUnits)-1]
	for _, u := range byteUnits {
		if math.Max(math.Abs(min), math.Abs(max)) >= u.size {
			unit = u
			break
		}
	}
	ticks := niceTicks(min/unit.size, max/unit.size, t.want, func(v, step float64) string {
		return units.TrimZeros(strconv.FormatFloat(v, 'f', decimals(step), 64)) + " " + unit.name
	})
	for i := range ticks {
		ticks[i].Value *= unit.size
	}
	return ticks
}

// durationTicks labels seconds as durations at round steps: 30s, 5m, 2h.
type durationTicks struct{ want int }

var durationSteps = []struct {
	s      float64
	minors int
}{
	{1, 5}, {2, 4}, {5, 5}, {10, 5}, {15, 3}, {30, 3}, {60, 4}, {120, 4}, {300, 5}, {600, 5}, {900, 3},
	{1800, 3}, {3600, 4}, {7200, 4}, {3 * 3600, 3}, {6 * 3600, 6}, {12 * 3600, 6}, {86400, 4}, {2 * 86400, 4},
	{7 * 86400, 7},
}

func (t durationTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) {
		return []plot.Tick{{Value: min, Label: units.Seconds(min)}}
	}
	raw := (max - min) / float64(t.want)
	if raw < 1 {
		return niceTicks(min, max, t.want, func(v, step float64) string {
			return units.TrimZeros(strconv.FormatFloat(v, 'f', decimals(step), 64)) + "s"
		})
	}
	for _, d := range durationSteps {
		if raw <= d.s {
			return stepTicks(min, max, d.s, d.minors, func(v, _ float64) string { return units.Seconds(v) })
		}
	}
	step, minors := niceStep(raw / 86400)
	return stepTicks(min, max, step*86400, minors, func(v, _ float64) string { return units.Seconds(v) })
}

// logTicks labels an axis whose values are log10 of the data at 1, 2 and
// 5 times powers of ten (only the powers when the range spans more than
// four decades). Charts plot log10(y) on a linear axis rather than use
// gonum's LogScale, which places the axis label's glyph box by the
// arithmetic midpoint and so squeezes the plot.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) || max-min > 600 {
		return []plot.Tick{{Value: min, Label: units.SI(math.Pow(10, min))}}
	}
	lo, hi := math.Floor(min), math.Ceil(max)
	labels := []float64{1, 2, 5}
	if hi-lo > 4 {
		labels = []float64{1}
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := e + math.Log10(m)
			if v < min-1e-9 || v > max+1e-9 {
				continue
			}
			t := plot.Tick{Value: v}
			for _, l := range labels {
				if m == l {
					t.Label = units.SI(math.Pow(10, e) * m)
				}
			}
			ticks = append(ticks, t)
		}
	}
	if countLabels(ticks) < 2 { // less than a decade: label linearly
		lin := numberTicks{want: 6}.Ticks(math.Pow(10, min), math.Pow(10, max))
		ticks = ticks[:0]
		for _, t := range lin {
			if t.Value > 0 {
				ticks = append(ticks, plot.Tick{Value: math.Log10(t.Value), Label: t.Label})
			}
		}
	}
	return ticks
}

func countLabels(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	return n
}

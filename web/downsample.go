package web

import "math"

// Series is a chart's series as the browser gets it: x (steps, or Unix
// milliseconds for samples) and y, in x order. NaN and ±Inf values are
// left out of the lines and counted in Skipped.
type Series struct {
	X       []int64   `json:"x"`
	Y       []float64 `json:"y"`
	Skipped int       `json:"skipped,omitempty"`
}

// Downsample reduces points (xs ascending) with from ≤ x ≤ to to at most
// two per pixel column of a chart width px wide: of each column the point
// with the lowest and the one with the highest value, in x order. So the
// line drawn through them has the envelope of every point, and a 10⁷-step
// run sends at most 2 × width points. Columns without points send none.
func Downsample(xs []int64, ys []float64, from, to int64, width int) Series {
	if width < 1 {
		width = 1
	}
	var out Series
	if to < from {
		return out
	}
	span := float64(to-from) + 1
	col, lo, hi := -1, -1, -1
	flush := func() {
		if col < 0 {
			return
		}
		a, b := lo, hi
		if b < a {
			a, b = b, a
		}
		out.X, out.Y = append(out.X, xs[a]), append(out.Y, ys[a])
		if b != a {
			out.X, out.Y = append(out.X, xs[b]), append(out.Y, ys[b])
		}
	}
	for i, x := range xs {
		if x < from || x > to {
			continue
		}
		y := ys[i]
		if math.IsNaN(y) || math.IsInf(y, 0) {
			out.Skipped++
			continue
		}
		c := int(float64(x-from) / span * float64(width))
		if c != col {
			flush()
			col, lo, hi = c, i, i
			continue
		}
		if y < ys[lo] {
			lo = i
		}
		if y > ys[hi] {
			hi = i
		}
	}
	flush()
	return out
}

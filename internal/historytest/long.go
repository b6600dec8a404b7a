package historytest

import (
	"context"
	"math"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// NoisyLoss is a decaying loss with deterministic noise, at a step of a
// run of steps steps: what a long training prints.
func NoisyLoss(step, steps int64) float64 {
	x := uint64(step)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	noise := float64(x>>11)/(1<<53) - 0.5
	return 2*math.Exp(-5*float64(step)/float64(steps)) + 0.1 + 0.15*noise
}

// AddThinned records what the recorder's storage thinning keeps of a
// metric printed at every every-th step from every to steps (steps/every
// points, read at even intervals over the run): the first, lowest,
// highest and last point of each bucket of the final width
// (trainer.BucketWidth), and the first and last NaN, +Inf and -Inf (value
// returns them there). The
// store's thinning keeps the same points (the widths nest), so a run of
// 10⁷ steps is recorded in seconds, as thinning would leave it, without
// printing 10⁷ lines. It waits for the store to write every 100,000
// points queued; Flush the store to write the last ones.
func AddThinned(st *store.Store, r *trainer.Run, name string, steps, every int64, value func(step int64) float64) {
	n := steps / every
	if n < 1 {
		return
	}
	width := trainer.BucketWidth((n-1)*every, trainer.MaxBuckets)
	dur := r.EndedAt.Sub(r.StartedAt)
	at := func(step int64) time.Time {
		return r.StartedAt.Add(time.Duration(float64(dur) * float64(step) / float64(steps)))
	}
	type held struct {
		step int64
		v    float64
	}
	var batch []trainer.TimedPoint
	queued := 0
	add := func(h held) {
		batch = append(batch, trainer.TimedPoint{Point: logparse.Point{Step: h.step, Epoch: math.NaN(), Name: name, Value: h.v}, At: at(h.step)})
		if len(batch) >= 4096 {
			st.AddPoints(r.ID, batch)
			queued += len(batch)
			batch = nil
		}
		if queued >= 100_000 {
			st.Flush(context.Background())
			queued = 0
		}
	}
	open := false
	var bucket int64
	var first, lo, hi, last held
	release := func() {
		if !open {
			return
		}
		// In step order, each once: first, then the others by step.
		pts := []held{first}
		for _, h := range []held{lo, hi, last} {
			dup := false
			for _, p := range pts {
				dup = dup || p.step == h.step
			}
			if !dup {
				pts = append(pts, h)
			}
		}
		for i := 1; i < len(pts); i++ {
			for j := i; j > 0 && pts[j].step < pts[j-1].step; j-- {
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
		for _, p := range pts {
			add(p)
		}
	}
	// The non-finite points of each kind: the open bucket, its last point.
	var nf [3]struct {
		open, held bool
		bucket     int64
		last       held
	}
	kind := func(v float64) int {
		switch {
		case math.IsNaN(v):
			return 0
		case v > 0:
			return 1
		}
		return 2
	}
	for i := int64(1); i <= n; i++ {
		step := i * every
		h := held{step, value(step)}
		if math.IsNaN(h.v) || math.IsInf(h.v, 0) {
			k := &nf[kind(h.v)]
			if b := step / width; !k.open || b != k.bucket {
				if k.held {
					add(k.last)
				}
				k.open, k.held, k.bucket = true, false, b
				add(h)
				continue
			}
			k.last, k.held = h, true
			continue
		}
		if b := step / width; !open || b != bucket {
			release()
			open, bucket = true, b
			first, lo, hi, last = h, h, h, h
			continue
		}
		if h.v < lo.v {
			lo = h
		}
		if h.v >= hi.v {
			hi = h
		}
		last = h
	}
	release()
	for _, k := range nf {
		if k.held {
			add(k.last)
		}
	}
	if len(batch) > 0 {
		st.AddPoints(r.ID, batch)
	}
}

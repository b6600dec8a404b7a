// Package demo is trainbot's built-in demo training: a real two-layer
// neural network (2 → hidden → 3, ReLU, softmax cross-entropy, Adam) learning
// to classify a generated three-arm spiral, in plain Go.
//
// trainbot runs it as a child process ("trainbot demo-train"), so it goes
// through the same supervision and log parsing as a user's script. It prints
// the classic PyTorch-tutorial line every few steps:
//
//	Epoch [1/15], Step [10/100], Loss: 1.0712, Acc: 0.42
//
// and a JSON line with validation metrics after each epoch. A step is real
// work but takes microseconds, so Pace spaces steps out to make the demo last
// long enough to be watched (about 30 s by default).
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"
)

// Config is the demo's hyper-parameters.
type Config struct {
	Steps     int           // total optimisation steps
	BatchSize int           // examples per step
	Hidden    int           // hidden units
	LR        float64       // Adam learning rate
	Seed      uint64        // data and initialisation seed
	Pace      time.Duration // minimum wall time per step (0: as fast as possible)
	LogEvery  int           // print a line every this many steps
	// Checkpoint is where the weights are written when training stops
	// (interrupted or finished); "" writes none.
	Checkpoint string
}

// DefaultConfig is about 30 seconds of training.
func DefaultConfig() Config {
	return Config{Steps: 1500, BatchSize: 64, Hidden: 64, LR: 0.01, Seed: 1, Pace: 20 * time.Millisecond, LogEvery: 10}
}

// Result summarises a training.
type Result struct {
	Steps       int
	FirstLoss   float64 // the first printed (averaged) loss
	FinalLoss   float64 // the last printed loss
	ValAcc      float64
	Interrupted bool
}

const classes = 3

// Epochs splits total steps into epochs of about 100 steps.
func Epochs(steps int) (epochs, perEpoch int) {
	if steps < 1 {
		steps = 1
	}
	epochs = max(1, int(math.Round(float64(steps)/100)))
	perEpoch = max(1, steps/epochs)
	return epochs, perEpoch
}

// Train trains until cfg.Steps or until ctx is cancelled, printing progress
// to out.
func Train(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	if cfg.Steps < 1 || cfg.BatchSize < 1 || cfg.Hidden < 1 || !(cfg.LR > 0) {
		return Result{}, fmt.Errorf("demo: steps, batch size, hidden units and learning rate must be positive")
	}
	if cfg.LogEvery < 1 {
		cfg.LogEvery = 10
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7261696e626f74))
	train := spiral(rng, 300)
	val := spiral(rng, 100)
	net := newMLP(rng, cfg.Hidden)
	opt := newAdam(net, cfg.LR)
	epochs, perEpoch := Epochs(cfg.Steps)
	total := epochs * perEpoch
	fmt.Fprintf(out, "demo: 3-class spiral, %d train / %d val points, MLP 2-%d-3, Adam (learning rate %g), batch %d, %d epochs x %d steps\n",
		len(train.y), len(val.y), cfg.Hidden, cfg.LR, cfg.BatchSize, epochs, perEpoch)

	res := Result{FirstLoss: math.NaN(), FinalLoss: math.NaN()}
	order := rng.Perm(len(train.y))
	pos := 0
	var lossSum, accSum float64
	var window int
	next := time.Now()
	step := 0
loop:
	for e := 1; e <= epochs; e++ {
		for s := 1; s <= perEpoch; s++ {
			if cfg.Pace > 0 {
				next = next.Add(cfg.Pace)
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
						res.Interrupted = true
						break loop
					case <-time.After(d):
					}
				} else {
					next = time.Now()
				}
			}
			if ctx.Err() != nil {
				res.Interrupted = true
				break loop
			}
			idx := make([]int, cfg.BatchSize)
			for i := range idx {
				if pos == len(order) {
					rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
					pos = 0
				}
				idx[i] = order[pos]
				pos++
			}
			loss, acc := net.step(train, idx, opt)
			step++
			res.Steps = step
			lossSum += loss
			accSum += acc
			window++
			if s%cfg.LogEvery == 0 || s == perEpoch {
				l := lossSum / float64(window)
				fmt.Fprintf(out, "Epoch [%d/%d], Step [%d/%d], Loss: %.4f, Acc: %.2f\n", e, epochs, s, perEpoch, l, accSum/float64(window))
				if math.IsNaN(res.FirstLoss) {
					res.FirstLoss = l
				}
				res.FinalLoss = l
				lossSum, accSum, window = 0, 0, 0
			}
		}
		vl, va := net.evaluate(val)
		res.ValAcc = va
		line, _ := json.Marshal(map[string]any{"epoch": e, "val_loss": round4(vl), "val_acc": round4(va)})
		fmt.Fprintf(out, "%s\n", line)
	}
	if res.Interrupted {
		fmt.Fprintf(out, "Interrupted at step %d/%d\n", step, total)
	} else {
		fmt.Fprintf(out, "Training finished: %d steps, final loss %.4f, validation accuracy %.3f\n", step, res.FinalLoss, res.ValAcc)
	}
	if cfg.Checkpoint != "" {
		if err := net.save(cfg.Checkpoint, step); err != nil {
			return res, fmt.Errorf("save checkpoint: %w", err)
		}
		fmt.Fprintf(out, "Checkpoint saved to %s\n", cfg.Checkpoint)
	}
	return res, nil
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// dataset is points in the plane with class labels.
type dataset struct {
	x [][2]float64
	y []int
}

// spiral makes the classic three-arm spiral with n points per arm.
func spiral(rng *rand.Rand, n int) dataset {
	var d dataset
	for c := 0; c < classes; c++ {
		for i := 0; i < n; i++ {
			r := float64(i) / float64(n)
			t := float64(c)*4 + 4*r + rng.NormFloat64()*0.2
			d.x = append(d.x, [2]float64{r * math.Sin(t), r * math.Cos(t)})
			d.y = append(d.y, c)
		}
	}
	return d
}

// mlp is 2 → h (ReLU) → 3 (softmax).
type mlp struct {
	h      int
	w1     []float64 // 2*h, row-major [in][h]
	b1     []float64 // h
	w2     []float64 // h*3, [h][3]
	b2     []float64 // 3
	params [][]float64
}

func newMLP(rng *rand.Rand, h int) *mlp {
	m := &mlp{h: h, w1: make([]float64, 2*h), b1: make([]float64, h), w2: make([]float64, h*classes), b2: make([]float64, classes)}
	he1, he2 := math.Sqrt(2.0/2), math.Sqrt(2.0/float64(h))
	for i := range m.w1 {
		m.w1[i] = rng.NormFloat64() * he1
	}
	for i := range m.w2 {
		m.w2[i] = rng.NormFloat64() * he2
	}
	m.params = [][]float64{m.w1, m.b1, m.w2, m.b2}
	return m
}

// forward computes hidden activations and class probabilities of one point.
func (m *mlp) forward(x [2]float64, hid []float64, p *[classes]float64) {
	for j := 0; j < m.h; j++ {
		v := x[0]*m.w1[j] + x[1]*m.w1[m.h+j] + m.b1[j]
		if v < 0 {
			v = 0
		}
		hid[j] = v
	}
	mx := math.Inf(-1)
	for k := 0; k < classes; k++ {
		v := m.b2[k]
		for j := 0; j < m.h; j++ {
			v += hid[j] * m.w2[j*classes+k]
		}
		p[k] = v
		mx = math.Max(mx, v)
	}
	sum := 0.0
	for k := range p {
		p[k] = math.Exp(p[k] - mx)
		sum += p[k]
	}
	for k := range p {
		p[k] /= sum
	}
}

// step does one forward/backward pass over a batch and an Adam update.
func (m *mlp) step(d dataset, idx []int, opt *adam) (loss, acc float64) {
	g := opt.grads
	for _, gi := range g {
		clear(gi)
	}
	gw1, gb1, gw2, gb2 := g[0], g[1], g[2], g[3]
	hid := make([]float64, m.h)
	dh := make([]float64, m.h)
	var p [classes]float64
	inv := 1 / float64(len(idx))
	for _, i := range idx {
		x, y := d.x[i], d.y[i]
		m.forward(x, hid, &p)
		loss -= math.Log(math.Max(p[y], 1e-12))
		if argmax(p) == y {
			acc++
		}
		// dlogits = (p - onehot) / B
		var dl [classes]float64
		for k := range dl {
			dl[k] = p[k] * inv
		}
		dl[y] -= inv
		for k := 0; k < classes; k++ {
			gb2[k] += dl[k]
		}
		for j := 0; j < m.h; j++ {
			s := 0.0
			for k := 0; k < classes; k++ {
				gw2[j*classes+k] += hid[j] * dl[k]
				s += m.w2[j*classes+k] * dl[k]
			}
			if hid[j] <= 0 {
				s = 0
			}
			dh[j] = s
		}
		for j := 0; j < m.h; j++ {
			gw1[j] += x[0] * dh[j]
			gw1[m.h+j] += x[1] * dh[j]
			gb1[j] += dh[j]
		}
	}
	opt.update(m.params)
	return loss * inv, acc * inv
}

func (m *mlp) evaluate(d dataset) (loss, acc float64) {
	hid := make([]float64, m.h)
	var p [classes]float64
	for i := range d.y {
		m.forward(d.x[i], hid, &p)
		loss -= math.Log(math.Max(p[d.y[i]], 1e-12))
		if argmax(p) == d.y[i] {
			acc++
		}
	}
	n := float64(len(d.y))
	return loss / n, acc / n
}

func argmax(p [classes]float64) int {
	best := 0
	for k := 1; k < classes; k++ {
		if p[k] > p[best] {
			best = k
		}
	}
	return best
}

func (m *mlp) save(path string, step int) error {
	b, err := json.Marshal(map[string]any{"step": step, "hidden": m.h, "w1": m.w1, "b1": m.b1, "w2": m.w2, "b2": m.b2})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil { // in trainbot's private run directory
		return err
	}
	return os.Rename(tmp, path)
}

// adam is the Adam optimiser (Kingma & Ba) with the usual defaults.
type adam struct {
	lr, b1, b2, eps float64
	t               int
	m, v, grads     [][]float64
}

func newAdam(net *mlp, lr float64) *adam {
	a := &adam{lr: lr, b1: 0.9, b2: 0.999, eps: 1e-8}
	for _, p := range net.params {
		a.m = append(a.m, make([]float64, len(p)))
		a.v = append(a.v, make([]float64, len(p)))
		a.grads = append(a.grads, make([]float64, len(p)))
	}
	return a
}

func (a *adam) update(params [][]float64) {
	a.t++
	c1 := 1 - math.Pow(a.b1, float64(a.t))
	c2 := 1 - math.Pow(a.b2, float64(a.t))
	for i, p := range params {
		g, m, v := a.grads[i], a.m[i], a.v[i]
		for j := range p {
			m[j] = a.b1*m[j] + (1-a.b1)*g[j]
			v[j] = a.b2*v[j] + (1-a.b2)*g[j]*g[j]
			p[j] -= a.lr * (m[j] / c1) / (math.Sqrt(v[j]/c2) + a.eps)
		}
	}
}

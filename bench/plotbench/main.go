// Command plotbench times trainbot's loss chart: it draws a noisy loss
// series of n points (raw and smoothed) to PNG several times and prints
// the median wall time, the CPU time and the bytes allocated per chart.
// With -data it also writes the series (raw and smoothed, float64 little
// endian) for bench/plots_matplotlib.py to draw the same points.
//
// Run it through bench/plots.sh, which compares it with matplotlib.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/plots"
)

func main() {
	n := flag.Int("n", 1_000_000, "points")
	runs := flag.Int("runs", 5, "charts to draw (the median is reported)")
	data := flag.String("data", "", "write the raw and smoothed series here for matplotlib")
	out := flag.String("o", "", "write one chart here")
	flag.Parse()
	if *n < 1 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "plotbench: -n and -runs must be at least 1")
		os.Exit(2)
	}
	pts := noisyLoss(*n, 42, 0.05)
	p, err := plots.New(plots.Options{Font: plots.FontNone})
	if err != nil {
		fmt.Fprintln(os.Stderr, "plotbench:", err)
		os.Exit(1)
	}
	chart := plots.LossChart{Title: "bench", Smoothing: plots.DefaultSmoothing, Series: []plots.Series{{Name: "loss", Points: pts}}}
	if _, err := p.Loss(chart); err != nil { // warm up: fonts, caches
		fmt.Fprintln(os.Stderr, "plotbench:", err)
		os.Exit(1)
	}
	var walls []float64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	var png []byte
	for range *runs {
		t := time.Now()
		png, err = p.Loss(chart)
		walls = append(walls, float64(time.Since(t))/1e6)
		if err != nil {
			fmt.Fprintln(os.Stderr, "plotbench:", err)
			os.Exit(1)
		}
	}
	cpu := (cpuTime() - cpu0) / float64(*runs)
	runtime.ReadMemStats(&after)
	slices.Sort(walls)
	mb := float64(after.TotalAlloc-before.TotalAlloc) / float64(*runs) / 1e6
	// One machine-readable line: points, median wall ms, CPU ms, MB allocated.
	fmt.Printf("trainbot %d %.1f %.1f %.1f\n", *n, walls[len(walls)/2], cpu, mb)
	if *out != "" {
		if err := os.WriteFile(*out, png, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "plotbench:", err)
			os.Exit(1)
		}
	}
	if *data != "" {
		buf := make([]byte, 0, 16*len(pts))
		for _, q := range pts {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(q.Y))
		}
		for _, q := range plots.EMA(pts, plots.DefaultSmoothing) {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(q.Y))
		}
		if err := os.WriteFile(*data, buf, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "plotbench:", err)
			os.Exit(1)
		}
	}
}

// cpuTime is the user and system CPU time of this process in ms.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// noisyLoss is the series of plots' BenchmarkLoss: a decaying loss with
// Gaussian noise from a splitmix64 generator.
func noisyLoss(n int, seed uint64, noise float64) []plots.XY {
	s := seed
	next := func() uint64 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	norm := func() float64 {
		u1 := (float64(next()>>11) + 0.5) / (1 << 53)
		u2 := float64(next()>>11) / (1 << 53)
		return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	}
	pts := make([]plots.XY, n)
	for i := range pts {
		x := float64(i) / float64(n)
		pts[i] = plots.XY{X: float64(i), Y: 2.2*math.Exp(-5*x) + 0.15 + noise*norm()*(0.3+math.Exp(-3*x))}
	}
	return pts
}

// Command histgen writes a history of long runs into a trainbot data
// directory, as the recorder's thinning would have stored them: each run
// has a loss printed at every step, a val_loss every 1,000 steps and a
// memory sample every 2 s of its (1,000 steps/s) duration. The bench
// scripts (bench/longplot.sh, bench/servemem.sh) build their fixtures
// with it in a temporary directory.
//
//	histgen -data DIR -runs 100 -steps 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/historytest"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

func main() {
	data := flag.String("data", "", "trainbot data directory to fill")
	runs := flag.Int("runs", 1, "runs to record")
	steps := flag.Int64("steps", 10_000_000, "steps of each run")
	diverge := flag.Float64("diverge", 0, "when in (0, 1): the last run's loss is NaN from this fraction of its steps on (a diverged run that went on printing)")
	flag.Parse()
	if *data == "" || *runs < 1 || *steps < 1 {
		fmt.Fprintln(os.Stderr, "usage: histgen -data DIR [-runs N] [-steps S]")
		os.Exit(2)
	}
	if err := fill(*data, *runs, *steps, *diverge); err != nil {
		fmt.Fprintln(os.Stderr, "histgen:", err)
		os.Exit(1)
	}
}

func fill(dir string, runs int, steps int64, diverge float64) error {
	ctx := context.Background()
	// ThinEarlierRuns: the history is of this version (its one-time pass
	// over earlier runs is done at once, on the empty database).
	st, err := store.Open(dir, store.Options{FlushEvery: time.Hour, ThinEarlierRuns: true})
	if err != nil {
		return err
	}
	defer st.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dur := time.Duration(steps) * time.Millisecond // 1,000 steps/s
	for i := range runs {
		start := t0.Add(time.Duration(i) * (dur + time.Hour))
		peak := int64(20+i%40) << 30
		r := &trainer.Run{Job: "long", Params: map[string]string{"lr": fmt.Sprint(1e-3 * float64(1+i%5)), "bs": fmt.Sprint(32 << (i % 3))},
			Command: []string{"python", "train.py"}, State: trainer.StateEnded, Outcome: trainer.OutcomeFinished,
			StartedAt: start, EndedAt: start.Add(dur), Steps: steps, Total: steps, PeakGPUMem: &peak}
		id, err := st.CreateRun(ctx, r)
		if err != nil {
			return err
		}
		r.ID = id
		seed := int64(i) * 7919
		historytest.AddThinned(st, r, "loss", steps, 1, func(s int64) float64 {
			if s == steps/3 || s == 2*steps/3 { // two NaN markers
				return math.NaN()
			}
			if i == runs-1 && diverge > 0 && s >= int64(diverge*float64(steps)) {
				return math.NaN()
			}
			return historytest.NoisyLoss(s+seed, steps)
		})
		historytest.AddThinned(st, r, "val_loss", steps, 1000, func(s int64) float64 { return historytest.NoisyLoss(s+seed, steps) + 0.05 })
		var mem []history.RunMemory
		total := int64(80 << 30)
		for t := time.Duration(0); t < dur; t += 2 * time.Second {
			g := peak - int64(float64(peak)*0.2*math.Abs(math.Sin(float64(t)/float64(time.Minute))))
			h := int64(6<<30) + int64(t/time.Second)<<10
			mem = append(mem, history.RunMemory{RunID: id, T: start.Add(t), GPUBytes: &g, GPUTotal: &total, HostBytes: &h})
		}
		if err := st.AddRunMemory(ctx, mem); err != nil {
			return err
		}
		if err := st.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

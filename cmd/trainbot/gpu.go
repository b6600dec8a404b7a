package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/store"
)

func cmdGPU(ctx context.Context, args []string, e env) int {
	fs := newFlags("gpu", "[--json]", e)
	var cf configFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	cfg, _, code := cf.load(e)
	if cfg == nil {
		return code
	}
	runs, about, err := runningPGIDs(ctx, cfg.DataDir)
	if err != nil {
		return errorf(e, "%v", err)
	}
	b, _ := openGPU() // without NVML: a backend that says why
	defer b.Close()
	snap, err := gpu.Collect(ctx, b, runs)
	if *asJSON {
		if code := printJSON(e, gpu.ToJSON(snap, err)); code != exitOK {
			return code
		}
	} else {
		fmt.Fprintln(e.stdout, termsafe.String(render.GPUTable(i18n.ZhEn, snap, about))) // other users' process names
	}
	if err != nil {
		// What was read is printed; what was not makes the status 1.
		return errorf(e, "gpu: %v", err)
	}
	return exitOK
}

// runningPGIDs maps the process group of every run the store of dataDir
// records as running, and that is still alive, to its run id, so that
// `trainbot gpu` can attribute memory while a bot runs; about has each
// such run's job and starter, for the table. No data directory means no
// runs.
func runningPGIDs(ctx context.Context, dataDir string) (pgids map[int]int64, about map[int64]render.GPURun, err error) {
	if _, err := os.Stat(dataDir); err != nil {
		return nil, nil, nil
	}
	st, err := store.Open(dataDir, store.Options{})
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	runs, err := st.RunningRuns(ctx)
	if err != nil || len(runs) == 0 {
		return nil, nil, err
	}
	procs, err := procfs.ReadProcs()
	if err != nil {
		return nil, nil, err
	}
	out := map[int]int64{}
	about = map[int64]render.GPURun{}
	for _, r := range runs {
		if r.PID <= 0 || r.Host != "" || !procs.Alive(r.PID) { // a run on another host has its pid there
			continue
		}
		// A run left "running" by a trainbot that died may name a PID that
		// now belongs to a newer process.
		if started, ok := procs.Started(r.PID); ok && started.After(r.StartedAt.Add(5*time.Second)) {
			continue
		}
		out[r.PID] = r.ID
		about[r.ID] = render.GPURun{Job: r.Job, By: r.StartedBy}
	}
	return out, about, nil
}

// gpuThresholds are the monitor's alert thresholds from [gpu]: idle_held
// off unless asked for.
func gpuThresholds(c config.GPUConfig) gpu.Thresholds {
	th := gpu.Thresholds{MemoryPercent: c.MemoryAlert, TempC: c.TempAlert}
	if c.IdleHeld {
		th.IdleMemory, th.IdleFor = uint64(c.IdleMemory), time.Duration(c.IdleFor)
	}
	return th
}

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/agent"
	"github.com/trainbot/trainbot/trainer/gpuclaim"
)

// cmdAgent is `trainbot agent`: the host's side of a hub's runs, started
// by the hub over SSH (trainer/agent). It serves the hub on stdin and
// stdout until the hub or the connection goes; the runs it started go on,
// each owned by its shim. Its log goes to DATA/agent.log.
func cmdAgent(ctx context.Context, args []string, e env) int {
	fs := newFlags("agent", "[--data DIR]", e)
	data := fs.String("data", "", "this host's data directory (default $XDG_STATE_HOME/trainbot)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	dir := *data
	if dir == "" {
		dir = config.DefaultDataDir()
	}
	dir = config.ExpandHome(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errorf(e, "%v", err)
	}
	logger := slog.New(slog.DiscardHandler)
	if f, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, nil)).With("agent", os.Getpid())
	}
	err := agent.Serve(ctx, e.stdin, e.stdout, agent.ServeOptions{Version: thisVersion(), DataDir: dir,
		ShimCommand: []string{e.exe, "shim"}, OpenGPUs: agentGPUs(dir, logger), Logger: logger})
	if err != nil {
		logger.Warn("agent ended", "err", err)
		return exitFail
	}
	return exitOK
}

// agentGPUs opens this host's GPUs for a hub's runs with the hub's [gpu]
// rules: NVML sampled every interval (what is quiet, and for how long)
// and the host-wide GPU locks, as serve does.
func agentGPUs(dataDir string, logger *slog.Logger) func(agent.GPUSettings) (trainer.GPUAllocator, string, func()) {
	return func(g agent.GPUSettings) (trainer.GPUAllocator, string, func()) {
		telemetry, noGPU := openGPU()
		if noGPU != nil {
			telemetry.Close()
			return nil, gpu.Reason(noGPU), nil
		}
		lockDir := g.LockDir
		if lockDir == "" {
			lockDir = gpulock.DefaultDir
		}
		locks, err := gpulock.Open(lockDir)
		if err != nil {
			telemetry.Close()
			return gpuclaim.Refusing(err), err.Error(), nil
		}
		av := gpu.NewAvailability(uint64(g.BusyMemory), g.BusyUtil)
		interval := g.Interval
		if interval <= 0 {
			interval = 2 * time.Second
		}
		m := gpu.NewMonitor(gpu.MonitorOptions{Sampler: telemetry, Interval: interval, Availability: av, Logger: logger.With("component", "gpu")})
		m.Start()
		alloc := gpuclaim.New(gpuclaim.Options{Last: m.Last, Availability: av, Locks: locks, FreeFor: g.FreeFor, Visible: g.Visible,
			DataDir: dataDir, Logger: logger.With("component", "gpu")})
		return alloc, "", func() { m.Close(); telemetry.Close() }
	}
}

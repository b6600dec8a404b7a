package config

import (
	"path/filepath"
	"strings"
	"time"
)

// GPUConfig is the [gpu] section: how often GPU and memory figures are
// sampled, when to alert, and when a GPU is free for a run (shared
// servers: docs/gpus.md, "Shared GPUs").
type GPUConfig struct {
	// Interval between samples (default 2s).
	Interval Duration `toml:"interval"`
	// MemoryAlert is the share of a device's memory, in percent, at which a
	// run using it gets an alert; 0 turns the alert off (default 95).
	MemoryAlert float64 `toml:"memory_alert"`
	// TempAlert is the device temperature, in °C, that raises an alert; 0
	// turns the alert off (default 85).
	TempAlert int `toml:"temp_alert"`

	// BusyMemory: a GPU on which a process that is not a trainbot run's
	// holds more than this is busy (default 1GiB).
	BusyMemory ByteSize `toml:"busy_memory"`
	// BusyUtil: a GPU at or above this utilisation, in percent, is busy,
	// unless only trainbot runs use it (default 10).
	BusyUtil int `toml:"busy_util"`
	// FreeFor is how long a GPU must have been quiet before it is given to
	// a run (default 1m), so that one between someone's two runs is not.
	FreeFor Duration `toml:"free_for"`
	// Visible is how a run is shown its GPUs: "index" (default;
	// CUDA_VISIBLE_DEVICES with NVML indices and CUDA_DEVICE_ORDER=PCI_BUS_ID)
	// or "uuid" (their UUIDs).
	Visible string `toml:"visible"`
	// LockDir is the host-wide directory of per-GPU lock files, shared by
	// every trainbot on the host (default /tmp/trainbot-gpu-locks).
	LockDir string `toml:"lock_dir"`
	// IdleHeld turns on the idle_held alert: a GPU held with at least
	// IdleMemory at 0 % for IdleFor (default off, 1GiB, 30m).
	IdleHeld   bool     `toml:"idle_held"`
	IdleMemory ByteSize `toml:"idle_memory"`
	IdleFor    Duration `toml:"idle_for"`
}

// Values of [gpu] visible.
const (
	VisibleIndex = "index"
	VisibleUUID  = "uuid"
)

// DefaultGPULockDir is the default [gpu] lock_dir.
const DefaultGPULockDir = "/tmp/trainbot-gpu-locks"

// DefaultGPUConfig returns the [gpu] defaults.
func DefaultGPUConfig() GPUConfig {
	return GPUConfig{Interval: Duration(2 * time.Second), MemoryAlert: 95, TempAlert: 85,
		BusyMemory: 1 << 30, BusyUtil: 10, FreeFor: Duration(time.Minute), Visible: VisibleIndex,
		LockDir: DefaultGPULockDir, IdleMemory: 1 << 30, IdleFor: Duration(30 * time.Minute)}
}

// validateGPU checks the [gpu] section.
func (c *Config) validateGPU() Errors {
	var errs Errors
	g := c.GPU
	if d := time.Duration(g.Interval); d < 100*time.Millisecond || d > time.Hour {
		errs = append(errs, c.ErrorAt("gpu.interval", "want a duration from 100ms to 1h, got %s", d))
	}
	if g.MemoryAlert < 0 || g.MemoryAlert > 100 {
		errs = append(errs, c.ErrorAt("gpu.memory_alert", "want a percentage from 0 (off) to 100, got %g", g.MemoryAlert))
	}
	if g.TempAlert < 0 || g.TempAlert > 150 {
		errs = append(errs, c.ErrorAt("gpu.temp_alert", "want degrees Celsius from 0 (off) to 150, got %d", g.TempAlert))
	}
	if g.BusyUtil < 1 || g.BusyUtil > 100 {
		errs = append(errs, c.ErrorAt("gpu.busy_util", "want a percentage from 1 to 100, got %d", g.BusyUtil))
	}
	if d := time.Duration(g.FreeFor); d > 24*time.Hour {
		errs = append(errs, c.ErrorAt("gpu.free_for", "want a duration from 0s (at once) to 24h, got %s", d))
	}
	if g.Visible != VisibleIndex && g.Visible != VisibleUUID {
		errs = append(errs, c.ErrorAt("gpu.visible", "want %q (NVML indices with CUDA_DEVICE_ORDER=PCI_BUS_ID) or %q, got %q", VisibleIndex, VisibleUUID, g.Visible))
	}
	if d := ExpandHome(strings.TrimSpace(g.LockDir)); d == "" || !filepath.IsAbs(d) {
		errs = append(errs, c.ErrorAt("gpu.lock_dir", "want an absolute path of a directory every trainbot on this host shares, got %q", g.LockDir))
	} else {
		c.GPU.LockDir = filepath.Clean(d)
	}
	if g.IdleMemory <= 0 {
		errs = append(errs, c.ErrorAt("gpu.idle_memory", "want a size above 0 like \"1GiB\", got %d", int64(g.IdleMemory)))
	}
	if d := time.Duration(g.IdleFor); d < time.Minute || d > 7*24*time.Hour {
		errs = append(errs, c.ErrorAt("gpu.idle_for", "want a duration from 1m to 7d, got %s", d))
	}
	return errs
}

package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestGPUExampleAndDefaults(t *testing.T) {
	d := DefaultConfig().GPU
	if time.Duration(d.Interval) != 2*time.Second || d.MemoryAlert != 95 || d.TempAlert != 85 {
		t.Errorf("defaults = %+v", d)
	}
	if d.BusyMemory != 1<<30 || d.BusyUtil != 10 || time.Duration(d.FreeFor) != time.Minute || d.Visible != "index" ||
		d.LockDir != "/tmp/trainbot-gpu-locks" || d.IdleHeld || d.IdleMemory != 1<<30 || time.Duration(d.IdleFor) != 30*time.Minute {
		t.Errorf("sharing defaults = %+v", d)
	}
}

// with returns the defaults changed by f, for the table below.
func withGPU(f func(g *GPUConfig)) GPUConfig {
	g := DefaultGPUConfig()
	f(&g)
	return g
}

func TestGPUConfig(t *testing.T) {
	tests := []struct {
		name, toml string
		env        []string
		want       GPUConfig
		errs       []string // substrings, one per expected error
	}{
		{name: "values", toml: "[gpu]\ninterval = \"500ms\"\nmemory_alert = 90.5\ntemp_alert = 80\n",
			want: withGPU(func(g *GPUConfig) { g.Interval, g.MemoryAlert, g.TempAlert = Duration(500*time.Millisecond), 90.5, 80 })},
		{name: "alerts off", toml: "[gpu]\nmemory_alert = 0\ntemp_alert = 0\n",
			want: withGPU(func(g *GPUConfig) { g.MemoryAlert, g.TempAlert = 0, 0 })},
		{name: "environment", toml: "", env: []string{"TRAINBOT_GPU_INTERVAL=10s", "TRAINBOT_GPU_MEMORY_ALERT=99", "TRAINBOT_GPU_IDLE_HELD=true", "TRAINBOT_GPU_BUSY_MEMORY=512MiB"},
			want: withGPU(func(g *GPUConfig) {
				g.Interval, g.MemoryAlert, g.IdleHeld, g.BusyMemory = Duration(10*time.Second), 99, true, 512<<20
			})},
		{name: "sharing", toml: "[gpu]\nbusy_memory = \"2GiB\"\nbusy_util = 5\nfree_for = \"0s\"\nvisible = \"uuid\"\n" +
			"lock_dir = \"/run/gpu-locks/\"\nidle_held = true\nidle_memory = \"4GiB\"\nidle_for = \"2h\"\n",
			want: withGPU(func(g *GPUConfig) {
				g.BusyMemory, g.BusyUtil, g.FreeFor, g.Visible, g.LockDir = 2<<30, 5, 0, "uuid", "/run/gpu-locks"
				g.IdleHeld, g.IdleMemory, g.IdleFor = true, 4<<30, Duration(2*time.Hour)
			})},
		{name: "sharing out of range", toml: "[gpu]\nbusy_util = 0\nfree_for = \"2d\"\nvisible = \"pci\"\nlock_dir = \"locks\"\n" +
			"idle_memory = 0\nidle_for = \"10s\"\n",
			errs: []string{"cfg.toml:2: gpu.busy_util: want a percentage from 1 to 100, got 0",
				"cfg.toml:3: gpu.free_for: want a duration from 0s (at once) to 24h, got 48h0m0s",
				`cfg.toml:4: gpu.visible: want "index" (NVML indices with CUDA_DEVICE_ORDER=PCI_BUS_ID) or "uuid", got "pci"`,
				`cfg.toml:5: gpu.lock_dir: want an absolute path of a directory every trainbot on this host shares, got "locks"`,
				`cfg.toml:6: gpu.idle_memory: want a size above 0 like "1GiB", got 0`,
				"cfg.toml:7: gpu.idle_for: want a duration from 1m to 7d, got 10s"}},
		{name: "sharing wrong types", toml: "[gpu]\nidle_held = \"yes\"\nbusy_memory = true\n",
			errs: []string{"cfg.toml:3: gpu.busy_memory: want a size", "cfg.toml:2: gpu.idle_held: want true or false"}},
		{name: "out of range", toml: "[gpu]\ninterval = \"10ms\"\nmemory_alert = 120\ntemp_alert = -1\n",
			errs: []string{"cfg.toml:2: gpu.interval: want a duration from 100ms to 1h, got 10ms",
				"cfg.toml:3: gpu.memory_alert: want a percentage from 0 (off) to 100, got 120",
				"cfg.toml:4: gpu.temp_alert: want degrees Celsius from 0 (off) to 150, got -1"}},
		{name: "wrong type", toml: "[gpu]\ntemp_alert = \"hot\"\n", errs: []string{"gpu.temp_alert: want an integer"}},
		{name: "unknown key", toml: "[gpu]\nintervall = \"1s\"\n", errs: []string{"gpu.intervall: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Parse("cfg.toml", strings.NewReader(tt.toml))
			if err == nil {
				err = c.ApplyEnv(tt.env)
			}
			if err == nil {
				err = c.Validate()
			}
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.GPU != tt.want {
					t.Errorf("got %+v, want %+v", c.GPU, tt.want)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != len(tt.errs) {
				t.Fatalf("got %v, want %d errors", err, len(tt.errs))
			}
			for i, w := range tt.errs {
				if !strings.Contains(es[i].Error(), w) {
					t.Errorf("error %d = %q, want %q", i, es[i].Error(), w)
				}
			}
			if !IsInvalid(err) {
				t.Error("not ErrInvalid")
			}
		})
	}
}

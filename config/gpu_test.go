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
}

func TestGPUConfig(t *testing.T) {
	tests := []struct {
		name, toml string
		env        []string
		want       GPUConfig
		errs       []string // substrings, one per expected error
	}{
		{name: "values", toml: "[gpu]\ninterval = \"500ms\"\nmemory_alert = 90.5\ntemp_alert = 80\n",
			want: GPUConfig{Interval: Duration(500 * time.Millisecond), MemoryAlert: 90.5, TempAlert: 80}},
		{name: "alerts off", toml: "[gpu]\nmemory_alert = 0\ntemp_alert = 0\n",
			want: GPUConfig{Interval: Duration(2 * time.Second)}},
		{name: "environment", toml: "", env: []string{"TRAINBOT_GPU_INTERVAL=10s", "TRAINBOT_GPU_MEMORY_ALERT=99"},
			want: GPUConfig{Interval: Duration(10 * time.Second), MemoryAlert: 99, TempAlert: 85}},
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

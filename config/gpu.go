package config

import "time"

// GPUConfig is the [gpu] section: how often GPU and memory figures are
// sampled, and when to alert.
type GPUConfig struct {
	// Interval between samples (default 2s).
	Interval Duration `toml:"interval"`
	// MemoryAlert is the share of a device's memory, in percent, at which a
	// run using it gets an alert; 0 turns the alert off (default 95).
	MemoryAlert float64 `toml:"memory_alert"`
	// TempAlert is the device temperature, in °C, that raises an alert; 0
	// turns the alert off (default 85).
	TempAlert int `toml:"temp_alert"`
}

// DefaultGPUConfig returns the [gpu] defaults.
func DefaultGPUConfig() GPUConfig {
	return GPUConfig{Interval: Duration(2 * time.Second), MemoryAlert: 95, TempAlert: 85}
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
	return errs
}

package shimctl

import (
	"syscall"
	"time"
)

// Defaults for the zero values of a Spec (those of package trainer).
const (
	DefaultStopGrace    = 30 * time.Second
	DefaultKillGrace    = 10 * time.Second
	DefaultDrainTimeout = 2 * time.Second
)

// Ready is the line the shim writes on the ready pipe Start gives it.
type Ready struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// WithDefaults is sp with the defaults in place of its zero durations and
// buffer size.
func (sp Spec) WithDefaults() Spec {
	if sp.StopGrace <= 0 {
		sp.StopGrace = DefaultStopGrace
	}
	if sp.KillGrace <= 0 {
		sp.KillGrace = DefaultKillGrace
	}
	if sp.DrainTimeout <= 0 {
		sp.DrainTimeout = DefaultDrainTimeout
	}
	if sp.StopSignal <= 0 {
		sp.StopSignal = int(syscall.SIGINT)
	}
	if sp.BufferBytes <= 0 {
		sp.BufferBytes = DefaultBufferBytes
	}
	return sp
}

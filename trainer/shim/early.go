package shim

import "testing"

// A run's supervisor starts as soon as the runtime can run it: this init
// runs once the few packages the shim imports are initialised, before
// most of those of the rest of trainbot (plots, SQLite, Prometheus, the
// messengers' SDKs) that it never uses. Test binaries start their shims
// from TestMain instead (MainIfAsked), after installing their test hooks.
func init() {
	if !testing.Testing() {
		MainIfAsked()
	}
}

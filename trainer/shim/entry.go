package shim

import "os"

// MainIfAsked runs Main and exits when the program was started as a run's
// supervisor (its first argument is "shim"), and returns otherwise. The
// package has no init: cmd/trainbot's main calls it first, and test
// binaries that start runs call it first in TestMain, since a Supervisor
// starts each run's supervisor as its own executable with "shim".
func MainIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
}

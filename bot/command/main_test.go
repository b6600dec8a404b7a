package command_test

import (
	"os"
	"testing"

	"github.com/trainbot/trainbot/trainer/shim"
)

// TestMain lets the test binary be the supervisor of the runs the tests
// start (a Supervisor starts "trainbot shim" as its own executable).
func TestMain(m *testing.M) {
	shim.MainIfAsked()
	os.Exit(m.Run())
}

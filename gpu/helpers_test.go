package gpu

import (
	"testing"

	"github.com/trainbot/trainbot/internal/proctest"
)

// startTree starts a process tree the way trainbot starts a run.
func startTree(t testing.TB, script string, want int) (int, []int) {
	t.Helper()
	return proctest.StartTree(t, script, want)
}

package gpu

import (
	"testing"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/proctest"
)

// startTree starts a process tree the way trainbot starts a run.
func startTree(t testing.TB, script string, want int) (int, []int) {
	t.Helper()
	return proctest.StartTree(t, script, want)
}

// readTable reads /proc and fails the test on error.
func readTable(t testing.TB) *procfs.Procs {
	t.Helper()
	p, err := procfs.ReadProcs()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

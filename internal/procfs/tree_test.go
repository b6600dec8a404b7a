package procfs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/proctest"
)

func TestReadProcsRealTree(t *testing.T) {
	// A run whose shell has two sleeping children, one of which left the
	// process group with setsid: both are the run's.
	pid, kids := proctest.StartTree(t, "setsid sleep 60 & sleep 60 & wait", 2)
	p, err := procfs.ReadProcs()
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int]int64{pid: 3}
	for _, k := range append(kids, pid) {
		if got := p.Owner(k, runs); got != 3 {
			t.Errorf("Owner(%d) = %d, want 3", k, got)
		}
	}
	if got := p.Owner(os.Getpid(), runs); got != 0 {
		t.Errorf("the test process is attributed to run %d", got)
	}
	u := p.Usage(runs)[3]
	if u.Procs != 3 || u.RSS <= 0 {
		t.Errorf("usage = %d bytes in %d processes, want > 0 in 3", u.RSS, u.Procs)
	}
	if c := p.Comm(kids[0]); c != "sleep" {
		t.Errorf("Comm = %q, want sleep", c)
	}
	if !p.Alive(pid) {
		t.Error("the shell is not alive")
	}
}

// BenchmarkProcTree50 is one procfs sample of a run with a 50-process tree:
// the /proc scan of the whole host plus the run's tree sum.
func BenchmarkProcTree50(b *testing.B) {
	pid, _ := proctest.StartTree(b, strings.Repeat("sleep 60 & ", 49)+"wait", 49)
	runs := map[int]int64{pid: 1}
	var u procfs.TreeUsage
	var scanned int
	b.ResetTimer()
	for b.Loop() {
		p, err := procfs.ReadProcs()
		if err != nil {
			b.Fatal(err)
		}
		u = p.Usage(runs)[1]
		scanned = p.Len()
	}
	if u.Procs != 50 {
		b.Fatalf("tree has %d processes, want 50", u.Procs)
	}
	b.ReportMetric(float64(scanned), "procs_scanned")
}

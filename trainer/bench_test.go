package trainer_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// The supervision overhead: a CPU-bound child printing 1e6 lines, run with
// its output redirected to a file (the baseline) and under the supervisor
// (pipes, log file, parsing, batched SQLite writes). bench/supervise.sh
// prints the ratio.

const overheadLines = "1000000"

func BenchmarkChildRedirectedToFile(b *testing.B) {
	argv := childCommand("cpuprint", overheadLines)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		f, err := os.Create(filepath.Join(b.TempDir(), "out.log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		f.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "child-ms/op")
}

// BenchmarkChildSupervised reports child-ms/op (start to the child's exit,
// what the training feels) and ns/op (until every point is stored).
func BenchmarkChildSupervised(b *testing.B) {
	var child time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		h := newBenchHarness(b, dir)
		b.StartTimer()
		r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "c"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.sup.WaitRun(context.Background(), r.ID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		got, _ := h.st.Run(context.Background(), r.ID)
		child += got.EndedAt.Sub(got.StartedAt)
		if got.Outcome != trainer.OutcomeFinished || got.Steps != 1000000 {
			b.Fatalf("got %s with %d steps", got.Outcome, got.Steps)
		}
		h.close()
		b.StartTimer()
	}
	b.ReportMetric(float64(child.Milliseconds())/float64(b.N), "child-ms/op")
}

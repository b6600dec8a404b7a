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
// (pipes, log file, parsing, batched SQLite writes). "Burst" prints them as
// fast as it can (about a million lines a second); "Steady" does ten times
// more work per line (about ten seconds of training). bench/supervise.sh
// prints the ratios.

const overheadLines = "1000000"

var overheadWork = map[string]string{"Burst": "200", "Steady": "2000"}

func BenchmarkChildRedirectedToFile(b *testing.B) {
	for _, name := range []string{"Burst", "Steady"} {
		b.Run(name, func(b *testing.B) { benchRedirected(b, childCommand("cpuprint", overheadLines, overheadWork[name])) })
	}
}

func benchRedirected(b *testing.B, argv []string) {
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
	for _, name := range []string{"Burst", "Steady"} {
		b.Run(name, func(b *testing.B) { benchSupervised(b, overheadWork[name]) })
	}
}

func benchSupervised(b *testing.B, work string) {
	var child time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		h := newBenchHarness(b, dir, work)
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

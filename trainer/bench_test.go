package trainer_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// BenchmarkReattach is the time from a new trainbot's start (New, then
// Resume) to "re-attached" (attached-ms/op) and to having read and stored
// the whole backlog (caught-up-ms/op) of a run that printed 1e6 lines
// while no trainbot observed it. bench/reattach.sh runs it.
func BenchmarkReattach(b *testing.B) {
	var attached, caught time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		j := &trainer.Job{Name: "c", Command: childCommand("cpuprint", overheadLines, "0", "hold"), StopGrace: time.Second, KillGrace: time.Second}
		h := newBenchHarnessJob(b, dir, j)
		r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "c"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := h.sup.Detach(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		h.close()
		// Wait until the child has printed everything (it then holds on).
		logPath := filepath.Join(dir, "runs", "1", "output.log")
		for deadline := time.Now().Add(time.Minute); ; {
			if fi, err := os.Stat(logPath); err == nil && fi.Size() > 20<<20 {
				if b2, _ := os.ReadFile(logPath); strings.Contains(string(b2), "step 1000000 ") {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatal("the child did not print its lines")
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		h2 := newBenchHarnessJob(b, dir, j)
		attachedAt := make(chan time.Time, 1)
		h2.sup.Subscribe(func(e trainer.Event) {
			if e.Kind == trainer.EventAttached {
				attachedAt <- time.Now()
			}
		})
		if err := h2.sup.Resume(context.Background()); err != nil {
			b.Fatal(err)
		}
		at := <-attachedAt
		for deadline := time.Now().Add(time.Minute); ; {
			st, err := h2.sup.Status(r.ID)
			if err == nil && st.Progress.Step == 1000000 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("not caught up: %+v %v", st.Progress, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := h2.st.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		attached += at.Sub(start)
		caught += time.Since(start)
		h2.sup.Stop(r.ID, "bench")
		h2.sup.WaitRun(context.Background(), r.ID)
		h2.close()
		b.StartTimer()
	}
	b.ReportMetric(float64(attached.Milliseconds())/float64(b.N), "attached-ms/op")
	b.ReportMetric(float64(caught.Milliseconds())/float64(b.N), "caught-up-ms/op")
}

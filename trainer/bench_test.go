package trainer_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// The supervision overhead: a CPU-bound child printing 1e6 lines, run with
// its output redirected to a file (the baseline) and under the supervisor
// (pipes, log file, parsing, batched SQLite writes). "Burst" prints them as
// fast as it can (about a million lines a second); "Steady" does ten times
// more work per line. bench/supervise.sh prints the ratios.

const overheadLines = "1000000"

var overheadWork = map[string]string{"Burst": "200", "Steady": "2000"}

// BenchmarkSupervisionOverhead runs the child redirected to a file and
// under the supervisor back to back in each iteration, so that both see
// the same load on the machine, the redirected one first in even
// iterations and second in odd ones. The child measures its own runtime, from
// its first line of work to its last write (what supervision costs the
// training): ratio/op is the geometric mean over the iterations of the
// ratio of those, own-file-ms/op and own-supervised-ms/op their means.
// wall-ratio/op compares the whole: the redirected child from exec to exit
// against the supervised run from Start to the child's exit, which adds
// starting the run's supervisor (start-ms/op: Start to the child's first
// line of work, minus the same for the redirected child).
// bench/supervise.sh prints the medians of several such runs.
func BenchmarkSupervisionOverhead(b *testing.B) {
	for _, name := range []string{"Burst", "Steady"} {
		b.Run(name, func(b *testing.B) {
			work := overheadWork[name]
			var ownFile, ownSup, wallFile, wallSup, start, botCPU time.Duration
			logRatio, logWall := 0.0, 0.0
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				own := filepath.Join(dir, "own")
				argv := childCommand("cpuprint", overheadLines, work, "", own)
				if cpu := os.Getenv("TRAINBOT_BENCH_CHILD_CPU"); cpu != "" {
					// Pinned (bench/supervise.sh): the child on its own core, for
					// both runs; the bot and its shim stay where this process is.
					argv = append([]string{"taskset", "-c", cpu}, argv...)
				}
				var tf, of time.Duration
				redirected := func() {
					f, err := os.Create(filepath.Join(dir, "out.log"))
					if err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					cmd := exec.Command(argv[0], argv[1:]...)
					cmd.Stdout, cmd.Stderr = f, f
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
					tf = time.Since(t0)
					f.Close()
					of = readRuntime(b, own)
				}
				var got *trainer.Run
				var osup time.Duration
				supervised := func() {
					h := newBenchHarnessJob(b, filepath.Join(dir, "data"), job("c", argv))
					cpu0 := selfCPU()
					r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "c"})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := h.sup.WaitRun(context.Background(), r.ID); err != nil {
						b.Fatal(err)
					}
					got, _ = h.st.Run(context.Background(), r.ID)
					botCPU += selfCPU() - cpu0
					h.close()
					osup = readRuntime(b, own)
				}
				// Each order in turn (ABBA over two iterations): whatever
				// drifts on the machine, or is left by the run before,
				// weighs on both alike.
				if i%2 == 0 {
					redirected()
					supervised()
				} else {
					supervised()
					redirected()
				}
				if got.Outcome != trainer.OutcomeFinished || got.Steps != 1000000 {
					b.Fatalf("got %s with %d steps", got.Outcome, got.Steps)
				}
				ts := got.EndedAt.Sub(got.StartedAt)
				ownFile, ownSup, wallFile, wallSup = ownFile+of, ownSup+osup, wallFile+tf, wallSup+ts
				start += (ts - osup) - (tf - of)
				logRatio += math.Log(float64(osup) / float64(of))
				logWall += math.Log(float64(ts) / float64(tf))
			}
			n := float64(b.N)
			b.ReportMetric(float64(ownFile.Milliseconds())/n, "own-file-ms/op")
			b.ReportMetric(float64(ownSup.Milliseconds())/n, "own-supervised-ms/op")
			b.ReportMetric(math.Exp(logRatio/n), "ratio/op")
			b.ReportMetric(float64(wallFile.Milliseconds())/n, "wall-file-ms/op")
			b.ReportMetric(float64(wallSup.Milliseconds())/n, "wall-supervised-ms/op")
			b.ReportMetric(math.Exp(logWall/n), "wall-ratio/op")
			b.ReportMetric(float64(start.Milliseconds())/n, "start-ms/op")
			b.ReportMetric(float64(botCPU.Milliseconds())/n, "bot-cpu-ms/op")
		})
	}
}

// selfCPU is the CPU time this process (the bot) has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readRuntime reads the runtime a cpuprint child wrote.
func readRuntime(b *testing.B, path string) time.Duration {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(ns)
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

// ingestLog writes a log of n lines of one format (kv "step=N loss=X",
// classic "Epoch [e/10], Step [s/S], Loss: x", tqdm bars ended by \r),
// the three of bench/ingest.sh.
func ingestLog(b *testing.B, path, format string, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 1; i <= n; i++ {
		loss := trainer.NoisyLoss(int64(i))
		switch format {
		case "kv":
			fmt.Fprintf(w, "step=%d loss=%.4f\n", i, loss)
		case "classic":
			per := n / 10
			fmt.Fprintf(w, "Epoch [%d/10], Step [%d/%d], Loss: %.4f\n", (i-1)/per+1, (i-1)%per+1, per, loss)
		case "tqdm":
			pct := i * 100 / n
			bar := strings.Repeat("█", pct/10) + strings.Repeat(" ", 10-pct/10)
			fmt.Fprintf(w, "\rtrain: %3d%%|%s| %d/%d [00:10<00:00, 99999.00it/s, loss=%.4f]", pct, bar, i, n, loss)
		}
	}
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// BenchmarkIngest is the bot's side of a burst run: a child (cat) prints a
// ready log of 1e6 lines and the supervisor reads, parses, thins and
// stores it, in this process; bot-cpu-ms/op is this process's CPU time
// from Start until the run is recorded (every point stored). With
// -cpuprofile it is the profile of the ingest path. bench/ingest.sh
// measures the same through `trainbot console`.
func BenchmarkIngest(b *testing.B) {
	for _, format := range []string{"kv", "classic", "tqdm"} {
		b.Run(format, func(b *testing.B) {
			log := filepath.Join(b.TempDir(), format+".log")
			ingestLog(b, log, format, 1000000)
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				h := newBenchHarnessJob(b, b.TempDir(), job("c", []string{"cat", log}))
				cpu0 := selfCPU()
				r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "c"})
				if err != nil {
					b.Fatal(err)
				}
				got, err := h.sup.WaitRun(context.Background(), r.ID)
				if err != nil {
					b.Fatal(err)
				}
				cpu += selfCPU() - cpu0
				h.close()
				if got.Outcome != trainer.OutcomeFinished || got.Steps != 1000000 {
					b.Fatalf("got %s with %d steps", got.Outcome, got.Steps)
				}
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "bot-cpu-ms/op")
		})
	}
}

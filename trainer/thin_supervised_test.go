package trainer_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// curveBuckets is, per bucket of n/1000 steps, the minimum and maximum of
// the values the "curve" child prints.
func curveBuckets(n int64) (lo, hi []float64) {
	lo, hi = make([]float64, 1000), make([]float64, 1000)
	per := n / 1000
	for i := range n {
		v, _ := strconv.ParseFloat(fmt.Sprintf("%.4f", trainer.NoisyLoss(i)), 64)
		b := i / per
		if i%per == 0 {
			lo[b], hi[b] = v, v
		}
		lo[b], hi[b] = min(lo[b], v), max(hi[b], v)
	}
	return lo, hi
}

// A script that prints 10⁶ steps in about a second: the stored loss has
// points in every one of 1000 equal step buckets, with the minimum and the
// maximum the script printed in that bucket, in at most ThinBudget points.
// (Thinning per second of wall clock used to store 106 points, nearly all
// from the first second.)
func TestStoredCurveIsFaithfulAtAnyPrintRate(t *testing.T) {
	if trainer.RaceEnabled {
		// About 100,000 points written and four thinnings of up to 40,000:
		// SQLite (modernc, C translated to Go) is some 40 times slower under
		// -race, which makes it more than 30 s. Without -race: about 2 s.
		t.Skip("storing 10⁶ lines takes more than 30 s under -race")
	}
	const n = 1_000_000
	ctx := context.Background()
	h := newHarness(t, job("c", childCommand("curve", strconv.Itoa(n))))
	r := h.start("c", nil)
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != n-1 {
		t.Fatalf("got %s at step %d, want finished at step %d (%s)", got.Outcome, got.Steps, n-1, got.Detail)
	}
	pts, err := h.st.Series(ctx, r.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) > trainer.ThinBudget {
		t.Errorf("stored %d points, want at most %d", len(pts), trainer.ThinBudget)
	}
	wantLo, wantHi := curveBuckets(n)
	lo, hi := make([]float64, 1000), make([]float64, 1000)
	seen := make([]bool, 1000)
	for i, p := range pts {
		b := p.Step / (n / 1000)
		if !seen[b] {
			lo[b], hi[b], seen[b] = p.Value, p.Value, true
		}
		lo[b], hi[b] = min(lo[b], p.Value), max(hi[b], p.Value)
		// Lines were printed in step order, and each point keeps the time
		// its line was read, even one held back by thinning.
		if i > 0 && p.T < pts[i-1].T {
			t.Fatalf("step %d has time %d, before step %d's %d", p.Step, p.T, pts[i-1].Step, pts[i-1].T)
		}
	}
	for b := range 1000 {
		if !seen[b] || lo[b] != wantLo[b] || hi[b] != wantHi[b] {
			t.Fatalf("steps %d…: stored min %v max %v (any: %v), want the printed %v and %v", b*n/1000, lo[b], hi[b], seen[b], wantLo[b], wantHi[b])
		}
	}
	if first, last := pts[0], pts[len(pts)-1]; first.Step != 0 || last.Step != n-1 {
		t.Errorf("stored steps %d to %d, want 0 to %d", first.Step, last.Step, n-1)
	}
	if pts[0].T < got.StartedAt.UnixMilli() {
		t.Errorf("the first point has time %d, before the run started (%d)", pts[0].T, got.StartedAt.UnixMilli())
	}
	t.Logf("%d lines: %d points stored", n, len(pts))
}

// TestEveryLineParsedUnderBurst: a child prints 10⁶ metric lines as fast
// as it can (about a second) without a step, so the parser counts one step
// per line it reads: the run must end at step 10⁶, every line parsed
// however far behind the bot fell (thinning decides what is stored, not
// the parser's speed).
func TestEveryLineParsedUnderBurst(t *testing.T) {
	n := 1_000_000
	if trainer.RaceEnabled {
		n = 100_000 // SQLite is some 40 times slower under -race
	}
	h := newHarness(t, job("c", childCommand("stepless", strconv.Itoa(n))))
	r := h.start("c", nil)
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != int64(n) {
		t.Fatalf("got %s at step %d, want finished at step %d: %d lines were not parsed (%s)", got.Outcome, got.Steps, n, int64(n)-got.Steps, got.Detail)
	}
	if d := got.EndedAt.Sub(got.StartedAt); d > 0 {
		t.Logf("%d lines in %v (%.0f lines/s), all parsed", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	}
}

// BenchmarkSupervisedCurve runs the "curve" child of 10⁶ and 10⁷ lines and
// reports the points stored, the peak of the Go heap (sampled every 10 ms)
// and the peak resident memory of the whole test process (VmHWM, reset
// before the run): what the bot holds while it reads a flood of metrics.
// Every line is parsed (the bot reads the log at its own pace): the run
// must end at the last step.
func BenchmarkSupervisedCurve(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var stored, heap, rss int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := b.TempDir()
				st, err := store.Open(dir, store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				sup, err := trainer.New(context.Background(), trainer.Options{Jobs: []*trainer.Job{job("c", childCommand("curve", strconv.Itoa(n)))}, Recorder: st, DataDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				w := watchMemory()
				b.StartTimer()
				r, err := sup.Start(context.Background(), trainer.StartRequest{Job: "c"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sup.WaitRun(context.Background(), r.ID); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				h, s := w.end()
				heap, rss = max(heap, h), max(rss, s)
				got, _ := st.Run(context.Background(), r.ID)
				if got.Outcome != trainer.OutcomeFinished || got.Steps != int64(n-1) {
					b.Fatalf("got %s with %d steps, want finished at step %d", got.Outcome, got.Steps, n-1)
				}
				c, err := st.PointCount(context.Background(), r.ID)
				if err != nil {
					b.Fatal(err)
				}
				stored = c
				sup.Close(context.Background())
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(stored), "points")
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
		})
	}
}

// memoryWatch samples the Go heap until end.
type memoryWatch struct {
	stop chan struct{}
	done chan uint64
}

func watchMemory() *memoryWatch {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM (Linux)
	w := &memoryWatch{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-w.stop:
				w.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// end returns the peak heap and the peak resident memory (bytes; 0 when
// /proc cannot tell).
func (w *memoryWatch) end() (heap, rss int64) {
	close(w.stop)
	heap = int64(<-w.done)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return heap, rss
}

package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// The figures of runs on a host against the same runs on this host, each
// measured in the same run (bench/remote.sh prints the ratios): the first
// point's latency, the catch-up of 10⁶ lines printed while no hub watched
// (and the bytes that crossed the connection for them), and the hub's
// resident memory with 3 live runs.

// hostsFor is the job's hosts and the hub's for mode "local" or "remote".
func hostsFor(b *testing.B, mode string) ([]string, map[string]trainer.RemoteHost, *remote) {
	if mode == "local" {
		return nil, nil, nil
	}
	r := newRemote(b, "h1")
	return []string{"h1"}, map[string]trainer.RemoteHost{"h1": r.link}, r
}

// BenchmarkFirstPoint: from Start to the first point of a run that prints
// one line at once.
func BenchmarkFirstPoint(b *testing.B) {
	for _, mode := range []string{"local", "remote"} {
		b.Run(mode, func(b *testing.B) {
			hs, links, _ := hostsFor(b, mode)
			job := &trainer.Job{Name: "one", Command: sh(`echo "step=1 loss=1"; exec sleep 30`), Hosts: hs}
			h := newHub(b, b.TempDir(), []*trainer.Job{job}, links)
			defer h.close(b, false)
			var total time.Duration
			for range b.N {
				began := time.Now()
				run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "one", By: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				for {
					st, err := h.sup.Status(run.ID)
					if err == nil && st.Progress.Step == 1 {
						break
					}
					if time.Since(began) > 30*time.Second {
						b.Fatal("no first point in 30 s")
					}
					time.Sleep(time.Millisecond)
				}
				total += time.Since(began)
				if _, err := h.sup.Stop(run.ID, "bench"); err != nil {
					b.Fatal(err)
				}
				h.ended(b, run.ID, 30*time.Second)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "first-point-ms/op")
		})
	}
}

// BenchmarkCatchUp: a run prints 10⁶ lines while its hub is away; the
// time from a new hub's start to the run's end recorded with its points
// stored, and, for a run on a host, the bytes the connection carried.
func BenchmarkCatchUp(b *testing.B) {
	const lines = 1_000_000
	for _, mode := range []string{"local", "remote"} {
		b.Run(mode, func(b *testing.B) {
			hs, links, r := hostsFor(b, mode)
			var total time.Duration
			var bytes, logBytes int64
			for range b.N {
				dir := b.TempDir()
				gate := filepath.Join(dir, "go")
				job := &trainer.Job{Name: "flood", Hosts: hs, Command: sh(fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.02; done; seq 1 %d | awk '{print "step=" $1 " loss=" 1/$1}'`, gate, lines))}
				h := newHub(b, dir, []*trainer.Job{job}, links)
				run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "flood", By: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				h.close(b, true)
				os.WriteFile(gate, nil, 0o600)
				runDir := filepath.Join(dir, "runs", strconv.FormatInt(run.ID, 10))
				if run.RemoteDir != "" {
					runDir = run.RemoteDir
				}
				deadline := time.Now().Add(2 * time.Minute)
				for {
					st, err := shimctl.ReadState(runDir)
					if err == nil && st.Ended {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal("the run did not end in 2 minutes")
					}
					time.Sleep(20 * time.Millisecond)
				}
				var before int64
				if r != nil {
					before = r.link.Received.Load()
				}
				began := time.Now()
				h2 := newHub(b, dir, []*trainer.Job{job}, links)
				got := h2.ended(b, run.ID, 5*time.Minute)
				total += time.Since(began)
				if r != nil {
					bytes += r.link.Received.Load() - before
				}
				if fi, err := os.Stat(filepath.Join(runDir, shimctl.LogFile)); err == nil {
					logBytes += fi.Size()
				}
				if got.Steps != lines || got.Outcome != trainer.OutcomeFinished {
					b.Fatalf("run: %s at step %d", got.Outcome, got.Steps)
				}
				h2.close(b, false)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "catch-up-ms/op")
			if r != nil {
				b.ReportMetric(float64(bytes)/float64(b.N), "wire-bytes/op")
			}
			b.ReportMetric(float64(logBytes)/float64(b.N), "log-bytes/op")
		})
	}
}

// BenchmarkHubRSS: the hub's resident memory after 10 s of 3 live runs
// printing 1000 lines a second each (run each mode in a process of its
// own: bench/remote.sh does).
func BenchmarkHubRSS(b *testing.B) {
	for _, mode := range []string{"local", "remote"} {
		b.Run(mode, func(b *testing.B) {
			var hs []string
			links := map[string]trainer.RemoteHost{}
			var jobs []*trainer.Job
			for i := range 3 {
				if mode == "remote" {
					name := "h" + strconv.Itoa(i+1)
					r := newRemote(b, name)
					links[name] = r.link
					hs = []string{name}
				}
				jobs = append(jobs, &trainer.Job{Name: "j" + strconv.Itoa(i), Hosts: hs,
					Command: sh(`seq 1 100000 | awk '{print "step=" $1 " loss=" 1/$1; fflush(); if ($1 % 100 == 0) system("sleep 0.1")}'`)})
			}
			h := newHub(b, b.TempDir(), jobs, links)
			defer h.close(b, false)
			for range b.N {
				var ids []int64
				for _, j := range jobs {
					run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: j.Name, By: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					ids = append(ids, run.ID)
				}
				time.Sleep(10 * time.Second)
				b.ReportMetric(float64(vmRSS())/(1<<20), "hub-rss-MiB")
				for _, id := range ids {
					h.sup.Stop(id, "bench")
					h.ended(b, id, 30*time.Second)
				}
			}
		})
	}
}

// vmRSS is this process's resident memory in bytes.
func vmRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}

//go:build cgo && !nonvml

package gpuclaim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/internal/nvmltest"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/gpuclaim"
	"github.com/trainbot/trainbot/trainer/shim"
)

func TestMain(m *testing.M) {
	shim.MainIfAsked() // the test binary is each run's supervisor
	os.Exit(m.Run())
}

const gib = nvmltest.GiB

// bot is one trainbot on the host: its store, supervisor, GPU monitor and
// allocator, over the host's lock directory.
type bot struct {
	st      *store.Store
	sup     *trainer.Supervisor
	events  chan trainer.Event
	monitor *gpu.Monitor
}

func newBot(t *testing.T, h *nvmltest.Host, lockDir string, freeFor time.Duration, jobs ...*trainer.Job) *bot {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{FlushEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n, err := gpu.OpenNVML(h)
	if err != nil {
		t.Fatal(err)
	}
	locks, err := gpulock.Open(lockDir)
	if err != nil {
		t.Fatal(err)
	}
	av := gpu.NewAvailability(gpu.DefaultBusyMemory, gpu.DefaultBusyUtil)
	b := &bot{st: st, events: make(chan trainer.Event, 1000)}
	alloc := gpuclaim.New(gpuclaim.Options{Last: func() gpu.Snapshot { return b.monitor.Last() }, Availability: av, Locks: locks,
		FreeFor: freeFor, Visible: "index", DataDir: dir})
	b.sup, err = trainer.New(context.Background(), trainer.Options{Jobs: jobs, Recorder: st, Queue: st, DataDir: dir,
		DrainTimeout: 500 * time.Millisecond, GPUs: alloc, GPURetry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.sup.Subscribe(func(e trainer.Event) { b.events <- e })
	b.monitor = gpu.NewMonitor(gpu.MonitorOptions{Sampler: n, Interval: 50 * time.Millisecond, Runs: b.sup, Recorder: st, Availability: av})
	b.monitor.Start()
	if err := b.sup.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.sup.Close(ctx)
		b.monitor.Close()
		n.Close()
		st.Close()
	})
	return b
}

func envJob(name string, sleep string) *trainer.Job {
	return &trainer.Job{Name: name, Lock: name, StopGrace: 300 * time.Millisecond, KillGrace: 300 * time.Millisecond,
		Command: []string{"/bin/sh", "-c", `echo "visible=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"; sleep ` + sleep}}
}

// visible is what the run's child printed of its GPUs.
func visible(t *testing.T, r *trainer.Run) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(r.LogPath)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "visible="); ok {
				return v
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %d printed no visible= line", r.ID)
	return ""
}

// 8 GPUs, 3 busy with another user's process: gpus=2 gets the two free
// ones with the most free memory, as NVML numbers them; gpus=6 is refused
// with what holds each GPU, queued, and started once a run ended and a
// released GPU has been quiet for free_for.
func TestEightGPUsThreeBusy(t *testing.T) {
	h := nvmltest.NewHost()
	for i, used := range []uint64{5, 0, 2, 0, 0, 3, 0, 1} { // GPUs 1, 3, 4, 6 have the most free
		h.Used(i, used*gib)
	}
	h.Foreign(1, 10*gib)
	h.Foreign(4, 10*gib)
	h.Foreign(6, 10*gib)
	const freeFor = 300 * time.Millisecond
	b := newBot(t, h, filepath.Join(t.TempDir(), "locks"), freeFor, envJob("train", "2"), envJob("big", "0"))
	time.Sleep(2 * freeFor) // quiet long enough, for the GPUs that are

	r, err := b.sup.Start(context.Background(), trainer.StartRequest{Job: "train", Params: map[string]string{"gpus": "2"}, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(t, r); got != "3,7 order=PCI_BUS_ID" {
		t.Errorf("the child sees %q, want GPUs 3 and 7 (the free ones with the most free memory) in PCI order", got)
	}
	if len(r.GPUs) != 2 || r.GPUs[0].Index != 3 || r.GPUs[1].Index != 7 || !strings.HasPrefix(r.GPUs[0].UUID, "GPU-") {
		t.Errorf("recorded GPUs %+v", r.GPUs)
	}

	_, err = b.sup.Start(context.Background(), trainer.StartRequest{Job: "big", Params: map[string]string{"gpus": "6"}, By: "bo"})
	var busy *trainer.BusyError
	var facts *gpu.BusyError
	if !errors.As(err, &busy) || busy.GPUs == nil || !errors.As(busy.GPUs, &facts) {
		t.Fatalf("gpus=6: got %v, want a GPU shortage", err)
	}
	for _, st := range facts.Devices {
		switch st.Device.Index {
		case 1, 4, 6:
			if len(st.Holders) != 1 || st.Holders[0].PID != 1 || st.Holders[0].User == "" {
				t.Errorf("GPU %d: holders %+v, want pid 1 with its user", st.Device.Index, st.Holders)
			}
		case 3, 7:
			if !st.Taken || len(st.Runs) != 1 || st.Runs[0] != r.ID {
				t.Errorf("GPU %d: %+v, want taken by run %d, as its lock says", st.Device.Index, st, r.ID)
			}
		}
	}
	if _, _, err := b.sup.Enqueue(context.Background(), trainer.StartRequest{Job: "big", Params: map[string]string{"gpus": "6"}, By: "bo"}, "telegram:2"); err != nil {
		t.Fatal(err)
	}
	h.Release(6) // the other user's process on GPU 6 ends
	released := time.Now()
	var big *trainer.Run
	deadline := time.After(30 * time.Second)
	for big == nil {
		select {
		case e := <-b.events:
			if e.Kind == trainer.EventStarted && e.Run.Job == "big" {
				big = e.Run
			}
		case <-deadline:
			t.Fatal("the queued gpus=6 never started")
		}
	}
	if waited := time.Since(released); waited < freeFor {
		t.Errorf("started %s after GPU 6 was released, before free_for (%s)", waited, freeFor)
	}
	if first, _ := b.st.Run(context.Background(), r.ID); first.State != trainer.StateEnded {
		t.Error("gpus=6 started while the first run held two GPUs")
	}
	if got := visible(t, big); got != "0,2,3,5,6,7 order=PCI_BUS_ID" {
		t.Errorf("gpus=6 sees %q", got)
	}
}

// Two trainbots (their own data directories and stores) share the host's
// lock directory: of 10 starts of gpus=1 at once on 4 free GPUs, those
// that start hold distinct GPUs, as their children's environments say,
// and the others are refused as waiting for GPUs.
func TestTwoTrainbotsNeverShareAGPU(t *testing.T) {
	h := nvmltest.NewHost()
	for i := 4; i < 8; i++ {
		h.Foreign(i, 10*gib)
	}
	lockDir := filepath.Join(t.TempDir(), "locks")
	var jobs [2][]*trainer.Job
	for i := range 10 {
		jobs[i%2] = append(jobs[i%2], envJob(fmt.Sprintf("j%d", i), "2"))
	}
	bots := []*bot{newBot(t, h, lockDir, 100*time.Millisecond, jobs[0]...), newBot(t, h, lockDir, 100*time.Millisecond, jobs[1]...)}
	time.Sleep(300 * time.Millisecond)
	for round := range 2 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		type startedRun struct {
			r *trainer.Run
			b *bot
		}
		var started []startedRun
		refused := 0
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := bots[i%2].sup.Start(context.Background(), trainer.StartRequest{Job: fmt.Sprintf("j%d", i), Params: map[string]string{"gpus": "1"}})
				mu.Lock()
				defer mu.Unlock()
				var busy *trainer.BusyError
				switch {
				case err == nil:
					started = append(started, startedRun{r, bots[i%2]})
				case errors.As(err, &busy) && busy.GPUs != nil:
					refused++
				default:
					t.Errorf("start j%d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		seen := map[string]string{}
		for _, s := range started {
			v := visible(t, s.r)
			if other, dup := seen[v]; dup {
				t.Errorf("round %d: %s and %s both see %q", round, other, s.r.Job, v)
			}
			seen[v] = s.r.Job
		}
		if len(started) != 4 || refused != 6 {
			t.Errorf("round %d: %d started, %d refused; want 4 and 6", round, len(started), refused)
		}
		for _, s := range started {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := s.b.sup.WaitRun(ctx, s.r.ID); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
				t.Errorf("wait %s: %v", s.r.Job, err)
			}
			cancel()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A queued start waits for free_for after the GPU it needs is released,
// then starts within the queue's retry (figures in the log: the time from
// the release to the start).
func TestQueuedStartWhenAGPUFreesUp(t *testing.T) {
	h := nvmltest.NewHost()
	for i := range 8 {
		h.Foreign(i, 10*gib)
	}
	const freeFor = 500 * time.Millisecond
	b := newBot(t, h, filepath.Join(t.TempDir(), "locks"), freeFor, envJob("one", "0"))
	if _, _, err := b.sup.Enqueue(context.Background(), trainer.StartRequest{Job: "one", Params: map[string]string{"gpus": "1"}}, "telegram:1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * freeFor)
	select {
	case e := <-b.events:
		if e.Kind == trainer.EventStarted {
			t.Fatal("started while every GPU was busy")
		}
	default:
	}
	h.Release(5)
	released := time.Now()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-b.events:
			if e.Kind != trainer.EventStarted {
				continue
			}
			took := time.Since(released)
			if took < freeFor {
				t.Errorf("started %s after the release, before free_for (%s)", took, freeFor)
			}
			if len(e.Run.GPUs) != 1 || e.Run.GPUs[0].Index != 5 {
				t.Errorf("got GPUs %+v, want 5", e.Run.GPUs)
			}
			t.Logf("GPU released → queued run started: %s (free_for %s, sample interval 50ms, queue retry 50ms)", took.Round(time.Millisecond), freeFor)
			return
		case <-deadline:
			t.Fatal("the queued start never started")
		}
	}
}

// A lock directory that is not safe refuses GPU requests with its reason.
func TestUnsafeLockDirRefusesWithTheReason(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777) // world-writable without the sticky bit
	_, err := gpulock.Open(dir)
	if err == nil {
		t.Fatal("an unsafe lock directory was accepted")
	}
	_, cerr := gpuclaim.Refusing(err).Claim(context.Background(), trainer.GPURequest{Count: 1}, trainer.GPUHolder{})
	if !errors.Is(cerr, trainer.ErrNoGPUs) || !strings.Contains(cerr.Error(), dir) || !strings.Contains(cerr.Error(), "cannot be shared") {
		t.Errorf("got %v", cerr)
	}
}

// snapshotAllocator is an Allocator over a snapshot the test sets, with a
// lock directory of its own.
func snapshotAllocator(t *testing.T, snap *gpu.Snapshot, active func(int64) bool) (*gpuclaim.Allocator, *gpulock.Dir) {
	t.Helper()
	locks, err := gpulock.Open(filepath.Join(t.TempDir(), "locks"))
	if err != nil {
		t.Fatal(err)
	}
	av := gpu.NewAvailability(gpu.DefaultBusyMemory, gpu.DefaultBusyUtil)
	av.Observe(*snap)
	return gpuclaim.New(gpuclaim.Options{Last: func() gpu.Snapshot { return *snap }, Availability: av, Locks: locks,
		Visible: "index", DataDir: t.TempDir(), Active: active}), locks
}

func twoGPUs() gpu.Snapshot {
	return gpu.Snapshot{At: time.Now(), Available: true, Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-0", Name: "A", MemTotal: 40 * gib, Util: 0},
		{Index: 1, UUID: "GPU-1", Name: "A", MemTotal: 40 * gib, Util: 0},
	}}
}

// The snapshot may still show a run of this trainbot that has just ended
// on its GPU: it does not count once the run is no longer active (an
// on_oom retry starts at once, on the same GPU).
func TestAnEndedRunsGPUIsFree(t *testing.T) {
	snap := twoGPUs()
	snap.Processes = []gpu.Process{{PID: 4242, Device: 0, RunID: 5, MemUsed: 30 * gib}}
	active := true
	a, _ := snapshotAllocator(t, &snap, func(run int64) bool { return run == 5 && active })
	req := trainer.GPURequest{Count: 1, Indices: []int{0}}
	if _, err := a.Claim(context.Background(), req, trainer.GPUHolder{Job: "j"}); !errors.As(err, new(*trainer.GPUShortage)) {
		t.Fatalf("GPU 0 while run 5 is active: %v, want a shortage", err)
	}
	active = false
	c, err := a.Claim(context.Background(), req, trainer.GPUHolder{Job: "j"})
	if err != nil || len(c.GPUs) != 1 || c.GPUs[0].Index != 0 {
		t.Fatalf("GPU 0 once run 5 ended: %+v, %v", c, err)
	}
	for _, f := range c.Locks {
		f.Close()
	}
}

// A GPU that misses one sample is waited for, not "no such GPU"; one the
// host never had is refused for good.
func TestAGPUThatMissesASampleIsWaitedFor(t *testing.T) {
	snap := twoGPUs()
	a, _ := snapshotAllocator(t, &snap, nil)
	if _, ok := a.Met(2, 0); !ok {
		t.Fatal("two free GPUs are not met")
	}
	snap.Unanswered, snap.Devices = snap.Devices[1:], snap.Devices[:1] // GPU 1 did not answer
	_, err := a.Claim(context.Background(), trainer.GPURequest{Count: 1, Indices: []int{1}}, trainer.GPUHolder{})
	if !errors.As(err, new(*trainer.GPUShortage)) || errors.Is(err, trainer.ErrNoGPUs) {
		t.Errorf("gpu=1 missing from one sample: %v, want a shortage", err)
	}
	_, err = a.Claim(context.Background(), trainer.GPURequest{Count: 2}, trainer.GPUHolder{})
	if !errors.As(err, new(*trainer.GPUShortage)) {
		t.Errorf("gpus=2 with one GPU missing from a sample: %v, want a shortage", err)
	}
	_, err = a.Claim(context.Background(), trainer.GPURequest{Count: 1, Indices: []int{7}}, trainer.GPUHolder{})
	if !errors.Is(err, trainer.ErrNoGPUs) {
		t.Errorf("gpu=7 on a host of 2: %v, want ErrNoGPUs", err)
	}
}

// A GPU whose lock cannot be taken (a directory where its lock file
// should be) is waited for and says why, not a failed start; the lock of
// one that can names this host.
func TestAnUntakeableLockIsAShortage(t *testing.T) {
	snap := twoGPUs()
	a, locks := snapshotAllocator(t, &snap, nil)
	if err := os.Mkdir(filepath.Join(locks.Path(), "GPU-0"+gpulock.Suffix), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := a.Claim(context.Background(), trainer.GPURequest{Count: 1, Indices: []int{0}}, trainer.GPUHolder{})
	if !errors.As(err, new(*trainer.GPUShortage)) {
		t.Errorf("gpu=0 with its lock a directory: %v, want a shortage", err)
	}
	c, err := a.Claim(context.Background(), trainer.GPURequest{Count: 1, Indices: []int{1}}, trainer.GPUHolder{Job: "j"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Locks[0].Close()
	c.Record(9)
	hs, err := locks.Holders()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if h := hs["GPU-1"]; !h.Held || h.Holder.Run != 9 || h.Holder.Host != host || h.Holder.Job != "j" {
		t.Errorf("GPU-1's lock: %+v, want held by run 9 of %s", h, host)
	}
}

package trainer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"golang.org/x/sys/unix"
)

// fakeGPUs is a GPUAllocator over n GPUs with real lock files: a GPU is
// free while nobody holds its flock, so that whether the run's supervisor
// holds the locks for the run's life is what the tests see. The real one
// (NVML, the host-wide lock directory) is trainer/gpuclaim's.
type fakeGPUs struct {
	dir    string
	n      int
	mu     sync.Mutex
	claims int
	last   trainer.GPURequest
}

func (f *fakeGPUs) lockPath(i int) string {
	return filepath.Join(f.dir, "gpu"+string(rune('0'+i))+".lock")
}

func (f *fakeGPUs) Claim(_ context.Context, req trainer.GPURequest, h trainer.GPUHolder) (*trainer.GPUClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	f.last = req
	if req.N() > f.n {
		return nil, errors.Join(trainer.ErrNoGPUs, errors.New("only "+string(rune('0'+f.n))+" GPUs"))
	}
	var taken []string
	var got []trainer.RunGPU
	var files []*os.File
	for i := range f.n {
		uuid := "GPU-" + string(rune('a'+i))
		if len(req.Indices) > 0 && !slices.Contains(req.Indices, i) {
			continue
		}
		fd, err := os.OpenFile(f.lockPath(i), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if unix.Flock(int(fd.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			fd.Close()
			taken = append(taken, uuid)
			continue
		}
		if len(got) < req.N() {
			got = append(got, trainer.RunGPU{Index: i, UUID: uuid, Name: "Fake"})
			files = append(files, fd)
		} else {
			fd.Close()
		}
	}
	if len(got) < req.N() {
		for _, fd := range files {
			fd.Close()
		}
		return nil, &trainer.GPUShortage{Want: req, Cause: errors.New("taken: " + strings.Join(taken, ","))}
	}
	idx := make([]string, len(got))
	for i, g := range got {
		idx[i] = string(rune('0' + g.Index))
	}
	return &trainer.GPUClaim{GPUs: got, Locks: files,
		Env: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(idx, ",")}}, nil
}

// held reports whether GPU i's lock is held by anyone.
func (f *fakeGPUs) held(t *testing.T, i int) bool {
	t.Helper()
	fd, err := os.OpenFile(f.lockPath(i), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if unix.Flock(int(fd.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	unix.Flock(int(fd.Fd()), unix.LOCK_UN)
	return false
}

// A run that asks for GPUs gets them in its environment and its record;
// its supervisor holds their locks for its whole life; a start the GPUs
// cannot meet is a BusyError with the GPUs' states, and the queue starts
// it once they are free.
func TestRunsGetTheirGPUs(t *testing.T) {
	dir := t.TempDir()
	gpus := &fakeGPUs{dir: t.TempDir(), n: 2}
	long := job("long", childCommand("print", "20", "100"))
	long.GPUs = trainer.GPURequest{Count: 1}
	long.Lock = "long"
	show := job("show", childCommand("env", "CUDA_VISIBLE_DEVICES,CUDA_DEVICE_ORDER"))
	show.Lock = "show"
	h := newHarnessWith(t, dir, trainer.Options{GPUs: gpus, GPURetry: 100 * time.Millisecond}, long, show)

	r := h.start("long", nil)
	if len(r.GPUs) != 1 || r.GPUs[0].Index != 0 || r.GPUs[0].UUID != "GPU-a" {
		t.Fatalf("run GPUs %+v", r.GPUs)
	}
	if !gpus.held(t, 0) {
		t.Fatal("GPU 0's lock is not held by the run's supervisor")
	}
	// gpu=0 is taken: not started, no run recorded, the GPUs' states said.
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "show", Params: map[string]string{"gpu": "0"}, By: "tester"})
	var busy *trainer.BusyError
	if !errors.As(err, &busy) || busy.GPUs == nil || !strings.Contains(err.Error(), "taken: GPU-a") || len(busy.GPUs.Want.Indices) != 1 {
		t.Fatalf("gpu=0 while taken: %v", err)
	}
	if runs, _ := h.st.Runs(context.Background(), history.RunFilter{}); len(runs) != 1 {
		t.Errorf("a start that waits for GPUs left a record: %d runs", len(runs))
	}
	// Bad requests are parameter errors; a job's own parameter keeps its name.
	for _, p := range []map[string]string{{"gpus": "0"}, {"gpus": "x"}, {"gpu": "1,1"}, {"gpu": "-1"}} {
		if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "show", Params: p}); !errors.Is(err, trainer.ErrBadParam) {
			t.Errorf("%v: got %v, want a parameter error", p, err)
		}
	}
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "show", Params: map[string]string{"gpus": "3"}}); !errors.Is(err, trainer.ErrNoGPUs) {
		t.Errorf("gpus=3 of 2: got %v, want ErrNoGPUs", err)
	}
	// Queued, it starts once the long run ends and GPU 0 is free again.
	if _, _, err := h.sup.Enqueue(context.Background(), trainer.StartRequest{Job: "show", Params: map[string]string{"gpu": "0"}, By: "ann"}, "telegram:1"); err != nil {
		t.Fatal(err)
	}
	var queued *trainer.Run
	deadline := time.After(30 * time.Second)
	for queued == nil {
		select {
		case e := <-h.events:
			if e.Kind == trainer.EventStarted && e.Run.Job == "show" {
				if e.Queued == nil {
					t.Error("the show run did not come from the queue")
				}
				queued = e.Run
			}
		case <-deadline:
			t.Fatal("the queued start never started")
		}
	}
	// The shim lets the GPU go once every process of run 1 is gone, which
	// may be before this trainbot has recorded its end: what matters is
	// that nothing of run 1 lives when the queued run has its GPU.
	if syscall.Kill(-r.PID, 0) == nil {
		t.Errorf("the queued run started while run %d (process group %d) held its GPU", r.ID, r.PID)
	}
	done := h.wait(queued.ID)
	if len(done.GPUs) != 1 || done.GPUs[0].Index != 0 {
		t.Errorf("stored GPUs %+v", done.GPUs)
	}
	out, err := os.ReadFile(done.LogPath)
	if err != nil || !strings.Contains(string(out), "CUDA_VISIBLE_DEVICES=0\n") || !strings.Contains(string(out), "CUDA_DEVICE_ORDER=PCI_BUS_ID\n") {
		t.Errorf("the child's environment: %v\n%s", err, out)
	}
	if gpus.held(t, 0) || gpus.held(t, 1) {
		t.Error("a GPU lock is still held after every run ended")
	}
}

// Without an allocator (no NVML on this host) a run that asks for GPUs is
// refused, never started with an empty CUDA_VISIBLE_DEVICES.
func TestNoGPUsRefusesAGPURequest(t *testing.T) {
	j := job("g", childCommand("env", "CUDA_VISIBLE_DEVICES"))
	j.GPUs = trainer.GPURequest{Count: 1}
	h := newHarness(t, j)
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "g"})
	if !errors.Is(err, trainer.ErrNoGPUs) || !strings.Contains(err.Error(), "sees no GPU") {
		t.Fatalf("got %v, want ErrNoGPUs", err)
	}
	if runs, _ := h.st.Runs(context.Background(), history.RunFilter{}); len(runs) != 0 {
		t.Errorf("%d runs recorded", len(runs))
	}
	// A job without a request runs as before.
	plain := job("p", childCommand("env", "CUDA_VISIBLE_DEVICES"))
	h2 := newHarness(t, plain)
	if r := h2.wait(h2.start("p", nil).ID); r.Outcome != trainer.OutcomeFinished || len(r.GPUs) != 0 {
		t.Errorf("plain run %+v", r)
	}
}

// A Slurm job's GPUs are Slurm's to choose: gpu= is refused before
// anything is submitted.
func TestSlurmJobRefusesExactGPUs(t *testing.T) {
	j := job("big", []string{"true"})
	j.Runner = trainer.RunnerSlurm
	h := newHarness(t, j)
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "big", Params: map[string]string{"gpu": "0"}})
	if !errors.Is(err, trainer.ErrBadParam) || !strings.Contains(err.Error(), "cannot be asked of Slurm") {
		t.Errorf("gpu=0 of a Slurm job: %v", err)
	}
}

// A start's gpus= stays with the run: its on_oom retries ask for GPUs
// too (they start from the run's parameters), and the run shows it.
func TestOOMRetryKeepsTheStartsGPURequest(t *testing.T) {
	gpus := &fakeGPUs{dir: t.TempDir(), n: 2}
	j := batchJob("16", 1)
	h := newHarnessWith(t, t.TempDir(), trainer.Options{GPUs: gpus, GPURetry: 100 * time.Millisecond}, j)
	first := h.start("fit", map[string]string{"gpus": "1"})
	if len(first.GPUs) != 1 || first.Params["gpus"] != "1" {
		t.Fatalf("first run: GPUs %+v, params %v", first.GPUs, first.Params)
	}
	chain := h.endedChain(3)
	if len(chain) < 2 {
		t.Fatalf("%d runs ended, want a retry", len(chain))
	}
	for i, e := range chain {
		if len(e.Run.GPUs) != 1 {
			t.Errorf("run #%d (link %d of the chain) got GPUs %+v: the start's gpus=1 was lost", e.Run.ID, i, e.Run.GPUs)
		}
	}
}

//go:build cgo && !nonvml

package gpu

import (
	"context"
	"errors"
	"os/user"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// The host: a mock DGX A100 with 3 of its 8 GPUs busy with other
// people's processes (one of them a real process of the test, so that its
// user and command are real), watched by a monitor that feeds an
// Availability.
func TestChooseOnMockDGX(t *testing.T) {
	s := newDGX(t)
	holder := startChild(t, nil, "sleep", "600", "3s")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// Free memory: GPU 5 and 2 have the most, then 7, 3, 0.
	used := []uint64{8 * gib, 20 * gib, gib / 2, 6 * gib, 30 * gib, gib / 4, 12 * gib, 4 * gib}
	for i, g := range s.gpus {
		g.set(func(g *fakeGPU) { g.used, g.util, g.procs = used[i], 0, nil })
	}
	for i, pid := range map[int]uint32{1: uint32(holder), 4: 1 << 30, 6: 1<<30 + 1} {
		s.gpus[i].set(func(g *fakeGPU) {
			g.util = 80
			g.procs = []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: g.used}}
		})
	}
	n := openDGX(t, s)
	av := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	m := NewMonitor(MonitorOptions{Sampler: n, Availability: av})
	ctx := context.Background()
	sample := func() Snapshot {
		t.Helper()
		if err := m.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		return m.Last()
	}
	snap := sample()
	if snap.Topology == nil || !snap.Topology.Between(snap.Devices[0].UUID, snap.Devices[1].UUID).NVLink ||
		snap.Topology.Between(snap.Devices[0].UUID, snap.Devices[1].UUID).Path != PathSwitch {
		t.Fatalf("topology = %+v", snap.Topology)
	}

	// Just started: nothing has been quiet for free_for yet.
	_, err = Choose(snap, av, Request{Count: 2}, nil, time.Minute)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.FreeCount() != 0 || !busy.Devices[5].Recent() {
		t.Fatalf("at once: %v", err)
	}
	// A minute on (the monitor's snapshots carry the sampler's clock; the
	// test moves the availability's by observing the same state later).
	later := snap
	later.At = snap.At.Add(61 * time.Second)
	av.Observe(later)
	c, err := Choose(later, av, Request{Count: 2}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Indices(); !slices.Equal(got, []int{2, 5}) {
		t.Errorf("gpus=2 chose %v, want [2 5] (the free ones with the most memory)", got)
	}
	env := VisibleEnv(c.Devices, "index")
	if !slices.Equal(env, []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=2,5"}) {
		t.Errorf("env = %q", env)
	}
	if env := VisibleEnv(c.Devices, "uuid"); env[1] != "CUDA_VISIBLE_DEVICES="+c.Devices[0].UUID+","+c.Devices[1].UUID ||
		!strings.HasPrefix(c.Devices[0].UUID, "GPU-") {
		t.Errorf("uuid env = %q", env)
	}

	// gpus=6 while those two are taken: refused, with the holders.
	taken := map[string]bool{c.Devices[0].UUID: true, c.Devices[1].UUID: true}
	_, err = Choose(later, av, Request{Count: 6}, taken, time.Minute)
	if !errors.As(err, &busy) || len(busy.Devices) != 8 || busy.FreeCount() != 3 {
		t.Fatalf("gpus=6: %v", err)
	}
	h := busy.Devices[1].Holders
	if len(h) != 1 || h[0].PID != holder || h[0].User != me.Username || h[0].Command != "sleep 600 3s" || h[0].MemUsed != 20*gib {
		t.Errorf("GPU 1's holders = %+v", h)
	}
	if !busy.Devices[2].Taken || !busy.Devices[5].Taken || len(busy.Devices[4].Holders) != 1 || busy.Devices[4].Holders[0].User != "" {
		t.Errorf("states = %+v", busy.Devices)
	}
	if !strings.Contains(err.Error(), "GPU 1 held by "+me.Username+"'s process") {
		t.Errorf("error = %v", err)
	}
	// Never possible on this host: 9 GPUs, or 41 GiB free on a 40 GB card.
	for _, r := range []Request{{Count: 9}, {Count: 1, Memory: 41 * gib}, {Indices: []int{8}}} {
		if _, err := Choose(later, av, r, nil, time.Minute); !errors.Is(err, ErrNoGPUs) {
			t.Errorf("%v: %v, want ErrNoGPUs", r, err)
		}
	}

	// GPU 4's process ends: it is free after free_for, not before.
	s.gpus[4].set(func(g *fakeGPU) { g.util, g.procs = 0, nil })
	now := sample() // observed at the sampler's time, before later: ignored
	now.At = later.At
	av.Observe(now)
	now.At = later.At.Add(20 * time.Second)
	av.Observe(now)
	if _, err := Choose(now, av, Request{Indices: []int{4}}, taken, time.Minute); !errors.As(err, &busy) || !busy.Devices[0].Recent() ||
		busy.Devices[0].QuietFor != 20*time.Second {
		t.Errorf("GPU 4 free for 20s of 1m: %v", err)
	}
	now.At = now.At.Add(time.Minute)
	av.Observe(now)
	if c, err := Choose(now, av, Request{Indices: []int{4}}, taken, time.Minute); err != nil || !slices.Equal(c.Indices(), []int{4}) {
		t.Errorf("GPU 4 after 1m20s: %v, %v", c.Indices(), err)
	}
}

// A host without NVML: a request is refused with the reason, and nothing
// to put in CUDA_VISIBLE_DEVICES.
func TestChooseWithoutNVML(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, openErr := OpenNVML(lib)
	b := Unavailable(openErr)
	av := NewAvailability(DefaultBusyMemory, DefaultBusyUtil)
	m := NewMonitor(MonitorOptions{Sampler: b, Availability: av})
	if err := m.Sample(context.Background()); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	c, err := Choose(m.Last(), av, Request{Count: 1}, nil, time.Minute)
	var ng *NoGPUsError
	if !errors.Is(err, ErrNoGPUs) || !errors.As(err, &ng) || !strings.Contains(ng.Unavailable, "no NVIDIA driver") {
		t.Fatalf("got %v, want ErrNoGPUs with the reason", err)
	}
	if env := VisibleEnv(c.Devices, "index"); env != nil {
		t.Errorf("env = %q", env)
	}
}

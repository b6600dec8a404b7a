//go:build cgo && !nonvml

package gpu

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// startChild starts a real process of the test; cred, when set, runs it
// as another user.
func startChild(t *testing.T, cred *syscall.Credential, args ...string) int {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", args, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// A mock device reports the PIDs of real processes: the monitor's
// snapshot says who they are from their /proc entries, how long they have
// held the device, and their utilisation.
func TestHoldersFromRealProcesses(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := newDGX(t)
	n := openDGX(t, s)
	mine := startChild(t, nil, "sleep", "600", "1s")
	s.gpus[3].set(func(g *fakeGPU) {
		g.util = 55
		g.procs = []nvml.ProcessInfo{{Pid: uint32(mine), UsedGpuMemory: 12 * gib}}
		g.putil = []nvml.ProcessUtilizationSample{{Pid: uint32(mine), TimeStamp: 100, SmUtil: 40}, {Pid: uint32(mine), TimeStamp: 200, SmUtil: 48}}
	})
	// Another user's process: as root the test can start one (a uid with
	// a name, and one without); otherwise PID 1 is someone else's.
	other, otherUID, otherName := 1, 0, "root"
	noName := 0
	if os.Getuid() == 0 {
		if u, err := user.LookupId("65534"); err == nil {
			other, otherUID, otherName = startChild(t, &syscall.Credential{Uid: 65534, Gid: 65534}, "sleep", "61"), 65534, u.Username
		}
		noName = startChild(t, &syscall.Credential{Uid: 54321, Gid: 54321}, "sleep", "62")
	}
	s.gpus[5].set(func(g *fakeGPU) {
		g.util = 0
		g.procs = []nvml.ProcessInfo{{Pid: uint32(other), UsedGpuMemory: 3 * gib}}
		if noName != 0 {
			g.procs = append(g.procs, nvml.ProcessInfo{Pid: uint32(noName), UsedGpuMemory: gib})
		}
	})
	m := NewMonitor(MonitorOptions{Sampler: n})
	ctx := context.Background()
	if err := m.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.Last()
	byPID := func(s Snapshot) map[int]Process {
		out := map[int]Process{}
		for _, p := range s.Processes {
			out[p.PID] = p
		}
		return out
	}
	got := byPID(first)
	p := got[mine]
	if p.UID != os.Getuid() || p.User != me.Username || p.Name != "sleep" || p.Command != "sleep 600 1s" ||
		p.Device != 3 || p.MemUsed != 12*gib || p.Util != 48 || !p.Since.Equal(first.At) {
		t.Errorf("the test's child = %+v", p)
	}
	o := got[other]
	if o.UID != otherUID || o.User != otherName || o.Command == "" || o.Util != 0 {
		t.Errorf("another user's process (pid %d) = %+v, want uid %d (%s), a command, 0%% on a device at 0%%", other, o, otherUID, otherName)
	}
	if noName != 0 {
		if q := got[noName]; q.UID != 54321 || q.User != "54321" || q.Command != "sleep 62" {
			t.Errorf("a process of a uid without a name = %+v", q)
		}
	}

	// The next sample: no newer utilisation sample (NOT_FOUND) leaves it
	// unknown; Since stays the first sample's.
	if err := m.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	second := m.Last()
	if p := byPID(second)[mine]; p.Util != -1 || !p.Since.Equal(first.At) {
		t.Errorf("second sample: util %d, since %v; want -1 and %v", p.Util, p.Since, first.At)
	}
	d3 := s.Devices[3].(*server.Device)
	calls := d3.GetProcessUtilizationCalls()
	if len(calls) != 2 || calls[0].V != 0 || calls[1].V != 200 {
		t.Errorf("GetProcessUtilization calls = %+v, want two, from 0 then from 200", calls)
	}
	// Devices without processes, or at 0 %, are not asked.
	if c := len(s.Devices[5].(*server.Device).GetProcessUtilizationCalls()) + len(s.Devices[0].(*server.Device).GetProcessUtilizationCalls()); c != 0 {
		t.Errorf("%d per-process utilisation calls for devices at 0%% or without processes", c)
	}
	// 显卡's fresh Collect keeps Since too.
	fresh, err := m.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := byPID(fresh)[mine]; !p.Since.Equal(first.At) || p.User != me.Username {
		t.Errorf("Collect: %+v", p)
	}
	// A one-off Collect (trainbot gpu) knows who, not since when.
	once, err := Collect(ctx, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := byPID(once)[mine]; !p.Since.IsZero() || p.Command == "" {
		t.Errorf("one-off Collect: %+v", p)
	}
}

// A device that does not support per-process utilisation is asked once.
func TestProcessUtilNotSupported(t *testing.T) {
	s := newDGX(t)
	d := s.Devices[2].(*server.Device)
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	s.gpus[2].set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: 1 << 30, UsedGpuMemory: gib}} })
	n := openDGX(t, s)
	for range 3 {
		snap, err := n.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Processes[0].Util != -1 {
			t.Errorf("util = %d, want -1", snap.Processes[0].Util)
		}
	}
	if c := len(d.GetProcessUtilizationCalls()); c != 1 {
		t.Errorf("%d calls, want 1", c)
	}
}

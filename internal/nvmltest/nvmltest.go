//go:build cgo && !nonvml

// Package nvmltest is a mock GPU host for tests that run trainbot's parts
// over NVML: go-nvml's mock DGX A100 (8 × 40 GiB) whose devices report
// the memory used and the processes a test sets.
package nvmltest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// GiB is a gibibyte.
const GiB = 1 << 30

// Host is a mock DGX A100 (8 × 40 GiB, go-nvml's mock) whose devices
// report the memory and processes the test sets.
type Host struct {
	*dgxa100.Server
	mu    sync.Mutex
	used  [8]uint64 // Used sets it
	procs [8][]nvml.ProcessInfo
}

func NewHost() *Host {
	h := &Host{Server: dgxa100.New()}
	h.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED } // no Xid events here
	for i, dev := range h.Devices {
		d := dev.(*server.Device)
		// The mock's UUIDs are random per process; a host's are not, and
		// the host-wide locks go by them: two trainbot processes on one
		// mock host see the same GPUs.
		d.UUID = fmt.Sprintf("GPU-%08x-a100-4000-8000-%012x", i, i)
		total := d.MemoryInfo.Total
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return nvml.Memory_v2{Total: total, Used: h.used[i], Free: total - h.used[i]}, nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, nvml.SUCCESS }
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 100000, nvml.SUCCESS }
		d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 400000, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return slices.Clone(h.procs[i]), nvml.SUCCESS
		}
		d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		d.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		d.GetP2PStatusFunc = func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
	}
	return h
}

// Foreign puts a process that is no trainbot run's on GPU i (pid 1: a
// real process of another user, whose user and command /proc tells).
func (h *Host) Foreign(i int, mem uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used[i] += mem
	h.procs[i] = []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: mem}}
}

// Release ends what runs on GPU i and frees its memory.
func (h *Host) Release(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used[i], h.procs[i] = 0, nil
}

// Used sets the memory GPU i reports in use, besides its processes'.
func (h *Host) Used(i int, bytes uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used[i] = bytes
}

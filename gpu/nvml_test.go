//go:build cgo && !nonvml

package gpu

import (
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

const (
	gib      = 1 << 30
	mockName = "Mock NVIDIA A100-SXM4-40GB"
)

// fakeGPU is the state one mock device reports; tests change it between
// samples.
type fakeGPU struct {
	mu    sync.Mutex
	used  uint64 // bytes
	temp  uint32
	util  uint32
	power uint32 // mW
	procs []nvml.ProcessInfo
	// putil are the per-process utilisation samples NVML has buffered;
	// GetProcessUtilization returns those newer than it is asked for.
	putil []nvml.ProcessUtilizationSample
}

func (g *fakeGPU) set(f func(g *fakeGPU)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// dgx is a mock DGX A100 (8 × A100-SXM4-40GB) whose devices report the
// figures of their fakeGPU through NVML's v2 memory call. Its topology is
// a DGX's unless a test changes level and nvlink before opening it: every
// pair on NVLink (NVSwitch), GPUs 0–3 on one NUMA node and 4–7 on the
// other, pairs (0,1), (2,3)… behind one PCIe switch.
type dgx struct {
	*dgxa100.Server
	gpus   []*fakeGPU
	level  func(a, b int) nvml.GpuTopologyLevel
	nvlink func(a, b int) bool
}

func dgxLevel(a, b int) nvml.GpuTopologyLevel {
	switch {
	case a/2 == b/2:
		return nvml.TOPOLOGY_SINGLE
	case a/4 == b/4:
		return nvml.TOPOLOGY_NODE
	}
	return nvml.TOPOLOGY_SYSTEM
}

func newDGX(t testing.TB) *dgx {
	t.Helper()
	s := &dgx{Server: dgxa100.New(), level: dgxLevel, nvlink: func(a, b int) bool { return true }}
	if len(s.Devices) != 8 {
		t.Fatalf("mock has %d devices, want 8", len(s.Devices))
	}
	for i, h := range s.Devices {
		d := h.(*server.Device)
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return s.level(i, o.(*server.Device).Index), nvml.SUCCESS
		}
		d.GetP2PStatusFunc = func(o nvml.Device, index nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if index == nvml.P2P_CAPS_INDEX_NVLINK && s.nvlink(i, o.(*server.Device).Index) {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
		g := &fakeGPU{used: uint64(i+1) * gib, temp: uint32(40 + i), util: uint32(10 * i), power: uint32(100000 + 1000*i)}
		s.gpus = append(s.gpus, g)
		total := d.MemoryInfo.Total
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return nvml.Memory_v2{Total: total, Used: g.used, Free: total - g.used}, nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return nvml.Utilization{Gpu: g.util, Memory: g.util / 2}, nvml.SUCCESS
		}
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.temp, nvml.SUCCESS
		}
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.power, nvml.SUCCESS
		}
		d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 400000, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return slices.Clone(g.procs), nvml.SUCCESS
		}
		d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			var out []nvml.ProcessUtilizationSample
			for _, u := range g.putil {
				if u.TimeStamp > last {
					out = append(out, u)
				}
			}
			if len(out) == 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return out, nvml.SUCCESS
		}
	}
	return s
}

func openDGX(t testing.TB, s *dgx) *NVML {
	t.Helper()
	n, err := OpenNVML(s)
	if err != nil {
		t.Fatalf("OpenNVML: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestNVMLEightDevices(t *testing.T) {
	s := newDGX(t)
	n := openDGX(t, s)
	snap, err := n.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Devices) != 8 {
		t.Fatalf("got %d devices, want 8", len(snap.Devices))
	}
	if snap.Driver != "550.54.15" {
		t.Errorf("driver = %q", snap.Driver)
	}
	uuids := map[string]bool{}
	for i, d := range snap.Devices {
		if d.Index != i || d.Name != mockName || !strings.HasPrefix(d.UUID, "GPU-") {
			t.Errorf("device %d = %+v", i, d)
		}
		uuids[d.UUID] = true
		if d.MemTotal != 40960*(1<<20) || d.MemUsed != uint64(i+1)*gib {
			t.Errorf("device %d memory = %d / %d", i, d.MemUsed, d.MemTotal)
		}
		if d.TempC != 40+i || d.Util != 10*i || d.MemUtil != 5*i || d.PowerMilliW != uint64(100000+1000*i) || d.PowerLimitMilliW != 400000 {
			t.Errorf("device %d figures = %+v", i, d)
		}
	}
	if len(uuids) != 8 {
		t.Errorf("%d distinct UUIDs, want 8", len(uuids))
	}
	if n.Name() != "nvml" {
		t.Errorf("Name = %q", n.Name())
	}
}

func TestNVMLMemoryV1WithoutTheV2Symbol(t *testing.T) {
	s := newDGX(t)
	s.LookupSymbolFunc = func(name string) error { return errors.New(name + " not found") }
	for i, h := range s.Devices {
		d := h.(*server.Device)
		// Calling v2 now would panic in the mock: the symbol check must prevent it.
		d.GetMemoryInfo_v2Func = nil
		d.MemoryInfo = nvml.Memory{Total: d.MemoryInfo.Total, Used: uint64(i) * gib}
	}
	n := openDGX(t, s)
	snap, err := n.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Devices[3].MemUsed; got != 3*gib {
		t.Errorf("v1 memory used = %d, want %d", got, 3*gib)
	}
}

func TestNVMLFallsBackToV1WhenV2IsNotSupported(t *testing.T) {
	s := newDGX(t)
	d0 := s.Devices[0].(*server.Device)
	d0.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
	d0.MemoryInfo.Used = 7 * gib
	n := openDGX(t, s)
	for range 2 {
		snap, err := n.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Devices[0].MemUsed; got != 7*gib {
			t.Errorf("memory used = %d, want %d from v1", got, 7*gib)
		}
	}
	if calls := len(d0.GetMemoryInfo_v2Calls()); calls != 1 {
		t.Errorf("v2 called %d times, want once (then v1 for good)", calls)
	}
}

func TestNVMLFailedInitMakesNoOtherCall(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNKNOWN} {
		// Every other method of this mock is unset: calling one panics.
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		n, err := OpenNVML(lib)
		if n != nil || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%v: OpenNVML = %v, %v; want nil and ErrUnavailable", ret, n, err)
		}
		if len(lib.InitCalls()) != 1 {
			t.Errorf("Init called %d times", len(lib.InitCalls()))
		}
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND && !strings.Contains(Reason(err), "no NVIDIA driver") {
			t.Errorf("reason = %q", Reason(err))
		}
	}
}

func TestNVMLNoDevicesIsUnavailable(t *testing.T) {
	s := dgxa100.NewWithGPUs()
	n, err := OpenNVML(s)
	if n != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("OpenNVML = %v, %v", n, err)
	}
	if len(s.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times, want 1", len(s.ShutdownCalls()))
	}
}

// On this machine there is no NVIDIA driver: Open must say so, never call
// NVML again, and leave the program working on host memory.
func TestOpenWithTheSystemLibrary(t *testing.T) {
	b, err := Open()
	t.Cleanup(func() { b.Close() })
	if err == nil {
		// A machine with a driver: the real thing must sample.
		snap, err := b.Sample(context.Background())
		if err != nil || len(snap.Devices) == 0 {
			t.Fatalf("NVML opened but Sample = %d devices, %v", len(snap.Devices), err)
		}
		t.Logf("NVML works here: %d GPU(s), driver %s", len(snap.Devices), snap.Driver)
		return
	}
	if _, statErr := os.Stat("/dev/nvidiactl"); statErr == nil {
		t.Logf("/dev/nvidiactl exists but NVML failed: %v", err)
	}
	if !errors.Is(err, ErrUnavailable) || b.Name() != "none" {
		t.Fatalf("Open = %s, %v; want the none backend and ErrUnavailable", b.Name(), err)
	}
	t.Logf("no NVML here: %s", Reason(err))
	for range 3 { // repeated samples stay harmless
		if _, err := b.Sample(context.Background()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Sample = %v, want ErrUnavailable", err)
		}
	}
	pid, _ := startTree(t, "sleep 60 & wait", 1)
	snap, err := Collect(context.Background(), b, map[int]int64{pid: 9})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Available || snap.Reason == "" || snap.Host.MemTotal == 0 {
		t.Errorf("snapshot = available %v, reason %q, host %+v", snap.Available, snap.Reason, snap.Host)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].GPUBytes != nil || snap.Runs[0].HostBytes == nil || *snap.Runs[0].HostBytes <= 0 {
		t.Errorf("runs = %+v, want host memory and no GPU figure", snap.Runs)
	}
}

// runOnDGX starts a run-like process tree and puts its processes on the
// mock's devices: the shell's sleeping child on GPU 0 (same process group),
// the child that left the group with setsid on GPU 1, the test process on
// GPU 2 and a PID that does not exist on GPU 3.
func runOnDGX(t *testing.T, s *dgx) (pgid int, kids []int) {
	t.Helper()
	pgid, kids = startTree(t, "setsid sleep 60 & sleep 60 & wait", 2)
	slices.Sort(kids)
	s.gpus[0].set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: uint32(kids[0]), UsedGpuMemory: 20 * gib}} })
	s.gpus[1].set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: uint32(kids[1]), UsedGpuMemory: 5 * gib}} })
	s.gpus[2].set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 1 * gib}} })
	s.gpus[3].set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: 1 << 30, UsedGpuMemory: 2 * gib}} })
	return pgid, kids
}

func TestCollectAttributesProcessesToRuns(t *testing.T) {
	s := newDGX(t)
	n := openDGX(t, s)
	pgid, kids := runOnDGX(t, s)
	snap, err := Collect(context.Background(), n, map[int]int64{pgid: 12})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Available || len(snap.Processes) != 4 {
		t.Fatalf("available %v, %d processes", snap.Available, len(snap.Processes))
	}
	want := map[int]int64{kids[0]: 12, kids[1]: 12, os.Getpid(): 0, 1 << 30: 0}
	for _, p := range snap.Processes {
		if p.RunID != want[p.PID] {
			t.Errorf("pid %d on GPU %d: run %d, want %d", p.PID, p.Device, p.RunID, want[p.PID])
		}
		if (p.PID == kids[0]) && p.Name != "sleep" {
			t.Errorf("pid %d name = %q", p.PID, p.Name)
		}
	}
	if len(snap.Runs) != 1 {
		t.Fatalf("runs = %+v", snap.Runs)
	}
	u := snap.Runs[0]
	if u.RunID != 12 || u.PID != pgid || u.GPUBytes == nil || *u.GPUBytes != 25*gib || !slices.Equal(u.Devices, []int{0, 1}) {
		t.Errorf("run usage = %+v", u)
	}
	if u.GPUTotal == nil || *u.GPUTotal != 2*40960*(1<<20) {
		t.Errorf("GPU total = %v", u.GPUTotal)
	}
	if u.HostBytes == nil || *u.HostBytes <= 0 || u.Processes != 3 {
		t.Errorf("host = %v in %d processes", u.HostBytes, u.Processes)
	}
	// What bot/render's table shows: device 0 by name, a process of run
	// 12 with 20 GiB on it, the host's memory.
	if d, ok := snap.DeviceByIndex(0); !ok || d.Name != mockName {
		t.Errorf("device 0 = %+v", d)
	}
	if !slices.ContainsFunc(snap.Processes, func(p Process) bool { return p.Device == 0 && p.RunID == 12 && p.MemUsed>>20 == 20480 }) {
		t.Errorf("no process of run 12 with 20480 MiB on device 0: %+v", snap.Processes)
	}
	if snap.Host.MemTotal == 0 {
		t.Errorf("host = %+v", snap.Host)
	}
}

// fakeRuns is the supervisor side: the active runs and their peaks.
type fakeRuns struct {
	mu    sync.Mutex
	pgids map[int]int64
	gpu   map[int64]int64
	host  map[int64]int64
}

func newFakeRuns(pgids map[int]int64) *fakeRuns {
	return &fakeRuns{pgids: pgids, gpu: map[int64]int64{}, host: map[int64]int64{}}
}

func (f *fakeRuns) ActivePGIDs() map[int]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.pgids)
}

func (f *fakeRuns) ObserveMemory(id int64, g, h *int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g != nil {
		f.gpu[id] = max(f.gpu[id], *g)
	}
	if h != nil {
		f.host[id] = max(f.host[id], *h)
	}
}

func (f *fakeRuns) ObserveHostPeak(id int64, bytes int64, how string) {}

var _ Runs = (*fakeRuns)(nil)

// alertLog collects alerts.
type alertLog struct {
	mu  sync.Mutex
	got []Alert
	ch  chan Alert
}

func newAlertLog() *alertLog { return &alertLog{ch: make(chan Alert, 100)} }

func (l *alertLog) add(a Alert) {
	l.mu.Lock()
	l.got = append(l.got, a)
	l.mu.Unlock()
	l.ch <- a
}

func (l *alertLog) list() []Alert {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func (l *alertLog) next(t *testing.T) Alert {
	t.Helper()
	select {
	case a := <-l.ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no alert within 10s")
		return Alert{}
	}
}

// openStoreWithRun opens a store in a temporary directory with one run.
func openStoreWithRun(t *testing.T) (*store.Store, int64) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := st.CreateRun(context.Background(), &trainer.Run{Job: "train", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return st, id
}

func TestMonitorStoresPeaksAndAlertsOncePerCrossing(t *testing.T) {
	ctx := context.Background()
	s := newDGX(t)
	n := openDGX(t, s)
	pgid, _ := runOnDGX(t, s)
	st, runID := openStoreWithRun(t)
	runs := newFakeRuns(map[int]int64{pgid: runID})
	alerts := newAlertLog()
	m := NewMonitor(MonitorOptions{Sampler: n, Runs: runs, Recorder: st, Alert: alerts.add,
		Thresholds: Thresholds{MemoryPercent: 95, TempC: 85}})
	total := uint64(40960 << 20)
	setMem := func(pct float64) {
		s.gpus[0].set(func(g *fakeGPU) { g.used = uint64(pct / 100 * float64(total)) })
	}
	sample := func() {
		t.Helper()
		if err := m.Sample(ctx); err != nil {
			t.Fatalf("sample: %v", err)
		}
	}
	count := func(kind AlertKind) int {
		n := 0
		for _, a := range alerts.list() {
			if a.Kind == kind {
				n++
			}
		}
		return n
	}

	setMem(50)
	sample()
	if len(alerts.list()) != 0 {
		t.Fatalf("alerts below the thresholds: %+v", alerts.list())
	}
	setMem(96)
	sample()
	sample()
	sample()
	if got := count(AlertMemory); got != 1 {
		t.Fatalf("%d memory alerts after three samples at 96%%, want 1", got)
	}
	a := alerts.list()[0]
	if a.RunID != runID || a.Device != 0 || a.Sampled.Name != mockName || math.Round(a.Sampled.MemPercent()) != 96 || a.Held != 20<<30 ||
		a.Thresholds.MemoryPercent != 95 || !strings.HasPrefix(a.Key, "gpu:memory:") {
		t.Errorf("memory alert = %+v", a)
	}
	setMem(94) // below the threshold but within the re-arm margin
	sample()
	setMem(96)
	sample()
	if got := count(AlertMemory); got != 1 {
		t.Fatalf("%d memory alerts after hovering at the threshold, want 1", got)
	}
	setMem(80) // well below: re-armed
	sample()
	setMem(99)
	sample()
	if got := count(AlertMemory); got != 2 {
		t.Fatalf("%d memory alerts after a second crossing, want 2", got)
	}
	if k := alerts.list()[1].Key; k == a.Key {
		t.Errorf("second crossing reuses key %q", k)
	}

	// Temperature: any device, once per crossing.
	s.gpus[5].set(func(g *fakeGPU) { g.temp = 90 })
	sample()
	sample()
	if got := count(AlertTemperature); got != 1 {
		t.Fatalf("%d temperature alerts, want 1", got)
	}
	last := alerts.list()[len(alerts.list())-1]
	if last.Device != 5 || last.Sampled.Name != mockName || last.Sampled.TempC != 90 || last.Thresholds.TempC != 85 {
		t.Errorf("temperature alert = %+v", last)
	}

	// Peaks, and what the store keeps for the memory charts.
	runs.mu.Lock()
	peakGPU, peakHost := runs.gpu[runID], runs.host[runID]
	runs.mu.Unlock()
	if peakGPU != 25*gib || peakHost <= 0 {
		t.Errorf("peaks = GPU %d, host %d; want %d and > 0", peakGPU, peakHost, 25*gib)
	}
	series, err := st.RunMemorySeries(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	samples := int(m.Stats().Samples)
	if len(series) != samples || samples != 10 {
		t.Fatalf("%d run memory rows for %d samples, want 10", len(series), samples)
	}
	r := series[0]
	if r.GPUBytes == nil || *r.GPUBytes != 25*gib || r.GPUTotal == nil || *r.GPUTotal != 2*int64(total) || r.HostBytes == nil || *r.HostBytes <= 0 {
		t.Errorf("run memory row = %+v", r)
	}
	for dev := range 8 {
		ds, err := st.DeviceSeries(ctx, dev, time.Now().Add(-time.Minute), time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != samples || ds[0].Name != mockName || ds[0].MemTotal != int64(total) || ds[0].TempC < 40 {
			t.Fatalf("device %d: %d rows, first %+v", dev, len(ds), ds[0])
		}
	}
	if st := m.Stats(); st.Failures != 0 || st.Alerts != 3 {
		t.Errorf("stats = %+v", st)
	}
}

// eventFeed is a mock NVML event set fed by the test.
type eventFeed struct {
	set   *mock.EventSet
	feed  chan nvml.EventData
	freed chan struct{}
}

func newEventFeed() *eventFeed {
	f := &eventFeed{feed: make(chan nvml.EventData, 10), freed: make(chan struct{})}
	f.set = &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-f.feed:
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { close(f.freed); return nvml.SUCCESS },
	}
	return f
}

func TestMonitorXidEventAlerts(t *testing.T) {
	s := newDGX(t)
	feed := newEventFeed()
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return feed.set, nvml.SUCCESS }
	registered := make(chan uint64, 8)
	for _, h := range s.Devices {
		d := h.(*server.Device)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeAll, nvml.SUCCESS }
		d.RegisterEventsFunc = func(mask uint64, set nvml.EventSet) nvml.Return {
			registered <- mask
			return nvml.SUCCESS
		}
	}
	n, err := OpenNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	pgid, _ := runOnDGX(t, s)
	runs := newFakeRuns(map[int]int64{pgid: 4})
	alerts := newAlertLog()
	m := NewMonitor(MonitorOptions{Sampler: n, Runs: runs, Alert: alerts.add, Interval: time.Hour})
	m.Start()
	for range 8 {
		if mask := <-registered; mask != nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError {
			t.Fatalf("registered mask %#x", mask)
		}
	}
	// Wait for the first sample, so the alert can name the run on GPU 0.
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().Samples == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sample within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling the first sample
	}

	feed.feed <- nvml.EventData{Device: s.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	a := alerts.next(t)
	if a.Kind != AlertXid || a.Device != 0 || a.RunID != 4 || a.Xid != 79 || a.Sampled.Name != mockName || !slices.Equal(a.Runs, []int64{4}) {
		t.Errorf("xid alert = %+v", a)
	}
	// The same Xid again at once is not sent again; a double bit ECC error is.
	feed.feed <- nvml.EventData{Device: s.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	feed.feed <- nvml.EventData{Device: s.Devices[6], EventType: nvml.EventTypeDoubleBitEccError}
	a = alerts.next(t)
	if a.Kind != AlertECC || a.Device != 6 || a.RunID != 0 || a.Sampled.Name != mockName || len(a.Runs) != 0 {
		t.Errorf("ecc alert = %+v", a)
	}
	feed.feed <- nvml.EventData{Device: s.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	a = alerts.next(t)
	if a.Kind != AlertXid || a.Xid != 48 || a.Device != 2 {
		t.Errorf("xid 48 alert = %+v", a)
	}

	m.Close()
	select {
	case <-feed.freed:
	default:
		t.Error("the event set was not freed when the monitor closed")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times", len(s.ShutdownCalls()))
	}
	if got := len(alerts.list()); got != 3 {
		t.Errorf("%d alerts, want 3", got)
	}
	// After Close nothing reaches the library.
	if _, err := n.Sample(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Sample after Close = %v", err)
	}
}

func TestMonitorSurvivesFailingDevice(t *testing.T) {
	s := newDGX(t)
	n := openDGX(t, s)
	pgid, _ := runOnDGX(t, s)
	runs := newFakeRuns(map[int]int64{pgid: 2})
	m := NewMonitor(MonitorOptions{Sampler: n, Runs: runs})
	d1 := s.Devices[1].(*server.Device)
	lost := d1.GetMemoryInfo_v2Func
	d1.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
	if err := m.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "gpu 1") {
		t.Fatalf("sample with a lost GPU = %v", err)
	}
	last := m.Last()
	if len(last.Devices) != 7 || last.Runs[0].GPUBytes != nil || last.Runs[0].HostBytes == nil {
		t.Errorf("partial sample: %d devices, run %+v", len(last.Devices), last.Runs[0])
	}
	// The lost GPU is still the host's: a request for it waits, it is not
	// "no GPU 1".
	if len(last.Unanswered) != 1 || last.Unanswered[0].Index != 1 || last.Unanswered[0].UUID == "" {
		t.Errorf("unanswered = %+v, want GPU 1", last.Unanswered)
	}
	var busy *BusyError
	if _, err := Choose(last, nil, Request{Indices: []int{1}}, nil, 0); !errors.As(err, &busy) || busy.FreeCount() != 0 {
		t.Errorf("gpu=1 while it does not answer: %v, want a BusyError", err)
	}
	// A panicking binding is a failed sample too, not a crash.
	d1.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { panic("binding bug") }
	if err := m.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("sample with a panic = %v", err)
	}
	d1.GetMemoryInfo_v2Func = lost
	if err := m.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Samples != 3 || st.Failures != 2 {
		t.Errorf("stats = %+v", st)
	}
}

// BenchmarkNVMLSample is one NVML sample of 8 mock devices with a process
// each: the cost of the Go side (the mock answers at once).
func BenchmarkNVMLSample(b *testing.B) {
	s := newDGX(b)
	for i, g := range s.gpus {
		g.set(func(g *fakeGPU) { g.procs = []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: gib}} })
	}
	n := openDGX(b, s)
	ctx := context.Background()
	for b.Loop() {
		if _, err := n.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// systemNVML opens the machine's NVML, or skips where there is none.
func systemNVML(tb testing.TB) *NVML {
	tb.Helper()
	n, err := OpenNVML(nvml.New())
	if err != nil {
		tb.Skipf("no NVML here: %s", Reason(err))
	}
	tb.Cleanup(func() { n.Close() })
	return n
}

// On a machine with a driver: every device registers for Xid and double
// bit ECC events (or says why not), and the watcher ends with its context.
func TestWatchEventsSystem(t *testing.T) {
	n := systemNVML(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var events []DeviceEvent
	err := n.WatchEvents(ctx, func(ev DeviceEvent) { events = append(events, ev) })
	t.Logf("WatchEvents: err %v, %d events", err, len(events))
	if err != nil && !strings.Contains(err.Error(), "no GPU reports Xid events") {
		t.Fatal(err)
	}
}

// BenchmarkNVMLSampleSystem is one NVML sample of this machine's GPUs.
func BenchmarkNVMLSampleSystem(b *testing.B) {
	n := systemNVML(b)
	ctx := context.Background()
	devices := 0
	for b.Loop() {
		snap, err := n.Sample(ctx)
		if err != nil {
			b.Fatal(err)
		}
		devices = len(snap.Devices)
	}
	b.ReportMetric(float64(devices), "devices")
}

// BenchmarkMonitorSample8x50 is one whole monitor sample of a mock DGX
// A100 with 50 processes on each GPU (processes of another PID namespace:
// /proc cannot show them), the Availability fed and idle_held on: the
// steady state, where every holder is known. It reports the NVML calls a
// sample makes.
func BenchmarkMonitorSample8x50(b *testing.B) {
	s := newDGX(b)
	for i, g := range s.gpus {
		g.set(func(g *fakeGPU) {
			g.procs = nil
			for j := range 50 {
				pid := uint32(1<<22 + 100*i + j)
				g.procs = append(g.procs, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 100 << 20})
				g.putil = append(g.putil, nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: uint64(j + 1), SmUtil: 3})
			}
		})
	}
	n := openDGX(b, s)
	m := NewMonitor(MonitorOptions{Sampler: n, Availability: NewAvailability(DefaultBusyMemory, DefaultBusyUtil),
		Thresholds: Thresholds{MemoryPercent: 95, TempC: 85, IdleMemory: gib, IdleFor: 30 * time.Minute}})
	ctx := context.Background()
	m.Sample(ctx)
	before := nvmlCalls(s)
	samples := 0
	for b.Loop() {
		if err := m.Sample(ctx); err != nil {
			b.Fatal(err)
		}
		samples++
	}
	b.ReportMetric(float64(nvmlCalls(s)-before)/float64(samples), "nvml-calls/sample")
}

// nvmlCalls counts the per-sample calls made to the mock's devices.
func nvmlCalls(s *dgx) int {
	n := 0
	for _, h := range s.Devices {
		d := h.(*server.Device)
		n += len(d.GetMemoryInfo_v2Calls()) + len(d.GetUtilizationRatesCalls()) + len(d.GetTemperatureCalls()) +
			len(d.GetPowerUsageCalls()) + len(d.GetEnforcedPowerLimitCalls()) + len(d.GetComputeRunningProcessesCalls()) +
			len(d.GetGraphicsRunningProcessesCalls()) + len(d.GetProcessUtilizationCalls())
	}
	return n
}

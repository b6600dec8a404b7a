package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/procfs"
)

// utilObserver is a Runs that also takes the utilisation of each run's GPUs
// (the supervisor: its gpu_util alert rules).
type utilObserver interface {
	ObserveUtil(runID int64, percent float64)
}

// runUtil is the mean utilisation of the devices a run's processes use;
// false when none is known.
func runUtil(snap Snapshot, u RunUsage) (float64, bool) {
	sum, n := 0, 0
	for _, d := range snap.Devices {
		for _, i := range u.Devices {
			if d.Index == i && d.Util >= 0 {
				sum += d.Util
				n++
			}
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(sum) / float64(n), true
}

// Runs is what the monitor needs of the supervisor.
type Runs interface {
	// ActivePGIDs maps the process group id of every active run (its main
	// process's PID) to the run id.
	ActivePGIDs() map[int]int64
	// ObserveMemory raises the peak GPU and host memory of an active run;
	// nil leaves a value alone.
	ObserveMemory(runID int64, gpuBytes, hostBytes *int64)
	// ObserveHostPeak raises the peak host memory of an active run from
	// the kernel's high-water marks, measured as how says
	// (history.PeakMain, history.PeakTreeSum, history.PeakCgroup).
	ObserveHostPeak(runID int64, bytes int64, how string)
}

// Recorder stores samples; *store.Store is one.
type Recorder interface {
	// AddDeviceSamples stores one row per device.
	AddDeviceSamples(ctx context.Context, samples []history.DeviceSample) error
	// AddRunMemory stores one row per active run.
	AddRunMemory(ctx context.Context, samples []history.RunMemory) error
}

// DefaultInterval is how often a Monitor samples when not told.
const DefaultInterval = 2 * time.Second

// MonitorOptions configure a Monitor.
type MonitorOptions struct {
	Sampler  Sampler       // required; Unavailable(err) on a host without NVML
	Interval time.Duration // default DefaultInterval
	Runs     Runs          // nil: no run attribution
	Recorder Recorder      // nil: samples are not stored
	// Alert receives the threshold and device-event alerts; nil drops them.
	// It is called from the monitor's goroutines and must not block long.
	Alert      func(Alert)
	Thresholds Thresholds
	// Availability, when set, is fed every snapshot (for Choose).
	Availability *Availability
	Logger       *slog.Logger
}

// Stats count the monitor's samples.
type Stats struct {
	Samples  int64 // samples taken
	Failures int64 // samples that failed, in whole or in part
	Alerts   int64 // alerts sent
}

// Monitor samples every interval: it stores the device and run memory
// samples, raises each run's peak GPU and host memory, and sends an alert
// once per threshold crossing and once per Xid or double bit ECC event. A
// failing sample is logged and counted; it never stops the loop nor the
// supervision.
type Monitor struct {
	opts MonitorOptions
	log  *slog.Logger
	book *holderBook // who holds the devices, since when

	mu      sync.Mutex // guards the fields below
	alerter *alerter
	// hwm is, per active run, the high-water mark of every process of its
	// tree seen so far (also of those that have ended since).
	hwm     map[int64]map[procfs.ProcID]int64
	last    Snapshot
	stats   Stats
	failing bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMonitor returns a monitor; Start begins sampling.
func NewMonitor(opts MonitorOptions) *Monitor {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Monitor{opts: opts, log: opts.Logger, book: newHolderBook(), alerter: newAlerter(opts.Thresholds)}
}

// Start begins sampling (one sample at once, then every interval) and, when
// the sampler reports device events, watching them. Close stops both.
func (m *Monitor) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.loop(ctx)
	if w, ok := m.opts.Sampler.(EventWatcher); ok {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if err := w.WatchEvents(ctx, m.onEvent); err != nil {
				m.log.Warn("no Xid alerts: cannot watch GPU events", "err", err)
			}
		}()
	}
}

// Close stops sampling and waits for the monitor's goroutines.
func (m *Monitor) Close() error {
	if m.cancel == nil {
		return nil
	}
	m.cancel()
	m.wg.Wait()
	return nil
}

func (m *Monitor) loop(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		m.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stats returns the counters.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Last returns the latest snapshot the loop took (zero before the first).
func (m *Monitor) Last() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Collect takes a fresh snapshot attributed to the active runs, without
// storing it or alerting (for 显卡); each process's Since is when the
// monitor's samples first saw it (now, for one they have not).
func (m *Monitor) Collect(ctx context.Context) (Snapshot, error) {
	snap, err := collect(ctx, m.opts.Sampler, m.activeRuns(), m.book)
	m.book.sinceOf(&snap)
	return snap, err
}

// Availability is the Availability the monitor feeds, nil when none.
func (m *Monitor) Availability() *Availability { return m.opts.Availability }

func (m *Monitor) activeRuns() map[int]int64 {
	if m.opts.Runs == nil {
		return nil
	}
	return m.opts.Runs.ActivePGIDs()
}

// Sample takes one sample and does everything with it: store, peaks,
// alerts. The loop calls it every interval; it returns the error that was
// logged and counted, if any.
func (m *Monitor) Sample(ctx context.Context) (err error) {
	defer func() {
		// A backend must not take supervision down: a panic (a misbehaving
		// library binding) counts as a failed sample.
		if p := recover(); p != nil {
			err = fmt.Errorf("gpu sample panicked: %v", p)
		}
		m.finish(err)
	}()
	snap, err := collect(ctx, m.opts.Sampler, m.activeRuns(), m.book)
	m.book.observe(&snap)
	if m.opts.Availability != nil {
		m.opts.Availability.Observe(snap)
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if err := m.record(ctx, snap); err != nil {
		errs = append(errs, err)
	}
	if m.opts.Runs != nil {
		for _, u := range snap.Runs {
			m.opts.Runs.ObserveMemory(u.RunID, u.GPUBytes, u.HostBytes)
			if ur, ok := m.opts.Runs.(utilObserver); ok {
				if pct, ok := runUtil(snap, u); ok {
					ur.ObserveUtil(u.RunID, pct)
				}
			}
		}
		for _, p := range m.hostPeaks(snap.Runs) {
			m.opts.Runs.ObserveHostPeak(p.run, p.bytes, p.how)
		}
	}
	m.mu.Lock()
	m.last = snap
	alerts := m.alerter.check(snap)
	m.stats.Alerts += int64(len(alerts))
	m.mu.Unlock()
	m.send(alerts...)
	return errors.Join(errs...)
}

// finish counts a sample and logs a failure when it starts and when it
// ends, not at every sample.
func (m *Monitor) finish(err error) {
	m.mu.Lock()
	m.stats.Samples++
	was := m.failing
	m.failing = err != nil
	if err != nil {
		m.stats.Failures++
	}
	failures := m.stats.Failures
	m.mu.Unlock()
	switch {
	case err != nil && !was:
		m.log.Warn("gpu sample failed", "err", err)
	case err != nil:
		m.log.Debug("gpu sample failed", "err", err, "failures", failures)
	case was:
		m.log.Info("gpu samples work again", "failures", failures)
	}
}

// record stores the snapshot's device and run samples.
func (m *Monitor) record(ctx context.Context, snap Snapshot) error {
	if m.opts.Recorder == nil {
		return nil
	}
	var errs []error
	if len(snap.Devices) > 0 {
		ds := make([]history.DeviceSample, len(snap.Devices))
		for i, d := range snap.Devices {
			ds[i] = history.DeviceSample{T: snap.At, Device: d.Index, UUID: d.UUID, Name: d.Name,
				MemUsed: int64(d.MemUsed + d.MemReserved), MemTotal: int64(d.MemTotal),
				Util: d.Util, TempC: d.TempC, PowerMilliW: int64(d.PowerMilliW)}
		}
		if err := m.opts.Recorder.AddDeviceSamples(ctx, ds); err != nil {
			errs = append(errs, fmt.Errorf("store device samples: %w", err))
		}
	}
	var rs []history.RunMemory
	for _, u := range snap.Runs {
		if u.GPUBytes != nil || u.HostBytes != nil { // a run not measured gets no row
			rs = append(rs, history.RunMemory{RunID: u.RunID, T: snap.At, GPUBytes: u.GPUBytes, GPUTotal: u.GPUTotal, HostBytes: u.HostBytes})
		}
	}
	if len(rs) > 0 {
		if err := m.opts.Recorder.AddRunMemory(ctx, rs); err != nil {
			errs = append(errs, fmt.Errorf("store run memory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// onEvent turns a device event into an alert (once per repeat window).
func (m *Monitor) onEvent(ev DeviceEvent) {
	m.log.Warn("gpu event", "gpu", ev.Device, "kind", string(ev.Kind), "xid", ev.Xid)
	m.mu.Lock()
	al, ok := m.alerter.event(ev, m.last)
	if ok {
		m.stats.Alerts++
	}
	m.mu.Unlock()
	if ok {
		m.send(al)
	}
}

func (m *Monitor) send(alerts ...Alert) {
	for _, a := range alerts {
		m.log.Info("gpu alert", "kind", string(a.Kind), "gpu", a.Device, "run", a.RunID)
		if m.opts.Alert != nil {
			m.opts.Alert(a)
		}
	}
}

// hostPeak is a run's peak host memory from high-water marks.
type hostPeak struct {
	run   int64
	bytes int64
	how   string
}

// hostPeaks folds a snapshot's high-water marks into each run's and
// returns every run's peak: memory.peak of its own cgroup when it has one
// (exact for the tree), else the sum of the VmHWM of every process of its
// tree seen so far. That sum is exact for a run of one process and an
// upper bound for several (each reached its mark at its own time): how
// says which. Runs no longer in the snapshot are forgotten.
func (m *Monitor) hostPeaks(runs []RunUsage) []hostPeak {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hwm == nil {
		m.hwm = map[int64]map[procfs.ProcID]int64{}
	}
	seen := make(map[int64]bool, len(runs))
	var out []hostPeak
	for _, u := range runs {
		seen[u.RunID] = true
		marks := m.hwm[u.RunID]
		if marks == nil {
			marks = map[procfs.ProcID]int64{}
			m.hwm[u.RunID] = marks
		}
		for p, v := range u.HWM {
			marks[p] = max(marks[p], v)
		}
		if u.CgroupPeak > 0 {
			out = append(out, hostPeak{u.RunID, u.CgroupPeak, history.PeakCgroup})
			continue
		}
		if len(marks) == 0 {
			continue
		}
		var sum int64
		for _, v := range marks {
			sum += v
		}
		how := history.PeakTreeSum
		if len(marks) == 1 {
			how = history.PeakMain
		}
		out = append(out, hostPeak{u.RunID, sum, how})
	}
	for id := range m.hwm {
		if !seen[id] {
			delete(m.hwm, id)
		}
	}
	return out
}

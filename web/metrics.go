package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// Sources is what /metrics reads at each scrape. A nil source leaves its
// metrics out; a failing one is logged and left out, and never takes the
// others down.
type Sources struct {
	// Active returns the active runs (trainer.Supervisor.Active).
	Active func() []trainer.Status
	// GPU returns the latest GPU sample (gpu.Monitor.Last): the scrape
	// never waits for NVML.
	GPU func() gpu.Snapshot
	// EndedRuns counts the ended runs by job and outcome (store.Store.EndedRuns).
	EndedRuns func(context.Context) ([]history.OutcomeCount, error)
	// OutboxPending counts the messages still to be delivered
	// (store.Store.OutboxPending).
	OutboxPending func(context.Context) (int64, error)
	// Alerts counts the alerts posted (nil: none are counted).
	Alerts *Alerts
	Logger *slog.Logger
}

// Alerts is the counter trainbot_alerts_total{kind}. It exists before
// the metrics, since the notifier that feeds it starts first. It is safe
// for concurrent use.
type Alerts struct {
	mu sync.Mutex
	n  map[string]uint64
}

// NewAlerts returns the counter with the given kinds at 0, so that a
// rate() has a series before the first alert of a kind.
func NewAlerts(kinds []string) *Alerts {
	a := &Alerts{n: make(map[string]uint64, len(kinds))}
	for _, k := range kinds {
		a.n[k] = 0
	}
	return a
}

// Inc counts an alert of a kind (notify.Options.OnAlert).
func (a *Alerts) Inc(kind string) {
	a.mu.Lock()
	a.n[kind]++
	a.mu.Unlock()
}

// collect adds the counts to a scrape.
func (a *Alerts) collect(s *scrape) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, n := range a.n {
		s.add(descAlerts, float64(n), k)
	}
}

// Metrics is what /metrics serves: the runs, GPUs, history and outbox of
// the sources, the alert counter, and Go's and the process's series
// (go_*, process_*: the names, help and types of client_golang's
// collectors, which dashboards for Go programs expect). Names follow the
// exposition conventions (base units, _bytes, _seconds, _total); the GPU
// series carry dcgm-exporter's labels (gpu, UUID, device, modelName), so
// a dashboard can join them with DCGM_FI_* series of the same host.
type Metrics struct {
	src Sources
	log *slog.Logger
}

// NewMetrics returns the metrics over src.
func NewMetrics(src Sources) *Metrics {
	if src.Logger == nil {
		src.Logger = slog.New(slog.DiscardHandler)
	}
	return &Metrics{src: src, log: src.Logger}
}

// text is one scrape in the text format. err says what was left out (a
// family that could not be read, a series collected twice); the text
// has the rest.
func (m *Metrics) text(ctx context.Context) ([]byte, error) {
	s := newScrape()
	collectGo(s)
	collectProcess(s)
	m.collect(ctx, s)
	if m.src.Alerts != nil {
		m.src.Alerts.collect(s)
	}
	b := s.appendText(make([]byte, 0, 16<<10))
	return b, errors.Join(s.errs...)
}

// handler serves GET /metrics. What could not be collected is logged and
// the rest served, as promhttp's ContinueOnError did: a bad series never
// hides the others.
func (m *Metrics) handler(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := m.text(r.Context())
		if err != nil {
			log.Warn("metrics: collected in part", "err", err)
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if _, err := w.Write(b); err != nil {
			log.Warn("metrics: send", "err", err)
		}
	})
}

// The families of trainbot's own series.
var (
	descRunStep  = newDesc("trainbot_run_step", "The latest global step of an active run.", gaugeType, "run", "job")
	descRunStart = newDesc("trainbot_run_start_time_seconds", "When an active run started, in seconds since the Unix epoch.", gaugeType, "run", "job")
	descRunTotal = newDesc("trainbot_run_total_steps", "The total steps of an active run, when its output told.", gaugeType, "run", "job")
	descRunRate  = newDesc("trainbot_run_steps_per_second", "An active run's steps per second over about the last minute.", gaugeType, "run", "job")
	descMetric   = newDesc("trainbot_run_metric", "The latest value of each metric of an active run (loss, acc, lr, …), as read from its output or event files.",
		gaugeType, "run", "job", "name")
	descRunOn   = newDesc("trainbot_run_host_info", "1 for an active run on another host ([[hosts]]); host is its name.", gaugeType, "run", "job", "host")
	descRunGPU  = newDesc("trainbot_run_gpu_memory_bytes", "GPU memory held by an active run's processes.", gaugeType, "run", "job")
	descRunHost = newDesc("trainbot_run_host_memory_bytes", "Resident host memory of an active run's process tree.", gaugeType, "run", "job")
	descRuns    = newDesc("trainbot_runs_total", "Runs that ended, by job and outcome (from the history: it survives restarts).",
		counterType, "job", "outcome")
	descOutbox = newDesc("trainbot_outbox_pending", "Messages stored in the outbox and not delivered yet.", gaugeType)
	descAlerts = newDesc("trainbot_alerts_total", "Alerts posted to the chats and push channels since trainbot started, by kind (oom, failed, nan, stalled, gpu, trainbot, …).",
		counterType, "kind")

	// The GPU series carry dcgm-exporter's labels.
	descGPUUsed  = newDesc("trainbot_gpu_memory_used_bytes", "GPU memory in use.", gaugeType, gpuLabels...)
	descGPUTotal = newDesc("trainbot_gpu_memory_total_bytes", "GPU memory capacity.", gaugeType, gpuLabels...)
	descGPUUtil  = newDesc("trainbot_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (0 to 1).", gaugeType, gpuLabels...)
	descGPUMemU  = newDesc("trainbot_gpu_memory_utilization_ratio", "Share of the last sample period GPU memory was read or written (0 to 1).", gaugeType, gpuLabels...)
	descGPUTemp  = newDesc("trainbot_gpu_temperature_celsius", "GPU temperature.", gaugeType, gpuLabels...)
	descGPUPower = newDesc("trainbot_gpu_power_watts", "GPU power draw.", gaugeType, gpuLabels...)
	descGPULimit = newDesc("trainbot_gpu_power_limit_watts", "GPU power limit.", gaugeType, gpuLabels...)
)

var gpuLabels = []string{"gpu", "UUID", "device", "modelName"}

// scrapeTimeout bounds the store's queries of one scrape.
const scrapeTimeout = 5 * time.Second

// collect adds the sources' series to a scrape. A failing source is
// logged and left out.
func (m *Metrics) collect(ctx context.Context, s *scrape) {
	jobs := map[int64]string{}
	if m.src.Active != nil {
		for _, st := range m.src.Active() {
			r := st.Run
			id := strconv.FormatInt(r.ID, 10)
			jobs[r.ID] = r.Job
			s.add(descRunStep, float64(st.Progress.Step), id, r.Job)
			s.add(descRunStart, float64(r.StartedAt.UnixNano())/1e9, id, r.Job)
			if st.Progress.TotalSteps > 0 {
				s.add(descRunTotal, float64(st.Progress.TotalSteps), id, r.Job)
			}
			s.add(descRunRate, st.StepsPerSec, id, r.Job)
			if r.Host != "" {
				s.add(descRunOn, 1, id, r.Job, r.Host)
			}
			// The run already bounds its metric names (1000, and 100
			// more losses): so is this series' cardinality.
			for _, x := range st.Last {
				s.add(descMetric, x.Value, id, r.Job, x.Name)
			}
		}
	}
	if m.src.GPU != nil {
		collectGPU(s, m.src.GPU(), jobs)
	}
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	if m.src.EndedRuns != nil {
		counts, err := m.src.EndedRuns(ctx)
		if err != nil {
			m.log.Warn("metrics: count the runs", "err", err)
		}
		for _, n := range counts {
			s.add(descRuns, float64(n.Runs), n.Job, n.Outcome)
		}
	}
	if m.src.OutboxPending != nil {
		if n, err := m.src.OutboxPending(ctx); err != nil {
			m.log.Warn("metrics: count the outbox", "err", err)
		} else {
			s.add(descOutbox, float64(n))
		}
	}
}

// collectGPU adds the devices of a snapshot and the memory of the active
// runs it attributed.
func collectGPU(s *scrape, snap gpu.Snapshot, jobs map[int64]string) {
	for _, d := range snap.Devices {
		l := []string{strconv.Itoa(d.Index), d.UUID, fmt.Sprintf("nvidia%d", d.Index), d.Name}
		s.add(descGPUUsed, float64(d.MemUsed), l...)
		s.add(descGPUTotal, float64(d.MemTotal), l...)
		if d.Util >= 0 {
			s.add(descGPUUtil, float64(d.Util)/100, l...)
		}
		if d.MemUtil >= 0 {
			s.add(descGPUMemU, float64(d.MemUtil)/100, l...)
		}
		if d.TempC >= 0 {
			s.add(descGPUTemp, float64(d.TempC), l...)
		}
		if d.PowerMilliW > 0 {
			s.add(descGPUPower, float64(d.PowerMilliW)/1000, l...)
		}
		if d.PowerLimitMilliW > 0 {
			s.add(descGPULimit, float64(d.PowerLimitMilliW)/1000, l...)
		}
	}
	for _, u := range snap.Runs {
		job, ok := jobs[u.RunID]
		if !ok {
			continue // ended since the sample
		}
		id := strconv.FormatInt(u.RunID, 10)
		if u.GPUBytes != nil {
			s.add(descRunGPU, float64(*u.GPUBytes), id, job)
		}
		if u.HostBytes != nil {
			s.add(descRunHost, float64(*u.HostBytes), id, job)
		}
	}
}

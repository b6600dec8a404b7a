package web

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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

// Alerts is the counter trainbot_alerts_total{kind}. It exists before the
// registry, since the notifier that feeds it starts first.
type Alerts struct{ vec *prometheus.CounterVec }

// NewAlerts returns the counter with the given kinds at 0, so that a
// rate() has a series before the first alert of a kind.
func NewAlerts(kinds []string) *Alerts {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainbot_alerts_total",
		Help: "Alerts posted to the chats and push channels since trainbot started, by kind (oom, failed, nan, stalled, gpu, trainbot, …).",
	}, []string{"kind"})
	for _, k := range kinds {
		vec.WithLabelValues(k)
	}
	return &Alerts{vec: vec}
}

// Inc counts an alert of a kind (notify.Options.OnAlert).
func (a *Alerts) Inc(kind string) { a.vec.WithLabelValues(kind).Inc() }

// Metrics is trainbot's Prometheus registry: the collector of runs, GPUs
// and the outbox, the alert counter, and Go's and the process's
// collectors. Names follow the exposition conventions (base units,
// _bytes, _seconds, _total); the GPU series carry dcgm-exporter's labels
// (gpu, UUID, device, modelName), so a dashboard can join them with
// DCGM_FI_* series of the same host.
type Metrics struct {
	reg *prometheus.Registry
}

// NewMetrics returns the registry over src.
func NewMetrics(src Sources) *Metrics {
	if src.Logger == nil {
		src.Logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{src: src, log: src.Logger},
	)
	if src.Alerts != nil {
		reg.MustRegister(src.Alerts.vec)
	}
	return &Metrics{reg: reg}
}

// Gatherer is the registry, for tests and linting.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Descriptions of the collector's series.
var (
	runLabels = []string{"run", "job"}
	gpuLabels = []string{"gpu", "UUID", "device", "modelName"}

	descRunStep  = prometheus.NewDesc("trainbot_run_step", "The latest global step of an active run.", runLabels, nil)
	descRunStart = prometheus.NewDesc("trainbot_run_start_time_seconds", "When an active run started, in seconds since the Unix epoch.", runLabels, nil)
	descRunTotal = prometheus.NewDesc("trainbot_run_total_steps", "The total steps of an active run, when its output told.", runLabels, nil)
	descRunRate  = prometheus.NewDesc("trainbot_run_steps_per_second", "An active run's steps per second over about the last minute.", runLabels, nil)
	descMetric   = prometheus.NewDesc("trainbot_run_metric", "The latest value of each metric of an active run (loss, acc, lr, …), as read from its output or event files.",
		[]string{"run", "job", "name"}, nil)
	descRunOn   = prometheus.NewDesc("trainbot_run_host_info", "1 for an active run on another host ([[hosts]]); host is its name.", []string{"run", "job", "host"}, nil)
	descRunGPU  = prometheus.NewDesc("trainbot_run_gpu_memory_bytes", "GPU memory held by an active run's processes.", runLabels, nil)
	descRunHost = prometheus.NewDesc("trainbot_run_host_memory_bytes", "Resident host memory of an active run's process tree.", runLabels, nil)
	descRuns    = prometheus.NewDesc("trainbot_runs_total", "Runs that ended, by job and outcome (from the history: it survives restarts).",
		[]string{"job", "outcome"}, nil)
	descOutbox = prometheus.NewDesc("trainbot_outbox_pending", "Messages stored in the outbox and not delivered yet.", nil, nil)

	descGPUUsed  = prometheus.NewDesc("trainbot_gpu_memory_used_bytes", "GPU memory in use.", gpuLabels, nil)
	descGPUTotal = prometheus.NewDesc("trainbot_gpu_memory_total_bytes", "GPU memory capacity.", gpuLabels, nil)
	descGPUUtil  = prometheus.NewDesc("trainbot_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (0 to 1).", gpuLabels, nil)
	descGPUMemU  = prometheus.NewDesc("trainbot_gpu_memory_utilization_ratio", "Share of the last sample period GPU memory was read or written (0 to 1).", gpuLabels, nil)
	descGPUTemp  = prometheus.NewDesc("trainbot_gpu_temperature_celsius", "GPU temperature.", gpuLabels, nil)
	descGPUPower = prometheus.NewDesc("trainbot_gpu_power_watts", "GPU power draw.", gpuLabels, nil)
	descGPULimit = prometheus.NewDesc("trainbot_gpu_power_limit_watts", "GPU power limit.", gpuLabels, nil)
)

// collector reads the sources at each scrape.
type collector struct {
	src Sources
	log *slog.Logger
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunStep, descRunStart, descRunTotal, descRunRate, descMetric, descRunOn, descRunGPU, descRunHost,
		descRuns, descOutbox, descGPUUsed, descGPUTotal, descGPUUtil, descGPUMemU, descGPUTemp, descGPUPower, descGPULimit} {
		ch <- d
	}
}

// scrapeTimeout bounds the store's queries of one scrape.
const scrapeTimeout = 5 * time.Second

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	jobs := map[int64]string{}
	if c.src.Active != nil {
		for _, st := range c.src.Active() {
			r := st.Run
			id := strconv.FormatInt(r.ID, 10)
			jobs[r.ID] = r.Job
			gauge(descRunStep, float64(st.Progress.Step), id, r.Job)
			gauge(descRunStart, float64(r.StartedAt.UnixNano())/1e9, id, r.Job)
			if st.Progress.TotalSteps > 0 {
				gauge(descRunTotal, float64(st.Progress.TotalSteps), id, r.Job)
			}
			gauge(descRunRate, st.StepsPerSec, id, r.Job)
			if r.Host != "" {
				gauge(descRunOn, 1, id, r.Job, r.Host)
			}
			// The run already bounds its metric names (1000, and 100
			// more losses): so is this series' cardinality.
			for _, m := range st.Last {
				gauge(descMetric, m.Value, id, r.Job, m.Name)
			}
		}
	}
	if c.src.GPU != nil {
		c.collectGPU(ch, c.src.GPU(), jobs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if c.src.EndedRuns != nil {
		counts, err := c.src.EndedRuns(ctx)
		if err != nil {
			c.log.Warn("metrics: count the runs", "err", err)
		}
		for _, n := range counts {
			ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(n.Runs), n.Job, n.Outcome)
		}
	}
	if c.src.OutboxPending != nil {
		if n, err := c.src.OutboxPending(ctx); err != nil {
			c.log.Warn("metrics: count the outbox", "err", err)
		} else {
			gauge(descOutbox, float64(n))
		}
	}
}

// collectGPU writes the devices of a snapshot and the memory of the
// active runs it attributed.
func (c *collector) collectGPU(ch chan<- prometheus.Metric, snap gpu.Snapshot, jobs map[int64]string) {
	gauge := func(d *prometheus.Desc, v float64, labels []string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, d := range snap.Devices {
		l := []string{strconv.Itoa(d.Index), d.UUID, fmt.Sprintf("nvidia%d", d.Index), d.Name}
		gauge(descGPUUsed, float64(d.MemUsed), l)
		gauge(descGPUTotal, float64(d.MemTotal), l)
		if d.Util >= 0 {
			gauge(descGPUUtil, float64(d.Util)/100, l)
		}
		if d.MemUtil >= 0 {
			gauge(descGPUMemU, float64(d.MemUtil)/100, l)
		}
		if d.TempC >= 0 {
			gauge(descGPUTemp, float64(d.TempC), l)
		}
		if d.PowerMilliW > 0 {
			gauge(descGPUPower, float64(d.PowerMilliW)/1000, l)
		}
		if d.PowerLimitMilliW > 0 {
			gauge(descGPULimit, float64(d.PowerLimitMilliW)/1000, l)
		}
	}
	for _, u := range snap.Runs {
		job, ok := jobs[u.RunID]
		if !ok {
			continue // ended since the sample
		}
		l := []string{strconv.FormatInt(u.RunID, 10), job}
		if u.GPUBytes != nil {
			gauge(descRunGPU, float64(*u.GPUBytes), l)
		}
		if u.HostBytes != nil {
			gauge(descRunHost, float64(*u.HostBytes), l)
		}
	}
}

package web

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/web/webtest"
)

func ptr[T any](v T) *T { return &v }

// testSources is one active run, an H100, and a history.
func testSources() Sources {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	alerts := NewAlerts([]string{"oom", "nan"})
	alerts.Inc("oom")
	return Sources{
		Active: func() []trainer.Status {
			return []trainer.Status{{
				Run:         &trainer.Run{ID: 12, Job: "mnist", StartedAt: start},
				Progress:    logparse.Progress{Step: 400, TotalSteps: 1500},
				Last:        []trainer.Metric{{Name: "loss", Value: 0.25}, {Name: "val/acc", Value: 0.9}},
				StepsPerSec: 48.5,
			}}
		},
		GPU: func() gpu.Snapshot {
			return gpu.Snapshot{Available: true, Devices: []gpu.Device{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-5b1c",
				MemUsed: 40 << 30, MemTotal: 80 << 30, Util: 97, MemUtil: 40, TempC: 61, PowerMilliW: 350000, PowerLimitMilliW: 700000}},
				Runs: []gpu.RunUsage{{RunID: 12, GPUBytes: ptr(int64(39 << 30)), HostBytes: ptr(int64(3 << 30))}}}
		},
		EndedRuns: func(context.Context) ([]history.OutcomeCount, error) {
			return []history.OutcomeCount{{Job: "mnist", Outcome: "finished", Runs: 3}, {Job: "mnist", Outcome: "oom", Runs: 1}}, nil
		},
		OutboxPending: func(context.Context) (int64, error) { return 2, nil },
		Alerts:        alerts,
	}
}

func startServer(t *testing.T, o Options) *Server {
	t.Helper()
	o.Listen = "127.0.0.1:0"
	s := New(o)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestMetricsScrape(t *testing.T) {
	m := NewMetrics(testSources())
	s := startServer(t, Options{Metrics: m})
	code, body := webtest.Get(t, "http://"+s.Addr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	fams := webtest.Parse(t, body)
	run := map[string]string{"run": "12", "job": "mnist"}
	dev := map[string]string{"gpu": "0", "UUID": "GPU-5b1c", "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"trainbot_run_step", run, 400},
		{"trainbot_run_total_steps", run, 1500},
		{"trainbot_run_steps_per_second", run, 48.5},
		{"trainbot_run_start_time_seconds", run, float64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix())},
		{"trainbot_run_metric", map[string]string{"run": "12", "job": "mnist", "name": "loss"}, 0.25},
		{"trainbot_run_metric", map[string]string{"name": "val/acc"}, 0.9},
		{"trainbot_run_gpu_memory_bytes", run, 39 << 30},
		{"trainbot_run_host_memory_bytes", run, 3 << 30},
		{"trainbot_runs_total", map[string]string{"job": "mnist", "outcome": "finished"}, 3},
		{"trainbot_runs_total", map[string]string{"job": "mnist", "outcome": "oom"}, 1},
		{"trainbot_alerts_total", map[string]string{"kind": "oom"}, 1},
		{"trainbot_alerts_total", map[string]string{"kind": "nan"}, 0},
		{"trainbot_outbox_pending", nil, 2},
		{"trainbot_gpu_memory_used_bytes", dev, 40 << 30},
		{"trainbot_gpu_memory_total_bytes", dev, 80 << 30},
		{"trainbot_gpu_utilization_ratio", dev, 0.97},
		{"trainbot_gpu_memory_utilization_ratio", dev, 0.40},
		{"trainbot_gpu_temperature_celsius", dev, 61},
		{"trainbot_gpu_power_watts", dev, 350},
		{"trainbot_gpu_power_limit_watts", dev, 700},
	} {
		if got, ok := webtest.Value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %g (found: %v), want %g", c.name, c.labels, got, ok, c.want)
		}
	}
	want := []string{"go_goroutines"}
	if runtime.GOOS == "linux" { // process_* are read from /proc
		want = append(want, "process_resident_memory_bytes")
	}
	for _, name := range want {
		if fams[name] == nil {
			t.Errorf("no %s: the Go or process series are missing", name)
		}
	}
	webtest.Lint(t, body)
	if problems := webtest.Problems(t, body); len(problems) != 7 { // modelName on the 7 GPU families, and nothing else
		t.Errorf("promlint: %d problems, want the 7 of modelName: %v", len(problems), problems)
	}
}

// TestMetricsWithoutGPUOrHistory: a host without NVML and a failing store
// still answer, with what they have.
func TestMetricsWithoutGPUOrHistory(t *testing.T) {
	src := testSources()
	src.GPU = func() gpu.Snapshot { return gpu.Snapshot{Reason: "no NVIDIA driver"} }
	src.EndedRuns = func(context.Context) ([]history.OutcomeCount, error) { return nil, errors.New("disk I/O error") }
	m := NewMetrics(src)
	s := startServer(t, Options{Metrics: m})
	code, body := webtest.Get(t, "http://"+s.Addr()+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `trainbot_run_step{job="mnist",run="12"} 400`) {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	if strings.Contains(body, "trainbot_gpu_") || strings.Contains(body, "trainbot_runs_total") {
		t.Errorf("series of a missing source:\n%s", body)
	}
}

func TestHealthz(t *testing.T) {
	var storeErr error
	s := startServer(t, Options{Checks: []Check{
		{Name: "store", Up: func(context.Context) error { return storeErr }},
		{Name: "transports", Up: func(context.Context) error { return nil }},
	}})
	url := "http://" + s.Addr() + "/healthz"
	if code, body := webtest.Get(t, url); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthy: %d %q, want 200 \"ok\\n\"", code, body)
	}
	storeErr = errors.New("writes fail on /data (disk full or failing)")
	if code, body := webtest.Get(t, url); code != http.StatusServiceUnavailable || body != "store: writes fail on /data (disk full or failing)\n" {
		t.Errorf("store down: %d %q, want 503 and why", code, body)
	}
	if code, _ := webtest.Get(t, "http://"+s.Addr()+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without a registry: %d, want 404", code)
	}
}

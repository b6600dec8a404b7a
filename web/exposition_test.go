package web

import (
	"context"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web/webtest"
)

// scrapeText is one scrape of m, failing the test on what it left out.
func scrapeText(t *testing.T, m *Metrics) string {
	t.Helper()
	b, err := m.text(t.Context())
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return string(b)
}

// TestExpositionParses: Prometheus's own text parser reads every family
// back with its type, and the label values that need escaping (a job
// named with a quote, a backslash and a newline; a metric name that is
// not UTF-8) come back as they went in; promlint finds nothing but
// modelName.
func TestExpositionParses(t *testing.T) {
	const job = "a \"quoted\" \\job\nname"
	src := testSources()
	active := src.Active
	src.Active = func() []trainer.Status {
		st := active()
		st[0].Run.Job = job
		st[0].Run.Host = "gpu-2"
		st[0].Last = append(st[0].Last, trainer.Metric{Name: "grad\xffnorm", Value: math.Inf(+1)}, trainer.Metric{Name: "lr", Value: math.NaN()})
		return st
	}
	src.EndedRuns = func(context.Context) ([]history.OutcomeCount, error) {
		return []history.OutcomeCount{{Job: job, Outcome: "finished", Runs: 3}}, nil
	}
	body := scrapeText(t, NewMetrics(src))
	fams := webtest.Parse(t, body)

	want := map[string]dto.MetricType{"go_gc_duration_seconds": dto.MetricType_SUMMARY, "go_info": dto.MetricType_GAUGE}
	for d := range trainbotDescs() {
		want[d.name] = dto.MetricType_GAUGE
		if d.typ == counterType {
			want[d.name] = dto.MetricType_COUNTER
		}
	}
	for name, typ := range want {
		if f := fams[name]; f == nil {
			t.Errorf("no family %s", name)
		} else if f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
	}
	if f := fams["trainbot_run_step"]; f != nil && f.GetHelp() != descRunStep.help {
		t.Errorf("help %q, want %q", f.GetHelp(), descRunStep.help)
	}
	run := map[string]string{"run": "12", "job": job}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"trainbot_run_step", run, 400},
		{"trainbot_run_host_info", map[string]string{"job": job, "host": "gpu-2"}, 1},
		{"trainbot_run_metric", map[string]string{"job": job, "name": "loss"}, 0.25},
		{"trainbot_run_metric", map[string]string{"name": "grad\uFFFDnorm"}, math.Inf(+1)},
		{"trainbot_runs_total", map[string]string{"job": job, "outcome": "finished"}, 3},
		{"trainbot_run_gpu_memory_bytes", run, 39 << 30},
	} {
		if got, ok := webtest.Value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%q = %g (found: %v), want %g", c.name, c.labels, got, ok, c.want)
		}
	}
	if got, ok := webtest.Value(fams, "trainbot_run_metric", map[string]string{"name": "lr"}); !ok || !math.IsNaN(got) {
		t.Errorf("lr = %g (found: %v), want NaN", got, ok)
	}
	if !strings.Contains(body, `job="a \"quoted\" \\job\nname"`) {
		t.Errorf("the job's label is not escaped as the format says:\n%s", body)
	}
	webtest.Lint(t, body)
}

// trainbotDescs are the families of trainbot's own series.
func trainbotDescs() map[*desc]bool {
	return map[*desc]bool{descRunStep: true, descRunStart: true, descRunTotal: true, descRunRate: true, descMetric: true, descRunOn: true,
		descRunGPU: true, descRunHost: true, descRuns: true, descOutbox: true, descAlerts: true, descGPUUsed: true, descGPUTotal: true,
		descGPUUtil: true, descGPUMemU: true, descGPUTemp: true, descGPUPower: true, descGPULimit: true}
}

// TestExpositionGolden: the families' HELP and TYPE lines, and trainbot's
// own series, are those testdata/metrics.golden holds; it was first
// written by client_golang (v1.25, the commit before our own exposition)
// and the two were byte for byte the same, but for the two
// process_network_* families left out. The process_* families are
// Linux's: TestProcessMetrics checks them. go test ./web -run
// TestExpositionGolden -update rewrites the file.
func TestExpositionGolden(t *testing.T) {
	var kept []string
	for _, line := range strings.SplitAfter(scrapeText(t, NewMetrics(testSources())), "\n") {
		if strings.HasPrefix(line, "trainbot_") || (strings.HasPrefix(line, "# ") && !strings.Contains(line, " process_")) {
			kept = append(kept, line)
		}
	}
	got := strings.Join(kept, "")
	const golden = "testdata/metrics.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the scrape differs from %s (-update rewrites it); got:\n%s", golden, got)
	}
}

func TestFormatFloat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {0.25, "0.25"}, {48.5, "48.5"},
		{1 << 30, "1.073741824e+09"}, {1e21, "1e+21"}, {1.7960832e+09, "1.7960832e+09"}, {5e-324, "5e-324"},
		{math.Inf(+1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := formatFloat(c.v); got != c.want {
			t.Errorf("formatFloat(%g) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestAppendHelpEscapes(t *testing.T) {
	if got, want := string(appendHelp(nil, "a \\ \"b\"\nc")), `a \\ "b"\nc`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestScrapeWritesASeriesOnce: a series collected twice is served once
// (the first) and the scrape says so; the others are all served.
func TestScrapeWritesASeriesOnce(t *testing.T) {
	s := newScrape()
	s.add(descRunStep, 2, "7", "b")
	s.add(descRunStep, 1, "7", "a")
	s.add(descRunStep, 3, "7", "b")
	s.add(descOutbox, 0)
	got := string(s.appendText(nil))
	want := "# HELP trainbot_outbox_pending " + descOutbox.help + "\n# TYPE trainbot_outbox_pending gauge\ntrainbot_outbox_pending 0\n" +
		"# HELP trainbot_run_step " + descRunStep.help + "\n# TYPE trainbot_run_step gauge\n" +
		"trainbot_run_step{job=\"a\",run=\"7\"} 1\ntrainbot_run_step{job=\"b\",run=\"7\"} 2\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if len(s.errs) != 1 || !strings.Contains(s.errs[0].Error(), `trainbot_run_step{job="b",run="7"} collected twice`) {
		t.Errorf("errs %v, want the one series collected twice", s.errs)
	}
}

// TestEmptyFamilyLeftOut: a family without samples has no HELP or TYPE,
// as with client_golang.
func TestEmptyFamilyLeftOut(t *testing.T) {
	body := scrapeText(t, NewMetrics(Sources{}))
	if strings.Contains(body, "trainbot_") {
		t.Errorf("families of sources that are not there:\n%s", body)
	}
	if !strings.Contains(body, "\ngo_goroutines ") {
		t.Errorf("no go_goroutines:\n%s", body)
	}
}

// TestProcessMetrics: the process_* families are there on Linux, with
// plausible values.
func TestProcessMetrics(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process_* are read from /proc")
	}
	fams := webtest.Parse(t, scrapeText(t, NewMetrics(Sources{})))
	value := func(name string, typ dto.MetricType) float64 {
		t.Helper()
		f := fams[name]
		if f == nil || f.GetType() != typ {
			t.Fatalf("%s: %v, want a %v", name, f, typ)
		}
		v, _ := webtest.Value(fams, name, nil)
		return v
	}
	if v := value("process_resident_memory_bytes", dto.MetricType_GAUGE); v <= 0 {
		t.Errorf("resident memory %g, want > 0", v)
	}
	if v := value("process_virtual_memory_bytes", dto.MetricType_GAUGE); v < value("process_resident_memory_bytes", dto.MetricType_GAUGE) {
		t.Errorf("virtual memory %g, want at least the resident", v)
	}
	open, limit := value("process_open_fds", dto.MetricType_GAUGE), value("process_max_fds", dto.MetricType_GAUGE)
	if open <= 0 || limit < open {
		t.Errorf("open fds %g, max %g: want 0 < open <= max", open, limit)
	}
	if v := value("process_virtual_memory_max_bytes", dto.MetricType_GAUGE); v <= 0 {
		t.Errorf("address space limit %g, want > 0", v)
	}
	if v := value("process_cpu_seconds_total", dto.MetricType_COUNTER); v < 0 {
		t.Errorf("cpu %g s, want >= 0", v)
	}
	start := time.Unix(int64(value("process_start_time_seconds", dto.MetricType_GAUGE)), 0)
	if now := time.Now(); start.After(now.Add(time.Second)) || start.Before(now.Add(-24*time.Hour)) {
		t.Errorf("started at %v, want within the last day (now %v)", start, now)
	}
}

// TestAlertsConcurrent: the counter counts every Inc while scrapes read
// it (under -race, it is also race-free).
func TestAlertsConcurrent(t *testing.T) {
	a := NewAlerts([]string{"oom"})
	m := NewMetrics(Sources{Alerts: a})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				a.Inc("oom")
				a.Inc("nan")
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			if _, err := m.text(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	fams := webtest.Parse(t, scrapeText(t, m))
	for kind, want := range map[string]float64{"oom": 400, "nan": 400} {
		if got, _ := webtest.Value(fams, "trainbot_alerts_total", map[string]string{"kind": kind}); got != want {
			t.Errorf("%s: got %g, want %g", kind, got, want)
		}
	}
}

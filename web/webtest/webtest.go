// Package webtest holds what the tests of /metrics share: the scrape, its
// parse with the Prometheus text parser, and its lint with promlint (the
// rules of `promtool check metrics`).
package webtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Get fetches url and returns its status and body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Parse reads a scrape with the Prometheus text parser; it fails the test
// when the parser refuses it.
func Parse(t testing.TB, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the text parser refuses the scrape: %v\n%s", err, body)
	}
	return fams
}

// Value finds the sample of a family whose labels include want; ok is
// false when there is none.
func Value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
next:
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// Problems are promlint's problems of a scrape (the rules of `promtool
// check metrics`).
func Problems(t testing.TB, body string) []promlint.Problem {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint refuses the scrape: %v", err)
	}
	return problems
}

// Lint fails the test on every promlint problem of a scrape but one: the
// GPU series carry dcgm-exporter's label modelName, which promlint would
// have in snake_case. It is kept as dcgm-exporter spells it, so that a
// dashboard joins both on the same labels.
func Lint(t testing.TB, body string) {
	t.Helper()
	for _, p := range Problems(t, body) {
		if strings.HasPrefix(p.Metric, "trainbot_gpu_") && strings.Contains(p.Text, "snake_case") {
			continue
		}
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

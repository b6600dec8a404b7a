package web

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/trainbot/trainbot/web/webtest"
)

// TestGrafanaDashboard: contrib/grafana-dashboard.json is JSON whose
// queries name only series /metrics serves, and it has the panels the
// issue asks for (loss, step rate, GPU memory per run).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../contrib/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	text, err := NewMetrics(testSources()).text(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for name := range webtest.Parse(t, string(text)) {
		served[name] = true
	}
	name := regexp.MustCompile(`trainbot_[a-z_]+`)
	titles := map[string]bool{}
	for _, p := range d.Panels {
		titles[p.Title] = true
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if !served[n] {
					t.Errorf("panel %q queries %s, which /metrics does not serve", p.Title, n)
				}
			}
		}
	}
	for _, want := range []string{"Loss", "Step rate", "GPU memory per run"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

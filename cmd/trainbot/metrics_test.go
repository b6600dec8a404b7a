package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/web/webtest"
)

// TestMetricsDuringARun is the acceptance of /metrics: a console with
// [http] listen starts a real run (a Python script printing step and
// loss); /metrics, scraped while it runs and read with the Prometheus
// text parser, has its step and loss, passes promlint, and /healthz is
// 200.
func TestMetricsDuringARun(t *testing.T) {
	cfgPath, data := writeStepsJob(t, 200, 25*time.Millisecond)
	withHTTP(t, cfgPath)
	in, typed := io.Pipe()
	defer typed.Close()
	e, stdout, stderr := testEnv(t, in)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"console", "--config", cfgPath}, e) }()
	if _, err := io.WriteString(typed, "开始\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stdout, 0, `run #1 started`)

	// The terminal chat logs to DATA/trainbot.log: the port is there.
	addr := httpAddr(t, data, 0)

	// Scrape until the run has a loss and is past step 20 (it prints for ~5 s).
	var body string
	var step, loss float64
	var scrape time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		began := time.Now()
		code, b := webtest.Get(t, "http://"+addr+"/metrics")
		scrape = time.Since(began)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d\n%s", code, b)
		}
		fams := webtest.Parse(t, b)
		var ok1, ok2 bool
		step, ok1 = webtest.Value(fams, "trainbot_run_step", map[string]string{"run": "1", "job": "steps"})
		loss, ok2 = webtest.Value(fams, "trainbot_run_metric", map[string]string{"run": "1", "job": "steps", "name": "loss"})
		body = b
		if ok1 && ok2 && step >= 20 {
			break
		}
	}
	if step < 20 || step >= 200 {
		t.Fatalf("trainbot_run_step = %g, want a step of the running run (20..199):\n%s", step, body)
	}
	// The script prints loss = 1/step; the scrape may fall between the
	// step's point and the loss's, so allow one step either way.
	if want := 1 / step; loss > 1/(step-1) || loss < 1/(step+1) {
		t.Errorf("loss = %g at step %g, want about %g", loss, step, want)
	}
	t.Logf("scrape of a live run: %d bytes in %s", len(body), scrape)
	for _, name := range []string{"trainbot_run_start_time_seconds", "trainbot_outbox_pending", "trainbot_alerts_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("no %s in the scrape", name)
		}
	}
	webtest.Lint(t, body)
	if code, b := webtest.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK || b != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, b)
	}

	// The run's page, through `trainbot link 1`: 200 with its link, 401
	// without a token; its points API has the loss.
	le, lout, lerr := testEnv(t, strings.NewReader(""))
	if code := run(ctx, []string{"link", "1", "--config", cfgPath}, le); code != exitOK {
		t.Fatalf("trainbot link 1: exit %d: %s", code, lerr.String())
	}
	link := strings.TrimSpace(lout.String())
	const prefix = "http://127.0.0.1:0/runs/1?t=" // listen is 127.0.0.1:0 in the config
	if !strings.HasPrefix(link, prefix) {
		t.Fatalf("trainbot link 1 printed %q, want %s…", link, prefix)
	}
	tok := strings.TrimPrefix(link, prefix)
	if code, b := webtest.Get(t, "http://"+addr+"/runs/1?t="+tok); code != http.StatusOK || !strings.Contains(b, "#1 steps") {
		t.Errorf("the run's page with its link: %d\n%s", code, b)
	}
	if code, _ := webtest.Get(t, "http://"+addr+"/runs/1"); code != http.StatusUnauthorized {
		t.Errorf("the run's page without a token: %d, want 401", code)
	}
	if code, b := webtest.Get(t, "http://"+addr+"/api/runs/1/points?metric=loss&width=100&t="+tok); code != http.StatusOK || !strings.Contains(b, `"x":[`) {
		t.Errorf("the run's loss points: %d %s", code, b)
	}

	// End of input: the run goes on to its end; then it is counted.
	typed.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the console did not end")
	}
}

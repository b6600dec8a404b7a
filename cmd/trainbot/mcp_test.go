package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/store"
)

// mcpServer starts `trainbot mcp --config cfg` (this test binary playing
// trainbot) and connects the SDK's own client to it over stdio.
func mcpServer(t *testing.T, ctx context.Context, cfg string) *mcp.ClientSession {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "mcp", "--config", cfg)
	cmd.Env = append(os.Environ(), "TRAINBOT_TEST_MAIN=1", "HOME="+t.TempDir())
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "trainbot-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to trainbot mcp: %v", err)
	}
	return s
}

// call calls a tool and decodes its JSON text into out (when not nil); it
// returns the text and whether it was a tool error.
func call(t *testing.T, ctx context.Context, s *mcp.ClientSession, name string, args any, out any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if out != nil && !res.IsError {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s: %v in %s", name, err, text)
		}
	}
	return text, res.IsError
}

func toolNames(t *testing.T, ctx context.Context, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// The acceptance test of #37: an agent starts a run, reads its points
// while it runs, stops it; a server without allow_control refuses to
// start; the audit has every call.
func TestMCPStartWatchStop(t *testing.T) {
	data, writeCfg := mcpConfigs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s := mcpServer(t, ctx, writeCfg("control.toml", "[mcp]\nallow_control = true\n"))
	names := toolNames(t, ctx, s)
	for _, want := range []string{"list_jobs", "list_runs", "run_status", "run_points", "run_log", "compare_runs", "fit_batch", "gpu_status", "start_run", "stop_run", "queue_run"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	var jobs struct {
		Jobs []struct {
			Name   string
			Params map[string]struct{ Type string }
		}
	}
	call(t, ctx, s, "list_jobs", nil, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "short" || jobs.Jobs[0].Params["steps"].Type != "int" {
		t.Errorf("list_jobs = %+v", jobs)
	}
	// A bad parameter: the chat's words, as a tool error.
	if text, isErr := call(t, ctx, s, "start_run", map[string]any{"job": "short", "params": map[string]string{"steps": "many"}}, nil); !isErr || !strings.Contains(text, "Not started") || !strings.Contains(text, "steps") {
		t.Errorf("start with steps=many: error %v, %q", isErr, text)
	}
	var started struct{ Run int64 }
	if text, isErr := call(t, ctx, s, "start_run", map[string]any{"job": "short", "params": map[string]string{"steps": "2000"}}, &started); isErr || started.Run == 0 {
		t.Fatalf("start_run: error %v, %s", isErr, text)
	}
	run := started.Run
	// The job's lock: a second start is refused with what is running.
	if text, isErr := call(t, ctx, s, "start_run", map[string]any{"job": "short"}, nil); !isErr || !strings.Contains(text, "already running") || !strings.Contains(text, "queue_run") {
		t.Errorf("second start: error %v, %q", isErr, text)
	}
	// Its points while it runs.
	var points struct {
		X []int64
		Y []float64
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		call(t, ctx, s, "run_points", map[string]any{"run": run, "metric": "loss", "max_points": 100}, &points)
		if len(points.X) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no points of run #%d after 30 s: %+v", run, points)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var status struct {
		ID      int64
		Active  bool
		Step    int64
		Metrics map[string]*float64
	}
	const calls = 50
	var slowest time.Duration
	t0 := time.Now()
	for range calls {
		t1 := time.Now()
		call(t, ctx, s, "run_status", map[string]any{"run": run}, &status)
		slowest = max(slowest, time.Since(t1))
	}
	t.Logf("run_status over stdio: %v a call on average, slowest %v", time.Since(t0)/calls, slowest)
	if status.ID != run || !status.Active || status.Step == 0 || status.Metrics["loss"] == nil {
		t.Errorf("run_status = %+v", status)
	}
	var log struct{ Lines []string }
	call(t, ctx, s, "run_log", map[string]any{"run": run, "lines": 3}, &log)
	if len(log.Lines) == 0 || !strings.Contains(log.Lines[len(log.Lines)-1], "step=") {
		t.Errorf("run_log = %q", log.Lines)
	}
	var stopped struct{ Stopping bool }
	if text, isErr := call(t, ctx, s, "stop_run", map[string]any{"run": run}, &stopped); isErr || !stopped.Stopping {
		t.Fatalf("stop_run: error %v, %s", isErr, text)
	}
	var ended struct{ State, Outcome string }
	deadline = time.Now().Add(30 * time.Second)
	for call(t, ctx, s, "run_status", map[string]any{"run": run}, &ended); ended.State != "ended"; call(t, ctx, s, "run_status", map[string]any{"run": run}, &ended) {
		if time.Now().After(deadline) {
			t.Fatalf("run #%d not ended 30 s after stop_run: %+v", run, ended)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ended.Outcome != "stopped" {
		t.Errorf("outcome %q, want stopped", ended.Outcome)
	}
	var runs struct{ Runs []struct{ ID int64 } }
	call(t, ctx, s, "list_runs", map[string]any{"job": "short", "state": "ended"}, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run {
		t.Errorf("list_runs = %+v", runs)
	}
	var cmp struct{ Runs []struct{ Last *float64 } }
	if text, isErr := call(t, ctx, s, "compare_runs", map[string]any{"runs": []int64{run, run}}, &cmp); isErr || len(cmp.Runs) != 2 || cmp.Runs[0].Last == nil {
		t.Errorf("compare_runs: error %v, %s", isErr, text)
	}
	// The run's loss chart as a resource: a PNG.
	rr, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("trainbot://runs/%d/loss.png", run)})
	if err != nil || len(rr.Contents) != 1 || !bytes.HasPrefix(rr.Contents[0].Blob, []byte("\x89PNG")) || rr.Contents[0].MIMEType != "image/png" {
		t.Errorf("the loss chart resource: %v %+v", err, rr)
	}
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("trainbot://runs/%d/nope.png", run)}); err == nil {
		t.Error("a chart of no such kind was read")
	}
	// No batch parameter and no memory samples: no answer, said why.
	if text, isErr := call(t, ctx, s, "fit_batch", map[string]any{"job": "short"}, nil); !isErr || text == "" {
		t.Errorf("fit_batch: error %v, %q", isErr, text)
	} else {
		t.Logf("fit_batch: %s", text)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// Without allow_control: not listed, and refused with how to allow it.
	s = mcpServer(t, ctx, writeCfg("read.toml", ""))
	if names := toolNames(t, ctx, s); slices.Contains(names, "start_run") || !slices.Contains(names, "run_status") {
		t.Errorf("tools without allow_control: %v", names)
	}
	if text, isErr := call(t, ctx, s, "start_run", map[string]any{"job": "short"}, nil); !isErr || !strings.Contains(text, "allow_control = true") {
		t.Errorf("start_run without allow_control: error %v, %q", isErr, text)
	}
	call(t, ctx, s, "list_runs", nil, &runs)
	if len(runs.Runs) != 1 {
		t.Errorf("list_runs of the second server = %+v", runs)
	}
	s.Close()

	// The audit has every call, as messenger mcp.
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entries, err := st.AuditLog(ctx, history.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var refused, startedRun, stoppedRun bool
	for _, e := range entries {
		if e.Transport != "mcp" {
			t.Errorf("audit entry of %q: %+v", e.Transport, e)
		}
		count[e.Command]++
		switch {
		case e.Command == "start_run" && !e.Allowed:
			refused = strings.Contains(e.Reason, "allow_control")
		case e.Command == "start_run" && e.Run == run && strings.Contains(e.Text, "2000"):
			startedRun = true
		case e.Command == "stop_run" && e.Run == run && e.Allowed:
			stoppedRun = true
		}
	}
	if !refused || !startedRun || !stoppedRun {
		t.Errorf("audit: refused %v, started %v, stopped %v:\n%+v", refused, startedRun, stoppedRun, entries)
	}
	if count["start_run"] != 4 || count["list_jobs"] != 1 || count["run_log"] != 1 || count["list_runs"] != 2 || count["stop_run"] != 1 || count["run_points"] == 0 || count["run_status"] < calls+1 {
		t.Errorf("audit counts %v", count)
	}
}

// mcpConfigs returns a data directory and a function that writes a config
// of it with a short job and extra.
func mcpConfigs(t *testing.T) (string, func(name, extra string) string) {
	data := t.TempDir()
	const job = `
[[jobs]]
name = "short"
command = ["sh", "-c", "i=0; while [ $i -lt {steps} ]; do i=$((i+1)); echo \"step=$i loss=0.$((1000-i))\"; sleep 0.05; done"]
stop_grace = "5s"
[jobs.params.steps]
type = "int"
default = 2000
max = 100000
`
	return data, func(name, extra string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte("data_dir = "+strconv.Quote(data)+"\n"+extra+job), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// The agent leaving does not end its runs: the next trainbot re-attaches
// them, and stops them when told.
func TestMCPLeavesRunsRunning(t *testing.T) {
	_, writeCfg := mcpConfigs(t)
	cfg := writeCfg("control.toml", "[mcp]\nallow_control = true\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := mcpServer(t, ctx, cfg)
	var started struct {
		Run int64
		PID int
	}
	if text, isErr := call(t, ctx, s, "start_run", map[string]any{"job": "short"}, &started); isErr || started.Run == 0 {
		t.Fatalf("start_run: error %v, %s", isErr, text)
	}
	t0 := time.Now()
	s.Close()
	t.Logf("the server left in %v", time.Since(t0))

	s = mcpServer(t, ctx, cfg)
	defer s.Close()
	var status struct {
		Active bool
		State  string
		Step   int64
	}
	deadline := time.Now().Add(30 * time.Second)
	for call(t, ctx, s, "run_status", map[string]any{"run": started.Run}, &status); !status.Active || status.Step == 0; call(t, ctx, s, "run_status", map[string]any{"run": started.Run}, &status) {
		if time.Now().After(deadline) {
			t.Fatalf("run #%d not re-attached: %+v", started.Run, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status.State != "running" {
		t.Errorf("re-attached run: %+v", status)
	}
	var queued struct{ Queued, Position int64 }
	if text, isErr := call(t, ctx, s, "queue_run", map[string]any{"job": "short", "params": map[string]string{"steps": "3"}}, &queued); isErr || queued.Queued == 0 || queued.Position != 1 {
		t.Fatalf("queue_run: error %v, %s", isErr, text)
	}
	if text, isErr := call(t, ctx, s, "stop_run", nil, nil); isErr {
		t.Fatalf("stop_run of the active run: %s", text)
	}
	var ended struct{ State, Outcome string }
	for call(t, ctx, s, "run_status", map[string]any{"run": started.Run}, &ended); ended.State != "ended"; call(t, ctx, s, "run_status", map[string]any{"run": started.Run}, &ended) {
		if time.Now().After(deadline) {
			t.Fatalf("run #%d not ended after stop_run: %+v", started.Run, ended)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ended.Outcome != "stopped" {
		t.Errorf("outcome %q, want stopped", ended.Outcome)
	}
	// The queued start runs once the job is free, and finishes.
	var runs struct {
		Runs []struct {
			ID      int64
			Outcome string
			Params  map[string]string
		}
	}
	for call(t, ctx, s, "list_runs", map[string]any{"state": "ended"}, &runs); len(runs.Runs) < 2; call(t, ctx, s, "list_runs", map[string]any{"state": "ended"}, &runs) {
		if time.Now().After(deadline) {
			t.Fatalf("the queued run did not run: %+v", runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := runs.Runs[0]; r.Outcome != "finished" || r.Params["steps"] != "3" {
		t.Errorf("the queued run: %+v", r)
	}
}

// trainbot mcp --http: the same server over streamable HTTP on loopback,
// guarded by the pages' token of the runs list; without one, 401.
func TestMCPOverHTTP(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir = %q\n[[jobs]]\nname = \"short\"\ncommand = [\"true\"]\n", filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	e, _, errOut := testEnv(t, strings.NewReader(""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- run(sctx, []string{"mcp", "--config", cfg, "--http", "127.0.0.1:0"}, e) }()
	line, _ := waitFor(t, errOut, 0, `serving MCP \(streamable HTTP\) on http://127\.0\.0\.1:\d+/mcp\?t=\S+`)
	url := line[strings.Index(line, "http://"):]
	client := mcp.NewClient(&mcp.Implementation{Name: "trainbot-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	var jobs struct{ Jobs []struct{ Name string } }
	if text, isErr := call(t, ctx, s, "list_jobs", nil, &jobs); isErr || len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "short" {
		t.Errorf("list_jobs over HTTP: %v %s", isErr, text)
	}
	s.Close()
	bare := url[:strings.Index(url, "?")]
	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: bare, MaxRetries: -1}, nil); err == nil {
		t.Error("connected without a token")
	}
	resp, err := http.Post(bare, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without a token: %d, want 401", resp.StatusCode)
	}
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("trainbot mcp --http did not stop")
	}
}

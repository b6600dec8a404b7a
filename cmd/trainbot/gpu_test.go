package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// runTrainbot runs a trainbot command in-process.
func runTrainbot(t *testing.T, stdin string, environ []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, environ: environ})
	return out.String(), errb.String(), code
}

// nvmlHere reports whether this machine has a working NVML.
func nvmlHere() bool {
	b, err := gpu.Open()
	b.Close()
	return err == nil
}

func TestGPUCommandWithoutGPU(t *testing.T) {
	if nvmlHere() {
		t.Skip("this machine has an NVIDIA driver")
	}
	out, errOut, code := runTrainbot(t, "", nil, "gpu", "--data", filepath.Join(t.TempDir(), "none"))
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "No NVIDIA GPU: ") || !strings.HasPrefix(lines[1], "host memory ") {
		t.Errorf("output:\n%s", out)
	}

	out, _, code = runTrainbot(t, "", nil, "gpu", "--json", "--data", filepath.Join(t.TempDir(), "none"))
	if code != exitOK {
		t.Fatalf("--json exit %d", code)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, k := range []string{"available", "reason", "driver_version", "sampled_at", "devices", "processes", "host", "runs", "error"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	var j gpu.JSON
	json.Unmarshal([]byte(out), &j)
	if j.Available || j.Reason == "" || j.Devices == nil || len(j.Devices) != 0 ||
		j.Host.MemoryTotalBytes == 0 || j.Host.MemoryUsedBytes == 0 {
		t.Errorf("json = %+v", j)
	}
}

func TestGPUCommandBadArgument(t *testing.T) {
	_, errOut, code := runTrainbot(t, "", nil, "gpu", "now")
	if code != exitUsage || !strings.Contains(errOut, `unexpected argument "now"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// startGroup starts `sh -c script` in its own process group, as a run.
func startGroup(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd.Process.Pid
}

func TestGPUCommandAttributesRunningRuns(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pid := startGroup(t, "sleep 60 & wait")
	live, err := st.CreateRun(ctx, &trainer.Run{Job: "train", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, PID: pid, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// A run a dead trainbot left "running" whose PID now belongs to a newer process.
	stalePID := startGroup(t, "sleep 60")
	if _, err := st.CreateRun(ctx, &trainer.Run{Job: "old", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, PID: stalePID, StartedAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Wait until the shell has forked its child, so the tree has two processes.
	deadline := time.Now().Add(10 * time.Second)
	var j gpu.JSON
	for {
		out, errOut, code := runTrainbot(t, "", nil, "gpu", "--json", "--data", dir)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		j = gpu.JSON{}
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatal(err)
		}
		if len(j.Runs) == 1 && j.Runs[0].Processes == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling for the shell's child
	}
	if len(j.Runs) != 1 {
		t.Fatalf("runs = %+v, want only run %d", j.Runs, live)
	}
	r := j.Runs[0]
	if r.RunID != live || r.PID != pid || r.HostMemBytes == nil || *r.HostMemBytes <= 0 || r.Processes != 2 || r.Devices == nil {
		t.Errorf("run = %+v", r)
	}
	if !j.Available && r.GPUMemBytes != nil {
		t.Errorf("gpu_mem_bytes = %d without a GPU, want null", *r.GPUMemBytes)
	}

	out, _, _ := runTrainbot(t, "", nil, "gpu", "--data", dir)
	if !strings.Contains(out, "run #1 (pid ") || !strings.Contains(out, "in 2 processes") {
		t.Errorf("table:\n%s", out)
	}
}

// The bot samples while a run runs: 显卡 shows the run, and the run keeps
// its peak host memory (and its GPU peak: null without a GPU).
func TestConsoleSamplesRunMemory(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	os.WriteFile(cfg, []byte(`
[gpu]
interval = "100ms"

[[jobs]]
name = "toy"
command = ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo \"step $i loss=0.5\"; sleep 0.1; done"]
`), 0o644)
	data := filepath.Join(dir, "data")
	out, errOut, code := runTrainbot(t, "开始\n显卡\n", nil, "console", "--config", cfg, "--data", data)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	noGPU := !nvmlHere()
	if noGPU && !strings.Contains(out, "No NVIDIA GPU: ") {
		t.Errorf("显卡 did not say there is no GPU:\n%s", out)
	}
	if !strings.Contains(out, "host memory ") || !strings.Contains(out, "run #1 (pid ") {
		t.Errorf("显卡 reply lacks the host memory or the run:\n%s", out)
	}

	out, _, code = runTrainbot(t, "", nil, "runs", "show", "1", "--json", "--data", data)
	if code != exitOK {
		t.Fatalf("runs show: exit %d", code)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	host, ok := r["peak_host_mem_bytes"].(float64)
	if !ok || host <= 0 {
		t.Errorf("peak_host_mem_bytes = %v", r["peak_host_mem_bytes"])
	}
	if g, present := r["peak_gpu_mem_bytes"]; !present || (noGPU && g != nil) {
		t.Errorf("peak_gpu_mem_bytes = %v (present %v), want null without a GPU", g, present)
	}

	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	series, err := st.RunMemorySeries(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) == 0 || series[0].HostBytes == nil || (noGPU && series[0].GPUBytes != nil) {
		t.Errorf("run memory series = %d rows, first %+v", len(series), series)
	}
}

// idle_held reaches the monitor only when turned on; the JSON has each
// holder's user, command and utilisation.
func TestGPUSharingWiring(t *testing.T) {
	c := config.DefaultGPUConfig()
	if th := gpuThresholds(c); th.IdleFor != 0 || th.MemoryPercent != 95 || th.TempC != 85 {
		t.Errorf("default thresholds = %+v, want idle_held off", th)
	}
	c.IdleHeld = true
	if th := gpuThresholds(c); th.IdleFor != 30*time.Minute || th.IdleMemory != 1<<30 {
		t.Errorf("idle_held thresholds = %+v", th)
	}
	snap := gpu.Snapshot{Available: true, Processes: []gpu.Process{
		{PID: 5, Device: 0, UID: 1001, User: "bob", Command: "python eval.py", Util: 0},
		{PID: 6, Device: 0, UID: -1, Util: -1},
	}}
	out, err := json.Marshal(gpu.ToJSON(snap, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"uid":1001,"user":"bob","command":"python eval.py","utilization_percent":0`,
		`"uid":null,"user":"","command":"","utilization_percent":null`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("json lacks %s:\n%s", want, out)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// torchPython finds a Python that can import torch (Debian's python3-torch
// installs into /usr/bin/python3), or skips the test.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import torch").Run() == nil {
			return path
		}
	}
	t.Skip("no Python with torch here: install python3-torch (Debian) to run the PyTorch supervision tests")
	return ""
}

func writeTorchConfig(t *testing.T, py string) (cfgPath, data string) {
	t.Helper()
	dir := t.TempDir()
	script, err := filepath.Abs(filepath.Join("testdata", "torch_train.py"))
	if err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	cfgPath = filepath.Join(dir, "torch.toml")
	cfg := `data_dir = "` + data + `"
[[jobs]]
name = "torch"
command = ["` + py + `", "` + script + `", "--epochs", "{epochs}", "--steps", "50", "--step-sleep", "{sleep}", "--alloc-gib", "{alloc_gib}"]
stop_grace = "20s"
[jobs.params.epochs]
type = "int"
default = 2
[jobs.params.sleep]
type = "float"
default = 0.0
[jobs.params.alloc_gib]
type = "float"
default = 0
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, data
}

func runJSONOf(t *testing.T, data string, id string) map[string]any {
	t.Helper()
	code, out, stderr := trainbot(t, "", "runs", "show", id, "--json", "--data", data)
	if code != 0 {
		t.Fatalf("runs show: %d %s", code, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTorchScriptStartWatchStop supervises a real PyTorch training through
// the chat: 开始, loss points arrive, 停止 lets it save a checkpoint.
func TestTorchScriptStartWatchStop(t *testing.T) {
	py := torchPython(t)
	cfgPath, data := writeTorchConfig(t, py)
	began := time.Now()
	pr, pw := io.Pipe()
	e, out, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), []string{"console", "--config", cfgPath}, e) }()
	say := func(s string) { io.WriteString(pw, s+"\n") }
	say("开始 epochs=1000 sleep=0.01")
	_, pos := waitFor(t, out, 0, `run #1 started: torch`)
	var status string
	for i := 0; i < 300; i++ {
		say("状态")
		status, pos = waitFor(t, out, pos, `run #1 · torch · running[^\n]*\n[^\n]*\n`)
		if strings.Contains(status, "step") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(status, "/50000") {
		t.Fatalf("status %q has no step out of 50000", status)
	}
	say("停止")
	_, pos = waitFor(t, out, pos, `stopping run #1`)
	waitFor(t, out, pos, `run #1 \(torch\) stopped by`)
	pw.Close()
	if code := <-done; code != 0 {
		t.Fatalf("console exited %d: %s", code, errOut.String())
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "stopped" || r["exit_code"] != 130.0 || r["steps"].(float64) < 5 {
		t.Fatalf("got %v exit %v steps %v (%v), want stopped 130", r["outcome"], r["exit_code"], r["steps"], r["detail"])
	}
	if _, ok := r["last"].(map[string]any)["loss"]; !ok {
		t.Fatalf("no loss recorded: %v", r["last"])
	}
	if _, err := os.Stat(filepath.Join(data, "runs", "1", "checkpoint.pt")); err != nil {
		t.Errorf("the script did not save its checkpoint on SIGINT: %v", err)
	}
	t.Logf("PyTorch start/watch/stop took %s", time.Since(began).Round(time.Millisecond))
}

// TestTorchAllocatorFailureIsOOM provokes a real allocation failure in
// PyTorch's CPU allocator under an address-space limit.
func TestTorchAllocatorFailureIsOOM(t *testing.T) {
	py := torchPython(t)
	cfgPath, data := writeTorchConfig(t, py)
	began := time.Now()
	code, out, stderr := trainbot(t, "开始 alloc_gib=8\n", "console", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("console exited %d: %s", code, stderr)
	}
	if !strings.Contains(out, "run #1 (torch) ran out of memory") {
		t.Fatalf("no OOM report:\n%s", out)
	}
	r := runJSONOf(t, data, "1")
	detail, _ := r["detail"].(string)
	if r["outcome"] != "oom" || !strings.Contains(detail, "8589934592 bytes") || !strings.Contains(detail, "host memory") {
		t.Fatalf("got %v %q, want oom naming 8589934592 bytes", r["outcome"], detail)
	}
	t.Logf("PyTorch OOM case took %s", time.Since(began).Round(time.Millisecond))
}

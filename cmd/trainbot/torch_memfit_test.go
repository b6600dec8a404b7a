package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/historytest"
)

// writeMemoryConfig is a job running testdata/torch_memory.py with the
// glibc setting that makes its resident memory follow the batch.
func writeMemoryConfig(t *testing.T, py string) (cfgPath, data string) {
	t.Helper()
	dir := t.TempDir()
	script, err := filepath.Abs(filepath.Join("testdata", "torch_memory.py"))
	if err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	cfgPath = filepath.Join(dir, "memory.toml")
	cfg := `data_dir = "` + data + `"
[[jobs]]
name = "mem"
command = ["` + py + `", "` + script + `", "--batch-size", "{batch_size}", "--ckpt", "{ckpt}"]
env = { MALLOC_MMAP_THRESHOLD_ = "65536" }
[jobs.params.batch_size]
type = "int"
default = 256
min = 1
[jobs.params.ckpt]
type = "int"
default = 0
choices = ["0", "1"]
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, data
}

// TestTorchMemoryFit is issue 18's acceptance: a real PyTorch CPU script
// whose activations scale with the batch runs at three batch sizes; the
// peaks trainbot records are the kernel's high-water marks, `trainbot fit`
// finds a line through them (R² ≥ 0.95) and the largest batch under a host
// limit set for the test; a gradient-checkpointing run at the largest
// batch gives identical losses (the comparison says so) and a memory
// overlay with both runs' peaks.
func TestTorchMemoryFit(t *testing.T) {
	py := torchPython(t)
	cfgPath, data := writeMemoryConfig(t, py)
	began := time.Now()
	batches := []int{256, 512, 1024}
	peaks := map[int]int64{}
	for i, bs := range batches {
		code, out, stderr := trainbot(t, "开始 batch_size="+strconv.Itoa(bs)+"\n", "console", "--config", cfgPath)
		if code != 0 || !strings.Contains(out, "finished") {
			t.Fatalf("batch %d: console exited %d:\n%s\n%s", bs, code, out, stderr)
		}
		r := runJSONOf(t, data, strconv.Itoa(i+1))
		peak, _ := r["peak_host_mem_bytes"].(float64)
		if r["outcome"] != "finished" || peak <= 0 {
			t.Fatalf("run %d: outcome %v, peak %v", i+1, r["outcome"], r["peak_host_mem_bytes"])
		}
		if how := r["peak_host_how"]; how != "main" && how != "tree-sum" {
			t.Errorf("run %d: peak measured as %q, want a high-water mark", i+1, how)
		}
		peaks[bs] = int64(peak)
		if mem, _ := r["last"].(map[string]any)["memory"].(float64); mem < 1<<20 {
			t.Errorf("run %d: the script's own \"Memory: … MB\" line gave memory=%v, want bytes", i+1, mem)
		}
	}
	t.Logf("peaks: %v", peaks)
	if !(peaks[256] < peaks[512] && peaks[512] < peaks[1024]) {
		t.Fatalf("peaks %v do not grow with the batch", peaks)
	}

	// A host limit such that 90 % of it is the peak at 1024 plus one more
	// step of 512: the fit must answer about 1536.
	step := peaks[1024] - peaks[512]
	limit := int64(float64(peaks[1024]+step) / 0.9)
	code, out, stderr := trainbot(t, "", "fit", "mem", "--json", "--limit", strconv.FormatInt(limit, 10), "--data", data)
	if code != 0 {
		t.Fatalf("fit exited %d: %s %s", code, out, stderr)
	}
	var fit map[string]any
	if err := json.Unmarshal([]byte(out), &fit); err != nil {
		t.Fatalf("fit --json: %v\n%s", err, out)
	}
	want := []string{"a_bytes", "b_bytes_per_unit", "capped_by", "extrapolation", "job", "largest_tried", "limit_bytes", "line_max_fit", "max_fit", "param", "param_max", "r2", "runs"}
	var got []string
	for k := range fit {
		got = append(got, k)
	}
	if strings.Join(sortStrings(got), ",") != strings.Join(want, ",") {
		t.Errorf("fit --json fields %v, want %v", sortStrings(got), want)
	}
	r2, _ := fit["r2"].(float64)
	maxFit, _ := fit["max_fit"].(float64)
	t.Logf("fit: %s", strings.TrimSpace(out))
	if fit["job"] != "mem" || fit["param"] != "batch_size" || fit["limit_bytes"] != float64(limit) || len(fit["runs"].([]any)) != 3 {
		t.Errorf("fit = %v", fit)
	}
	if r2 < 0.95 {
		t.Errorf("R² %.4f, want at least 0.95", r2)
	}
	if math.Abs(maxFit-1536) > 1536*0.15 {
		t.Errorf("max_fit %v, want about 1536 (90%% of the limit is the peak at 1024 plus one step of 512)", maxFit)
	}
	a, _ := fit["a_bytes"].(float64)
	b, _ := fit["b_bytes_per_unit"].(float64)
	if pred := a + b*maxFit; pred > 0.9*float64(limit) || a+b*(maxFit+1) <= 0.9*float64(limit) {
		t.Errorf("max_fit %v is not the largest batch predicted under 90%% of the limit (a %.0f, b %.0f)", maxFit, a, b)
	}
	code, text, _ := trainbot(t, "", "fit", "mem", "--limit", strconv.FormatInt(limit, 10), "--data", data)
	if code != 0 || !regexp.MustCompile(`batch_size=\d+ should fit: predicted [0-9.]+ MiB of [0-9.]+ MiB, from runs #1 #2 #3`).MatchString(text) {
		t.Errorf("fit text (%d):\n%s", code, text)
	}

	// Gradient checkpointing at the largest batch: the same losses, less
	// memory.
	code, out, stderr = trainbot(t, "开始 batch_size=1024 ckpt=1\n", "console", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "finished") {
		t.Fatalf("ckpt run: console exited %d:\n%s\n%s", code, out, stderr)
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "cmp.png")
	code, out, stderr = trainbot(t, "", "compare", "3", "4", "--data", data, "-o", png)
	if code != 0 {
		t.Fatalf("compare exited %d: %s", code, stderr)
	}
	t.Logf("compare:\n%s", out)
	if !strings.Contains(out, "identical point for point (drawn dashed): #4 = #3") {
		t.Errorf("the loss overlay does not say the curves are identical:\n%s", out)
	}
	if !regexp.MustCompile(`memory of runs #3, #4 · peaks #3 [0-9.]+ MiB, #4 [0-9.]+ MiB`).MatchString(out) {
		t.Errorf("the memory overlay does not mark both peaks:\n%s", out)
	}
	for _, f := range []string{png, filepath.Join(dir, "cmp-memory.png")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		historytest.DecodePNG(t, b)
	}
	r4 := runJSONOf(t, data, "4")
	if p4, _ := r4["peak_host_mem_bytes"].(float64); int64(p4) >= peaks[1024] {
		t.Errorf("checkpointing did not lower the peak: %v, without %d", p4, peaks[1024])
	}
	t.Logf("PyTorch memory fit took %s", time.Since(began).Round(time.Millisecond))
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

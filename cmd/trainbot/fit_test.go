package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// plainPython is a python3 executable itself (not a pyenv shim, whose
// peak would be a shell's), or the test is skipped.
func plainPython(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	out, err := exec.Command(path, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3 does not run: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Issue 31 item 5: runs at batch 64/256/1024 whose peaks are a line that
// reaches far past any sensible batch. `trainbot fit` from the data
// directory alone (no --config) stays under the parameter's max, stored
// with the runs, says how far it extrapolated and what held it, and gives
// the chat's 适配 answer.
func TestFitStaysUnderTheStoredMaxAndAgreesWithTheChat(t *testing.T) {
	py := plainPython(t)
	dir := t.TempDir()
	script, err := filepath.Abs(filepath.Join("testdata", "mem_batch.py"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "fit.toml")
	if err := os.WriteFile(cfg, []byte(`data_dir = "`+data+`"
[[jobs]]
name = "mlp"
command = ["`+py+`", "`+script+`", "{batch_size}"]
[jobs.params.batch_size]
type = "int"
default = 64
min = 1
max = 1500
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, bs := range []int{64, 256, 1024} {
		code, out, stderr := trainbot(t, "开始 batch_size="+strconv.Itoa(bs)+"\n", "console", "--config", cfg)
		if code != 0 || !strings.Contains(out, "finished") {
			t.Fatalf("batch %d: console exited %d:\n%s\n%s", bs, code, out, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(data, "runs", strconv.Itoa(i+1), "output.log"))
		t.Logf("%s", b)
		r := runJSONOf(t, data, strconv.Itoa(i+1))
		t.Logf("run %d: peak %v how %v", i+1, r["peak_host_mem_bytes"], r["peak_host_how"])
		if r["outcome"] != "finished" || r["peak_host_mem_bytes"] == nil {
			t.Fatalf("run %d: %v", i+1, r)
		}
	}

	code, cli, stderr := trainbot(t, "", "fit", "mlp", "--data", data)
	if code != 0 {
		t.Fatalf("fit exited %d:\n%s\n%s", code, cli, stderr)
	}
	for _, want := range []string{
		"extrapolated 1.46× past the largest value tried (batch_size=1024); a fit goes at most 2× past it",
		"held at the parameter's max, 1500",
		"✅ batch_size=1500 should fit: predicted ",
	} {
		if !strings.Contains(cli, want) {
			t.Errorf("fit --data lacks %q:\n%s", want, cli)
		}
	}
	t.Log(cli)
	code, out, stderr := trainbot(t, "", "fit", "mlp", "--json", "--data", data)
	if code != 0 {
		t.Fatalf("fit --json exited %d:\n%s\n%s", code, out, stderr)
	}
	var fit fitJSON
	if err := json.Unmarshal([]byte(out), &fit); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if fit.MaxFit == nil || *fit.MaxFit != 1500 || fit.CappedBy != "max" || fit.ParamMax == nil || *fit.ParamMax != 1500 ||
		fit.LargestTried != 1024 || fit.LineMaxFit <= 1500 || fit.Extrapolation < 1.46 || fit.Extrapolation > 1.47 {
		t.Errorf("fit --json: %s", out)
	}

	// The chat, with the config, answers the same value and prediction.
	code, chat, stderr := trainbot(t, "适配 mlp\n", "console", "--config", cfg)
	if code != 0 {
		t.Fatalf("console exited %d:\n%s\n%s", code, chat, stderr)
	}
	answer := regexp.MustCompile(`✅ batch_size=\d+ should fit: predicted [0-9.]+ [KMG]iB`)
	if a, b := answer.FindString(cli), answer.FindString(chat); a == "" || a != b {
		t.Errorf("the CLI answers %q, the chat %q:\n%s", a, b, chat)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

// tbwriterDir is where tbwriter.py, the tests' event file writer, lives.
func tbwriterDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "trainer", "tfevents", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ledgerSteps reads the "STEP LOSS" lines a script appended after each
// flush of its event file.
func ledgerSteps(t *testing.T, path string) []float64 {
	t.Helper()
	b, _ := os.ReadFile(path)
	var out []float64
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is "" or not written whole yet
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		step, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || step != len(out) {
			t.Fatalf("ledger line %q", l)
		}
		out = append(out, v)
	}
	return out
}

// storedLoss reads a run's stored points of one metric (trainbot points
// --json): values by step, failing on a step stored twice.
func storedLoss(t *testing.T, data, metric string) map[int64]float64 {
	t.Helper()
	code, out, errOut := trainbot(t, "", "points", "1", "--metric", metric, "--json", "--data", data)
	if code != exitOK {
		if strings.Contains(errOut, "no metric") || strings.Contains(errOut, "has no") {
			return nil
		}
		t.Fatalf("points: %d %s", code, errOut)
	}
	var pts []struct {
		Step  int64   `json:"step"`
		Name  string  `json:"name"`
		Value float64 `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &pts); err != nil {
		t.Fatalf("points --json: %v\n%s", err, out)
	}
	got := map[int64]float64{}
	for _, p := range pts {
		if _, dup := got[p.Step]; dup {
			t.Fatalf("step %d of %s stored twice", p.Step, metric)
		}
		got[p.Step] = p.Value
	}
	return got
}

// checkSteps says whether stored has exactly the ledger's first n steps'
// values (as float32, the precision of simple_value).
func checkSteps(stored map[int64]float64, ledger []float64, n int) error {
	for step := 0; step < n; step++ {
		v, ok := stored[int64(step)]
		if !ok {
			return fmt.Errorf("step %d missing (%d stored)", step, len(stored))
		}
		if want := float64(float32(ledger[step])); v != want {
			return fmt.Errorf("step %d: %g stored, %g logged", step, v, want)
		}
	}
	return nil
}

// TestTorchTensorBoardOnly is the acceptance of TensorBoard event files
// as a metric source: a real PyTorch training that prints nothing and logs
// its loss only through the event writer; while it still writes, the
// stored points (what 画图 draws) have every step it logged so far, and
// 画图 draws them; at its end, every step, once.
func TestTorchTensorBoardOnly(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "torch_tensorboard.py"))
	ledger := filepath.Join(dir, "ledger.txt")
	const steps = 200 // ~10 s of training after the import: the check runs while it writes
	cfgPath := filepath.Join(dir, "tb.toml")
	cfg := fmt.Sprintf(`data_dir = %q
[[jobs]]
name = "tb"
command = [%q, %q, "--logdir", "runs/{run_name}", "--ledger", %q, "--steps", "%d", "--sleep", "0.05"]
dir = %q
tensorboard = "runs/{run_name}"
env = { TBWRITER_DIR = %q }
[jobs.params.run_name]
type = "string"
default = "exp1"
`, data, py, script, ledger, steps, work, tbwriterDir(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// An earlier run's event file in the same directory is not this run's.
	old := filepath.Join(work, "runs", "exp1")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", `import sys; sys.path.insert(0, sys.argv[1]); import tbwriter
w = tbwriter.EventWriter(sys.argv[2], start=1.0e9); w.add_scalar("loss", 99.0, 5000, walltime=1.0e9); w.close()`, tbwriterDir(t), old).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	past := time.Now().Add(-time.Hour)
	matches, _ := filepath.Glob(filepath.Join(old, "events.out.tfevents.*"))
	for _, m := range matches {
		os.Chtimes(m, past, past)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	e, out, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), []string{"console", "--config", cfgPath}, e) }()
	io.WriteString(pw, "开始\n")
	_, pos := waitFor(t, out, 0, `run #1 started: tb`)

	// While the script writes: wait for 20 logged steps, then for the
	// store to have each of them.
	var logged []float64
	for deadline := time.Now().Add(90 * time.Second); len(logged) < 20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the script logged %d steps in 90 s; stderr:\n%s\nout:\n%s", len(logged), errOut.String(), out.String())
		}
		logged = ledgerSteps(t, ledger)
	}
	n := len(logged)
	var stored map[int64]float64
	var lastErr error
	began := time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		stored = storedLoss(t, data, "loss")
		if lastErr = checkSteps(stored, logged, n); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("while the file is written: %v", lastErr)
	}
	lag := time.Since(began)
	if now := len(ledgerSteps(t, ledger)); now >= steps {
		t.Fatalf("the script had ended (%d steps) before the check: it must run on while the points are read", now)
	}
	if _, stale := stored[5000]; stale {
		t.Error("the earlier run's event file was read as this run's")
	}
	t.Logf("all %d steps logged so far stored within %s, with the file still being written", n, lag.Round(time.Millisecond))
	io.WriteString(pw, "画图 1 loss\n")
	m, _ := waitFor(t, out, pos, `run #1 tb · loss · (\d+) points`)
	if k, _ := strconv.Atoi(regexp.MustCompile(`(\d+) points`).FindStringSubmatch(m)[1]); k < n {
		t.Errorf("the chart has %d points, want at least the %d logged when it was asked for", k, n)
	}
	io.WriteString(pw, "状态\n")
	waitFor(t, out, pos, `run #1 · tb · running[^\n]*\n[^\n]*step \d+`)

	// The end of input waits for the run's end.
	pw.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("console exited %d: %s", code, errOut.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end")
	}
	logged = ledgerSteps(t, ledger)
	stored = storedLoss(t, data, "loss")
	if len(logged) != steps || len(stored) != steps {
		t.Fatalf("%d steps logged, %d stored, want %d", len(logged), len(stored), steps)
	}
	if err := checkSteps(stored, logged, steps); err != nil {
		t.Error(err)
	}
	if lr := storedLoss(t, data, "lr"); len(lr) != steps/10 || lr[0] != float64(float32(0.05)) {
		t.Errorf("lr (new_style tensors) = %v, want %d points of 0.05", lr, steps/10)
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps-1) {
		t.Errorf("run: %v at step %v, want finished at step %d", r["outcome"], r["steps"], steps-1)
	}
}

// TestServeReattachesToEventFilesWithoutDuplicates: serve leaves a run
// that logs only to event files, a second serve re-attaches, and every
// step is stored once: the offset of each event file is stored with the
// points read from it, so the second trainbot resumes there.
func TestServeReattachesToEventFilesWithoutDuplicates(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	script := filepath.Join(dir, "tb_steps.py")
	const steps = 200 // ~6 s: the second serve attaches before the end
	if err := os.WriteFile(script, []byte(`import os, sys, time
sys.path.insert(0, os.environ["TBWRITER_DIR"]); import tbwriter
w = tbwriter.EventWriter("tb/run-" + os.environ["TRAINBOT_RUN_ID"])
for step in range(1, `+strconv.Itoa(steps)+` + 1):
    w.add_scalar("loss", 1.0 / step, step)
    w.add_scalar("acc", step / 1000.0, step)
    w.flush()
    time.sleep(0.03)
w.close()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "tb.toml")
	cfg := fmt.Sprintf(`data_dir = %q
%s
[[jobs]]
name = "tbsteps"
command = [%q, %q]
dir = %q
tensorboard = "tb/run-{run_id}"
env = { TBWRITER_DIR = %q }
`, data, telegramSection(fake), py, script, dir, tbwriterDir(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1, _, stderr := startServe(ctx1, cfgPath)
	fake.UserSays(111, "开始")
	awaitMessage(t, fake, 111, 0, "run #1 started", stderr)
	// Leave once some points are stored.
	for deadline := time.Now().Add(time.Minute); len(storedLoss(t, data, "loss")) < 10; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no points stored in a minute")
		}
	}
	cancel1()
	<-done1
	from := len(fake.Messages(111))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2, _, stderr := startServe(ctx2, cfgPath)
	awaitMessage(t, fake, 111, from, "re-attached to run #1 (tbsteps)", stderr)
	awaitMessage(t, fake, 111, from, "run #1 (tbsteps) finished", stderr)
	cancel2()
	<-done2
	for _, metric := range []string{"loss", "acc"} {
		got := storedLoss(t, data, metric) // fails on a step stored twice
		if len(got) != steps {
			t.Errorf("%s: %d steps stored, want %d", metric, len(got), steps)
		}
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps) {
		t.Errorf("run: %v at step %v, want finished at step %d", r["outcome"], r["steps"], steps)
	}
}

// TestOutputAndEventFilesMerge: a script prints its loss and logs it to an
// event file too, with other values at even steps; the stored loss has
// the event file's value where both report a step, and the output's
// elsewhere, whichever arrived first.
func TestOutputAndEventFilesMerge(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	script := filepath.Join(dir, "both.py")
	// Odd steps: printed only. Even steps: printed (value 100+step) and
	// logged (value step); every other even step the event goes first.
	if err := os.WriteFile(script, []byte(`import os, sys, time
sys.path.insert(0, os.environ["TBWRITER_DIR"]); import tbwriter
w = tbwriter.EventWriter("tb")
for step in range(1, 41):
    if step % 4 == 0:
        w.add_scalar("loss", float(step), step); w.flush(); time.sleep(0.15)
    print("step=%d loss=%d" % (step, 100 + step), flush=True)
    if step % 4 == 2:
        time.sleep(0.15); w.add_scalar("loss", float(step), step); w.flush()
    time.sleep(0.01)
w.close()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "both.toml")
	cfg := fmt.Sprintf("data_dir = %q\n[[jobs]]\nname = \"both\"\ncommand = [%q, %q]\ndir = %q\ntensorboard = \"tb\"\nenv = { TBWRITER_DIR = %q }\n",
		data, py, script, dir, tbwriterDir(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := trainbot(t, "开始\n", "console", "--config", cfgPath)
	if code != exitOK || !strings.Contains(out, "run #1 (both) finished") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	got := storedLoss(t, data, "loss")
	for step := int64(1); step <= 40; step++ {
		want := float64(100 + step)
		if step%2 == 0 {
			want = float64(step)
		}
		if got[step] != want {
			t.Errorf("step %d: %g stored, want %g", step, got[step], want)
		}
	}
	if len(got) != 40 {
		t.Errorf("%d steps stored, want 40", len(got))
	}
}

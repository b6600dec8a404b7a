package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

// writeStepsJob writes a config whose job prints "step=I loss=X" every
// pace for n steps: a shell-free loop in the test binary's own shell-less
// child (/bin/sh is not needed: python3 is, as for the torch tests).
func writeStepsJob(t *testing.T, n int, pace time.Duration) (cfgPath, data string) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	script := filepath.Join(dir, "steps.py")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`import time, sys
for i in range(1, %d + 1):
    print("step=%%d loss=%%.6f" %% (i, 1.0 / i), flush=True)
    time.sleep(%g)
`, n, pace.Seconds())), 0o644); err != nil {
		t.Fatal(err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	cfgPath = filepath.Join(dir, "steps.toml")
	cfg := `data_dir = "` + data + `"
[[jobs]]
name = "steps"
command = ["` + py + `", "` + script + `"]
stop_grace = "2s"
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, data
}

// startsARun starts a console trainbot of its own (a process that a
// test can kill -9) on cfgPath and sends it 开始; it returns once run #1
// started.
func startsARun(t *testing.T, cfgPath string) *exec.Cmd {
	t.Helper()
	cmd, stdin, out := startConsole(t, cfgPath)
	io.WriteString(stdin, "开始\n")
	waitFor(t, out, 0, `run #1 started`)
	return cmd
}

// startConsole starts `trainbot console --config cfgPath` as a process of
// its own (this test binary), run through wrap when given (a shell that
// sets a limit, say, then execs "$0" "$@"); its output goes to out.
func startConsole(t *testing.T, cfgPath string, wrap ...string) (cmd *exec.Cmd, stdin io.WriteCloser, out *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(wrap, exe), "console", "--config", cfgPath)
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "TRAINBOT_TEST_MAIN=1", "HOME="+t.TempDir())
	if stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, out
}

func logLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\nstep=")
}

// TestRunOutlivesAKilledTrainbot is the acceptance of "Runs outlive
// trainbot": kill -9 of a console process 3 s into a 10 s job printing
// every 50 ms; the training keeps printing; a second trainbot on the same
// data directory refuses 开始 of that job while it runs, shows it in 状态,
// and records it finished with every step stored.
func TestRunOutlivesAKilledTrainbot(t *testing.T) {
	const steps = 200 // 10 s at 50 ms
	cfgPath, data := writeStepsJob(t, steps, 50*time.Millisecond)
	first := startsARun(t, cfgPath)
	defer first.Process.Kill()
	logPath := filepath.Join(data, "runs", "1", "output.log")
	deadline := time.Now().Add(20 * time.Second)
	for logLines(logPath) < 40 { // ~2-3 s in
		if time.Now().After(deadline) {
			t.Fatalf("the run printed %d lines in 20 s, want 40", logLines(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killedAt := logLines(logPath)

	// The training goes on without any trainbot.
	deadline = time.Now().Add(10 * time.Second)
	for logLines(logPath) < killedAt+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := logLines(logPath); n < killedAt+10 {
		t.Fatalf("the run printed %d lines after trainbot was killed at line %d, want it to go on", n-killedAt, killedAt)
	}

	// No trainbot observes it now, and runs show says so.
	r := runJSONOf(t, data, "1")
	if r["state"] != "running" || r["attached"] != false || r["supervisor_pid"] == float64(0) || r["runner"] != "local" {
		t.Fatalf("runs show while no trainbot runs: state %v attached %v supervisor %v runner %v", r["state"], r["attached"], r["supervisor_pid"], r["runner"])
	}

	// A second trainbot: 开始 is refused while the run goes on, 状态 shows
	// it; at the end of input it waits for the run, which ends finished.
	pr, pw := io.Pipe()
	e, out2, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { done <- run(ctx, []string{"console", "--config", cfgPath}, e) }()
	waitFor(t, out2, 0, `re-attached to run #1 \(steps\)`)
	io.WriteString(pw, "开始\n")
	_, at := waitFor(t, out2, 0, `run #1 \(steps\) is already running`)
	io.WriteString(pw, "状态\n")
	waitFor(t, out2, at, `run #1 · steps · running for`)
	if code, show, _ := trainbot(t, "", "runs", "show", "1", "--data", data); code != 0 || !strings.Contains(show, "trainbot is attached to this run") {
		t.Errorf("runs show while the second trainbot observes: %d %s", code, show)
	}
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("second trainbot exited %d: %s", code, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the second trainbot did not end with the run")
	}
	r = runJSONOf(t, data, "1")
	if v, ok := r["slurm_job_id"]; !ok || v != nil {
		t.Errorf("runs show of a local run: slurm_job_id %v (present %v), want null", v, ok)
	}
	if r["outcome"] != "finished" || r["steps"] != float64(steps) || r["runner"] != "local" {
		t.Fatalf("run: outcome %v steps %v runner %v (%v), want finished at step %d by the local runner", r["outcome"], r["steps"], r["runner"], r["detail"], steps)
	}
	stepsStoredOnce(t, data, "1", steps)
}

// serve leaving (SIGTERM) leaves its runs running; the next serve
// re-attaches, tells the chat that started the run, and records its end.
func TestServeLeavesRunsRunningAndReattaches(t *testing.T) {
	cfgPath, data := writeStepsJob(t, 100, 50*time.Millisecond)
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(b), "[[jobs]]", telegramSection(fake)+"[[jobs]]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1, _, stderr1 := startServe(ctx1, cfgPath)
	fake.UserSays(111, "开始")
	awaitMessage(t, fake, 111, 0, "run #1 started", stderr1)
	cancel1() // what SIGTERM does
	select {
	case <-done1:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	r := runJSONOf(t, data, "1")
	if r["state"] != "running" || r["attached"] != false {
		t.Fatalf("after serve left: state %v attached %v (%v), want running with no trainbot attached", r["state"], r["attached"], r["detail"])
	}
	from := len(fake.Messages(111))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2, _, stderr2 := startServe(ctx2, cfgPath)
	awaitMessage(t, fake, 111, from, "re-attached to run #1 (steps)", stderr2)
	awaitMessage(t, fake, 111, from, "run #1 (steps) finished", stderr2)
	cancel2()
	<-done2
	r = runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(100) {
		t.Fatalf("run: %v at step %v (%v), want finished at step 100", r["outcome"], r["steps"], r["detail"])
	}
}

// stepsStoredOnce checks, through trainbot points --json, that run id of
// data stored each of its steps 1..steps exactly once.
func stepsStoredOnce(t *testing.T, data, id string, steps int64) {
	t.Helper()
	code, pts, stderr := trainbot(t, "", "points", id, "--metric", "loss", "--json", "--data", data)
	if code != 0 {
		t.Fatalf("points: %d %s", code, stderr)
	}
	var got []struct {
		Step int64 `json:"step"`
	}
	if err := json.Unmarshal([]byte(pts), &got); err != nil {
		t.Fatalf("points --json: %v\n%s", err, pts)
	}
	seen := map[int64]int{}
	for _, p := range got {
		seen[p.Step]++
	}
	for i := int64(1); i <= steps; i++ {
		if seen[i] != 1 {
			t.Errorf("step %d stored %d times, want once", i, seen[i])
		}
	}
}

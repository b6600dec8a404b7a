package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/sshdtest"
)

// remoteStepsConfig is a config with hosts h1 (and more servers as hN)
// whose trainbot is this test binary, each with a data directory of its
// own, and a job "steps" (python, n steps at pace) with the job's extra
// keys (host = "h1").
func remoteStepsConfig(t *testing.T, n int, pace time.Duration, extra string, servers ...*sshdtest.Server) (cfgPath, data string, remote []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 (CI installs it)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	script := filepath.Join(dir, "steps.py")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`import time, os
print("host_data=%%s" %% os.environ.get("TRAINBOT_RUN_DIR"), flush=True)
for i in range(1, %d + 1):
    print("step=%%d loss=%%.6f" %% (i, 1.0 / i), flush=True)
    time.sleep(%g)
`, n, pace.Seconds())), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := ""
	for i, s := range servers {
		rd := filepath.Join(dir, "remote"+strconv.Itoa(i+1))
		remote = append(remote, rd)
		doc += hostEntry(t, "h"+strconv.Itoa(i+1), s, true, fmt.Sprintf("trainbot = %q\ndata_dir = %q", exe, rd))
	}
	doc += fmt.Sprintf("[[jobs]]\nname = \"steps\"\ncommand = [%q, %q]\nstop_grace = \"2s\"\n%s\n", py, script, extra)
	cfgPath = filepath.Join(dir, "trainbot.toml")
	if err := os.WriteFile(cfgPath, []byte("data_dir = "+strconv.Quote(data)+"\n[gpu]\ninterval = \"100ms\"\nfree_for = \"300ms\"\nlock_dir = "+strconv.Quote(filepath.Join(dir, "gpulocks"))+"\n"+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, data, remote
}

// remoteRunDir is the run's directory on a host (DATA/hub/HUB/ID).
func remoteRunDir(t *testing.T, remoteData string, id int) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(remoteData, "hub", "*", strconv.Itoa(id)))
	if len(m) != 1 {
		t.Fatalf("run %d's directory on the host: %v", id, m)
	}
	return m[0]
}

// ancestors are the command names of pid's parents, nearest first.
func ancestors(pid int) []string {
	var out []string
	for range 10 {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			break
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		f := strings.Fields(s[j+1:])
		if pid != 0 && len(out) >= 0 {
			out = append(out, s[i+1:j])
		}
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
		if pid <= 1 {
			break
		}
	}
	return out[1:]
}

// TestARunOnAHostOutlivesItsSessionAndTheHub is #33's acceptance of runs
// on a host: 开始 starts the job on h1 (its shim under that sshd's
// session, its files under h1's data directory), the SSH session serving
// it is killed and the hub kill -9'd mid-run; the run goes on, and a new
// hub re-attaches, catches up and records it finished with every step
// stored once.
func TestARunOnAHostOutlivesItsSessionAndTheHub(t *testing.T) {
	env := sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1"}}
	h1 := sshdtest.Start(t, env)
	const steps = 200 // 10 s at 50 ms
	cfgPath, data, remote := remoteStepsConfig(t, steps, 50*time.Millisecond, `host = "h1"`, h1)

	first, stdin, out := startConsole(t, cfgPath)
	defer first.Process.Kill()
	began := time.Now()
	io.WriteString(stdin, "开始\n")
	waitFor(t, out, 0, `run #1 started`)
	waitFor(t, out, 0, `on h1: pid \d+`)
	rdir := remoteRunDir(t, remote[0], 1)
	mirror := filepath.Join(data, "runs", "1", "output.log")
	deadline := time.Now().Add(30 * time.Second)
	for logLines(mirror) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no step reached the hub's mirror in 30 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("first step in the hub's mirror %s after 开始", time.Since(began).Round(time.Millisecond))
	var st struct {
		ShimPID int `json:"shim_pid"`
	}
	b, _ := os.ReadFile(filepath.Join(rdir, "state.json"))
	if err := json.Unmarshal(b, &st); err != nil || st.ShimPID == 0 {
		t.Fatalf("the run's state on h1: %v %s", err, b)
	}
	if anc := ancestors(st.ShimPID); !strings.Contains(strings.Join(anc, " "), "sshd") {
		t.Errorf("the shim's ancestors %v: want it started from h1's sshd session", anc)
	}
	for logLines(mirror) < 40 {
		if time.Now().After(deadline) {
			t.Fatalf("the mirror has %d lines in 30 s, want 40", logLines(mirror))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := h1.KillSessions(); n == 0 {
		t.Fatal("no sshd session to kill")
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	remoteLog := filepath.Join(rdir, "output.log")
	killedAt := logLines(remoteLog)
	deadline = time.Now().Add(10 * time.Second)
	for logLines(remoteLog) < killedAt+20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := logLines(remoteLog); n < killedAt+20 {
		t.Fatalf("the run printed %d lines on h1 after its session and its hub were killed at line %d, want it to go on", n-killedAt, killedAt)
	}
	if r := runJSONOf(t, data, "1"); r["state"] != "running" || r["host"] != "h1" {
		t.Fatalf("runs show while no hub runs: state %v host %v", r["state"], r["host"])
	}

	// A second hub re-attaches, catches up, and waits for the end.
	pr, pw := io.Pipe()
	e, out2, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { done <- run(ctx, []string{"console", "--config", cfgPath}, e) }()
	waitFor(t, out2, 0, `re-attached to run #1 \(steps\)`)
	io.WriteString(pw, "状态\n")
	waitFor(t, out2, 0, `run #1 · steps · running on h1 for`)
	io.WriteString(pw, "日志 3\n")
	waitFor(t, out2, 0, `step=\d+ loss=`)
	io.WriteString(pw, "历史\n")
	waitFor(t, out2, 0, `#1 steps .*🖥 h1`)
	// Knobs do not reach a run on a host yet, and say so.
	io.WriteString(pw, "存档\n")
	waitFor(t, out2, 0, `Run #1 runs on host h1: 存档 does not reach runs on other hosts yet`)
	io.WriteString(pw, "调参 lr=0.1\n")
	waitFor(t, out2, 0, `Run #1 runs on host h1: 调参 does not reach`)
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("second hub exited %d: %s", code, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the second hub did not end with the run:\n%s", out2.String())
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps) || r["runner"] != "ssh" || r["host"] != "h1" {
		t.Fatalf("run: outcome %v steps %v runner %v host %v (%v), want finished at step %d on h1", r["outcome"], r["steps"], r["runner"], r["host"], r["detail"], steps)
	}
	stepsStoredOnce(t, data, "1", steps)
	hub, _ := os.ReadFile(mirror)
	there, _ := os.ReadFile(remoteLog)
	if string(hub) != string(there) {
		t.Errorf("the hub's copy of the log (%d bytes) is not the host's (%d bytes)", len(hub), len(there))
	}
}

//go:build cgo && !nonvml

package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/sshdtest"
)

// (With mock NVML on the hosts: the test binary's TRAINBOT_TEST_MOCK_GPUS,
// sharedgpu_test.go.)

// hosts = "any" with a GPU request: h1's GPUs are all held by another
// user, so the run goes to h2, on a GPU of h2's; 开始 job@h1 is told why
// h1 cannot take it; 停止 stops the run on its host.
func TestAnyHostTakesTheRunWhereGPUsAreFree(t *testing.T) {
	h1 := sshdtest.Start(t, sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1", "TRAINBOT_TEST_MOCK_GPUS=0,1,2,3,4,5,6,7"}})
	h2 := sshdtest.Start(t, sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1", "TRAINBOT_TEST_MOCK_GPUS="}})
	cfgPath, data, remote := remoteStepsConfig(t, 600, 50*time.Millisecond, "hosts = \"any\"\ngpus = 1", h1, h2)
	cmd, stdin, out := startConsole(t, cfgPath)
	defer cmd.Process.Kill()
	// The hosts' GPUs are free once quiet for free_for from their first
	// sample: until then a start is told to wait.
	deadline := time.Now().Add(30 * time.Second)
	from := 0
	for {
		io.WriteString(stdin, "开始\n")
		got, at := waitFor(t, out, from, `run #1 started|Not started: h1: 0 of 8 GPUs free`)
		from = at
		if strings.HasPrefix(got, "run #1 started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no host took the run in 30 s:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, out, 0, `on h2: pid \d+`)
	remoteRunDir(t, remote[1], 1)
	if m, _ := filepath.Glob(filepath.Join(remote[0], "hub", "*", "*")); len(m) != 0 {
		t.Errorf("h1, whose GPUs are all busy, has run directories: %v", m)
	}
	r := runJSONOf(t, data, "1")
	if r["host"] != "h2" || len(r["gpus"].([]any)) != 1 {
		t.Errorf("run #1: host %v gpus %v, want one GPU of h2", r["host"], r["gpus"])
	}
	io.WriteString(stdin, "开始 steps@h1\n")
	waitFor(t, out, from, `(?s)run #1 \(steps\) is already running`)
	io.WriteString(stdin, "停止\n")
	waitFor(t, out, 0, `run #1 \(steps\) stopped`)
	deadline = time.Now().Add(20 * time.Second)
	for {
		r = runJSONOf(t, data, "1")
		if r["state"] == "ended" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r["outcome"] != "stopped" {
		t.Fatalf("run #1 after 停止: %v %v (%v)", r["state"], r["outcome"], r["detail"])
	}
	io.WriteString(stdin, "开始 steps@h1\n")
	got, _ := waitFor(t, out, from, `(?s)(run #2 started|Not started: h1: 0 of 8 GPUs free).*`)
	if !strings.Contains(got, "h1") {
		t.Errorf("开始 steps@h1 while h1's GPUs are held: want a refusal that names h1:\n%s", got)
	}
}

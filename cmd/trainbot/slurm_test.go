package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/slurmtest"
)

// writeSlurmStepsJob is writeStepsJob's job submitted to Slurm.
func writeSlurmStepsJob(t *testing.T, n int, pace time.Duration) (cfgPath, data string) {
	t.Helper()
	cfgPath, data = writeStepsJob(t, n, pace)
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b) + `runner = "slurm"
[jobs.slurm]
time = "00:10:00"
cpus_per_task = 1
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, data
}

// TestSlurmRunOutlivesAKilledTrainbot: kill -9 of trainbot during a Slurm
// run; the job goes on in Slurm; the next trainbot re-attaches, refuses a
// second 开始, shows the node in 状态, and records the end with every step.
func TestSlurmRunOutlivesAKilledTrainbot(t *testing.T) {
	slurmtest.Require(t)
	const steps = 120 // 6 s at 50 ms
	cfgPath, data := writeSlurmStepsJob(t, steps, 50*time.Millisecond)
	if code, out, stderr := trainbot(t, "", "check", "--config", cfgPath); code != 0 || !strings.Contains(out, "runs on Slurm") {
		t.Fatalf("check: %d %s %s", code, out, stderr)
	}
	first := startsARun(t, cfgPath)
	defer first.Process.Kill()
	r := runJSONOf(t, data, "1")
	jobID, _ := r["slurm_job_id"].(string)
	if r["runner"] != "slurm" || jobID == "" {
		t.Fatalf("runs show: runner %v slurm_job_id %v", r["runner"], r["slurm_job_id"])
	}
	t.Cleanup(func() { exec.Command("scancel", jobID).Run() })
	logPath := filepath.Join(data, "runs", "1", "output.log")
	deadline := time.Now().Add(2 * time.Minute) // other tests' jobs may hold the CPUs
	for logLines(logPath) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the Slurm job printed %d lines in 2 minutes, want 20", logLines(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killedAt := logLines(logPath)
	deadline = time.Now().Add(10 * time.Second)
	for logLines(logPath) < killedAt+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := logLines(logPath); n < killedAt+10 {
		t.Fatalf("the Slurm job printed %d lines after trainbot was killed at line %d, want it to go on", n-killedAt, killedAt)
	}

	pr, pw := io.Pipe()
	e, out2, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { done <- run(ctx, []string{"console", "--config", cfgPath}, e) }()
	waitFor(t, out2, 0, `re-attached to run #1 \(steps\)`)
	io.WriteString(pw, "开始\n")
	_, at := waitFor(t, out2, 0, `run #1 \(steps\) is already running`)
	io.WriteString(pw, "状态\n")
	waitFor(t, out2, at, `run #1 · steps · running on \S+ \(Slurm job `+jobID+`\) for`)
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("second trainbot exited %d: %s", code, errOut.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the second trainbot did not end with the run")
	}
	r = runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps) || r["node"] == "" || r["slurm_job_id"] != jobID {
		t.Fatalf("run: outcome %v steps %v node %v job %v (%v), want finished at step %d on a node", r["outcome"], r["steps"], r["node"], r["slurm_job_id"], r["detail"], steps)
	}
	if code, pts, _ := trainbot(t, "", "points", "1", "--metric", "loss", "--data", data); code != 0 || strings.Count(pts, "\n") < steps {
		t.Errorf("points: %d, %d lines; want every step", code, strings.Count(pts, "\n"))
	}
}

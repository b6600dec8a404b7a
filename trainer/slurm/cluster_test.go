package slurm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/slurmtest"
)

// These tests submit real jobs: see package slurmtest.

const clusterWait = 2 * time.Minute // jobs of other tests may hold the CPUs

func requireCluster(t *testing.T) {
	t.Helper()
	slurmtest.Require(t)
}

// submitJob submits spec and cancels the job when the test ends.
func submitJob(t *testing.T, spec SubmitSpec) string {
	t.Helper()
	id, err := Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cancel(context.Background(), id, "", false) })
	return id
}

// spec is a run of test t with its own directory.
func spec(t *testing.T, argv ...string) SubmitSpec {
	dir := t.TempDir()
	return SubmitSpec{RunID: time.Now().UnixNano() % 1e6, Job: strings.ToLower(t.Name()), Argv: argv, Dir: dir,
		RunDir: dir, LogPath: filepath.Join(dir, "output.log")}
}

// waitJob polls Query until ok says so, or fails the test at the deadline.
func waitJob(t *testing.T, id, what string, ok func(Job) bool) Job {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		j, err := Query(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not %s after %v: %+v", id, what, clusterWait, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ended(j Job) bool { o, _ := Classify(j); return o != "" }

func TestClusterJobFinishes(t *testing.T) {
	requireCluster(t)
	s := spec(t, "sh", "-c", `echo "first line of run $TRAINBOT_RUN_ID"; echo "to stderr" >&2; sleep 1; echo "last line in $PWD"`)
	s.Env = []string{"TRAINBOT_RUN_ID=7"}
	s.Dir = filepath.Join(s.RunDir, "50% of 'the' dir")
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The log is appended to, as when a run is retried into the same file.
	if err := os.WriteFile(s.LogPath, []byte("earlier line\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	id := submitJob(t, s)
	submitted := time.Since(t0)
	var running, firstLine time.Duration
	queries, queryTime := 0, time.Duration(0)
	for running == 0 || firstLine == 0 {
		q0 := time.Now()
		j, err := Query(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		queries++
		queryTime += time.Since(q0)
		if running == 0 && j.State != "PENDING" {
			running = time.Since(t0)
		}
		if data, _ := os.ReadFile(s.LogPath); firstLine == 0 && bytes.Contains(data, []byte("first line")) {
			firstLine = time.Since(t0)
		}
		if time.Since(t0) > clusterWait {
			t.Fatalf("job %s: not running with output after %v: %+v", id, clusterWait, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("job %s: sbatch returned after %v, Slurm said RUNNING after %v, first line in the log after %v; one Query took %v on average",
		id, submitted.Round(time.Millisecond), running.Round(time.Millisecond), firstLine.Round(time.Millisecond),
		(queryTime / time.Duration(queries)).Round(100*time.Microsecond))

	j := waitJob(t, id, "ended", ended)
	if j.State != "COMPLETED" || j.ExitCode != 0 || j.Node == "" || j.Start.IsZero() || j.End.IsZero() {
		t.Errorf("got %+v, want COMPLETED with exit 0, a node, a start and an end", j)
	}
	if outcome, _ := Classify(j); outcome != Finished {
		t.Errorf("Classify: got %q, want %q", outcome, Finished)
	}
	if j.Name != JobName(s.RunID, s.Job) {
		t.Errorf("job name: got %q, want %q", j.Name, JobName(s.RunID, s.Job))
	}
	data, err := os.ReadFile(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "earlier line\nfirst line of run 7\nto stderr\nlast line in " + s.Dir + "\n"
	if string(data) != want {
		t.Errorf("log:\n got %q\nwant %q", data, want)
	}
}

func TestClusterJobExits3(t *testing.T) {
	requireCluster(t)
	id := submitJob(t, spec(t, "sh", "-c", "exit 3"))
	j := waitJob(t, id, "ended", ended)
	if j.State != "FAILED" || j.ExitCode != 3 || j.Signal != 0 {
		t.Errorf("got %s %d:%d, want FAILED 3:0", j.State, j.ExitCode, j.Signal)
	}
	if outcome, detail := Classify(j); outcome != Failed || !strings.Contains(detail, "exit code 3") {
		t.Errorf("Classify: got %q, %q; want failed with exit code 3", outcome, detail)
	}
}

// A plain Cancel ends the job as CANCELLED and nothing is left in the queue.
func TestClusterCancel(t *testing.T) {
	requireCluster(t)
	id := submitJob(t, spec(t, "sleep", "300"))
	waitJob(t, id, "running", func(j Job) bool { return j.State == "RUNNING" })
	if err := Cancel(context.Background(), id, "", false); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, id, "ended", ended)
	if outcome, detail := Classify(j); outcome != Stopped || detail != "CANCELLED" {
		t.Errorf("Classify: got %q, %q; want stopped, CANCELLED", outcome, detail)
	}
	out, err := run(context.Background(), CallTimeout, "squeue", "-h", "-j", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("squeue still lists job %s: %q", id, out)
	}
	// Cancelling again, or a job Slurm never knew, is not an error.
	if err := Cancel(context.Background(), id, "", false); err != nil {
		t.Errorf("second cancel: %v", err)
	}
}

// Cancel with SIGINT reaches the command (the batch step's process, thanks to
// exec) and its children; the job ends as the command exits.
func TestClusterSignalReachesTheCommand(t *testing.T) {
	requireCluster(t)
	s := spec(t, "sh", "-c", `trap 'echo "got INT"; exit 5' INT; echo ready; while :; do sleep 0.1; done`)
	id := submitJob(t, s)
	deadline := time.Now().Add(clusterWait)
	for {
		if data, _ := os.ReadFile(s.LogPath); bytes.Contains(data, []byte("ready")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never said ready", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := Cancel(context.Background(), id, "INT", false); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, id, "ended", ended)
	if j.State != "FAILED" || j.ExitCode != 5 {
		t.Errorf("got %s %d:%d, want FAILED 5:0 (the trap's exit)", j.State, j.ExitCode, j.Signal)
	}
	if data, _ := os.ReadFile(s.LogPath); !bytes.Contains(data, []byte("got INT")) {
		t.Errorf("log %q: want the trap's line", data)
	}
}

// A job that cannot start yet is PENDING with Slurm's reason; a signal cannot
// reach it, a plain Cancel ends it.
func TestClusterPending(t *testing.T) {
	requireCluster(t)
	s := spec(t, "true")
	s.Options.ExtraArgs = []string{"--begin=now+1hour"}
	id := submitJob(t, s)
	j := waitJob(t, id, "pending for BeginTime", func(j Job) bool { return j.State == "PENDING" && j.Reason == "BeginTime" })
	if outcome, detail := Classify(j); outcome != "" || detail != "PENDING (BeginTime)" {
		t.Errorf("Classify: got %q, %q; want \"\", PENDING (BeginTime)", outcome, detail)
	}
	if j.Partition == "" || j.Node != "" {
		t.Errorf("got partition %q node %q, want a partition and no node", j.Partition, j.Node)
	}
	if err := Cancel(context.Background(), id, "INT", false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("a signal to a pending job: got %v, want ErrNotRunning", err)
	}
	if err := Cancel(context.Background(), id, "", false); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, id, "ended", ended)
	if j.State != "CANCELLED" {
		t.Errorf("got %s, want CANCELLED", j.State)
	}
}

func TestClusterUnknownJob(t *testing.T) {
	requireCluster(t)
	_, err := Query(context.Background(), "999999999")
	if !errors.Is(err, ErrUnknownJob) {
		t.Errorf("got %v, want ErrUnknownJob", err)
	}
}

// sbatch's refusal comes back with its stderr.
func TestClusterSubmitError(t *testing.T) {
	requireCluster(t)
	s := spec(t, "true")
	s.Options.Partition = "no-such-partition"
	_, err := Submit(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "invalid partition") {
		t.Errorf("got %v, want sbatch's error about the partition", err)
	}
}

// sstat reports the batch step's MaxRSS of a running job (the test cluster
// gathers accounting with jobacct_gather/linux).
func TestClusterMaxRSS(t *testing.T) {
	requireCluster(t)
	s := spec(t, "python3", "-c", "import time; x = bytearray(64 << 20); x[::4096] = b'1' * len(x[::4096]); print('ready', flush=True); time.sleep(60)")
	id := submitJob(t, s)
	deadline := time.Now().Add(clusterWait)
	for {
		n, err := MaxRSS(context.Background(), id)
		if err == nil && n >= 64<<20 {
			if n > 1<<30 {
				t.Errorf("MaxRSS %d bytes: far more than the 64 MiB the job holds", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MaxRSS of job %s: got %d, %v; want ≥ 64 MiB", id, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

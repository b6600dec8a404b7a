package trainer

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// A job's lock whose flock is free (its run's shim was killed) is still
// refused while a process of that run lives: found by its process group,
// or, when it left the group, by the run's directory in its environment.
func TestJobLockWaitsForTheLastRunsProcesses(t *testing.T) {
	data := t.TempDir()
	runDir := filepath.Join(data, "runs", "7")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// An orphan of run 7 that left its process group.
	orphan := exec.Command("/bin/sleep", "60")
	orphan.Env = append(os.Environ(), EnvRunDir+"="+runDir)
	orphan.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	defer orphan.Process.Kill()
	st, _ := json.Marshal(shimctl.State{Version: 1, RunID: 7, PID: 1 << 22, StartedAt: time.Now()})
	if err := os.WriteFile(filepath.Join(runDir, shimctl.StateFile), st, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, "job.lock")
	l, err := acquireJobLock(path)
	if err != nil {
		t.Fatal(err)
	}
	l.describe(lockHolder{Run: 7, RunDir: runDir, What: "run #7 (j)"})
	l.f.Close() // the shim is killed: its flock goes, the file still names run 7
	l.f = nil

	_, err = acquireJobLock(path)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Orphan == nil || busy.Orphan.RunID != 7 || busy.Orphan.Processes != 1 {
		t.Fatalf("got %v (%+v), want refused for run 7's live process", err, busy)
	}
	if h := parseHolder(mustRead(t, path)); h.Run != 7 {
		t.Fatalf("the refused taker rewrote the lock file: %+v", h)
	}
	orphan.Process.Kill()
	orphan.Wait()
	l2, err := acquireJobLock(path)
	if err != nil {
		t.Fatalf("once run 7's processes are gone: %v", err)
	}
	l2.release()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package trainer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// startExternal starts a script that writes its log itself, as a run
// started in tmux would; it is reaped when it exits.
func startExternal(t *testing.T, script, log string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script+` >> "$0" 2>&1`, log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// A watched run: its log is read from the start and parsed, and it ends
// when its process exits, with every point.
func TestWatchEndsWhenThePIDExits(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "train.log")
	os.WriteFile(log, []byte("step 1 loss=0.9\n"), 0o644)
	h := newHarness(t)
	cmd := startExternal(t, `sleep 0.5; for i in 2 3 4 5 6 7 8 9 10; do echo "step $i loss=0.$((10-i))1"; sleep 0.05; done`, log)
	r, err := h.sup.Watch(context.Background(), trainer.WatchRequest{LogPath: log, PID: cmd.Process.Pid, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Runner != trainer.RunnerWatch || r.Job != "train" || r.LogPath != log {
		t.Errorf("watched run %+v", r)
	}
	end := h.wait(r.ID)
	if end.Outcome != trainer.OutcomeEnded || !strings.Contains(end.Detail, "exit status is unknown") {
		t.Errorf("got %s: %s", end.Outcome, end.Detail)
	}
	if f := end.End; f.Why != trainer.WhyWatchExit || f.PID != cmd.Process.Pid || f.OOM != nil || f.ErrorLine != "" {
		t.Errorf("facts %+v, want the watched process %d exited", f, cmd.Process.Pid)
	}
	pts, err := h.st.Series(context.Background(), r.ID, "loss")
	if err != nil || len(pts) != 10 || end.Steps != 10 {
		t.Errorf("got %d points (%v), steps %d; want 10", len(pts), err, end.Steps)
	}
}

// A watched process whose log ends with a traceback has failed; one whose
// log says out of memory ran out of memory.
func TestWatchReadsTheEndFromTheLog(t *testing.T) {
	for _, c := range []struct {
		last   string
		want   trainer.Outcome
		detail string // after "the process (pid N) exited; "
	}{
		{`echo "Traceback (most recent call last):"; echo "ValueError: bad shape"`, trainer.OutcomeFailed, "its log ends with an error: ValueError: bad shape"},
		{`echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."`, trainer.OutcomeOOM,
			"its log's last lines say: CUDA out of memory: tried to allocate 2.00 GiB (2147483648 bytes)"},
	} {
		dir := t.TempDir()
		log := filepath.Join(dir, "x.log")
		os.WriteFile(log, nil, 0o644)
		h := newHarness(t)
		cmd := startExternal(t, `sleep 0.5; echo "step 1 loss=0.5"; `+c.last, log)
		r, err := h.sup.Watch(context.Background(), trainer.WatchRequest{LogPath: log, PID: cmd.Process.Pid, Name: "ext"})
		if err != nil {
			t.Fatal(err)
		}
		end := h.wait(r.ID)
		if end.Outcome != c.want {
			t.Errorf("%s: got %s (%s), want %s", c.last, end.Outcome, end.Detail, c.want)
		}
		if want := fmt.Sprintf("the process (pid %d) exited; %s", cmd.Process.Pid, c.detail); end.Detail != want {
			t.Errorf("%s: detail %q, want %q", c.last, end.Detail, want)
		}
		if f := end.End; f.Why != trainer.WhyWatchExit || f.PID != cmd.Process.Pid || (f.OOM != nil) != (c.want == trainer.OutcomeOOM) || (f.ErrorLine != "") != (c.want == trainer.OutcomeFailed) {
			t.Errorf("%s: facts %+v", c.last, f)
		}
	}
}

// 停止 of a watched run only stops watching; with kill, the process is
// stopped; without a pid the watch goes on until stopped.
func TestStopWatched(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "a.log")
	os.WriteFile(log, nil, 0o644)
	cmd := startExternal(t, `trap 'echo "got INT"; exit 3' INT; while :; do echo "step 1 loss=0.5"; sleep 0.05; done`, log)
	h := newHarness(t)
	ctx := context.Background()
	r, err := h.sup.Watch(ctx, trainer.WatchRequest{LogPath: log, PID: cmd.Process.Pid, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.StopWatched(r.ID, "ann", false); err != nil {
		t.Fatal(err)
	}
	end := h.wait(r.ID)
	if end.Outcome != trainer.OutcomeEnded || end.Detail != fmt.Sprintf("no longer watched: stopped by ann; the process (pid %d) goes on", cmd.Process.Pid) {
		t.Errorf("unwatched: %s: %s", end.Outcome, end.Detail)
	}
	if f := end.End; f.Why != trainer.WhyUnwatched || f.StoppedBy != "ann" || !f.GoesOn || f.PID != cmd.Process.Pid {
		t.Errorf("unwatched: facts %+v", f)
	}
	if syscall.Kill(cmd.Process.Pid, 0) != nil {
		t.Fatal("the process ended when the watch did")
	}
	r2, err := h.sup.Watch(ctx, trainer.WatchRequest{LogPath: log, PID: cmd.Process.Pid, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.StopWatched(r2.ID, "bob", true); err != nil {
		t.Fatal(err)
	}
	end = h.wait(r2.ID)
	if end.Outcome != trainer.OutcomeStopped || end.StoppedBy != "bob" || end.Detail != fmt.Sprintf("stopped by bob (the watched process, pid %d, was signalled)", cmd.Process.Pid) {
		t.Errorf("killed: %s by %q: %s", end.Outcome, end.StoppedBy, end.Detail)
	}
	if f := end.End; f.Why != trainer.WhyStopped || f.StopHow != trainer.StopSignalled || f.StoppedBy != "bob" || f.PID != cmd.Process.Pid {
		t.Errorf("killed: facts %+v", f)
	}
	if data, _ := os.ReadFile(log); !strings.Contains(string(data), "got INT") {
		t.Error("the watched process did not get SIGINT")
	}
	// Without a pid: nothing ends it but 停止.
	r3, err := h.sup.Watch(ctx, trainer.WatchRequest{LogPath: log, Name: "nopid"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if st, err := h.sup.Status(r3.ID); err != nil || st.Run.State != trainer.StateRunning {
		t.Errorf("a watch without pid ended by itself: %v", err)
	}
	h.sup.StopWatched(r3.ID, "ann", true) // no process to kill: stops watching
	if end := h.wait(r3.ID); end.Outcome != trainer.OutcomeEnded || end.Detail != "no longer watched: stopped by ann" || end.End.GoesOn || end.End.PID != 0 {
		t.Errorf("no pid: %s (%q, %+v)", end.Outcome, end.Detail, end.End)
	}
	if _, err := h.sup.Watch(ctx, trainer.WatchRequest{LogPath: filepath.Join(dir, "none.log")}); err == nil {
		t.Error("a missing log was watched")
	}
}

// trainbot watch only records the run: the trainbot serving the data
// directory attaches to it (at start, or within AdoptEvery).
func TestRecordedWatchIsAttached(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "w.log")
	os.WriteFile(log, nil, 0o644)
	cmd := startExternal(t, `for i in 1 2 3 4 5; do echo "step $i loss=0.$i"; sleep 0.1; done`, log)
	run, err := trainer.NewWatchedRun(trainer.WatchRequest{LogPath: log, PID: cmd.Process.Pid, By: "trainbot watch"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessIn(t, dir) // its store is the data directory's
	id, err := h.st.CreateRun(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	h.waitEvent(trainer.EventAttached, id)
	if end := h.wait(id); end.Outcome != trainer.OutcomeEnded || end.Steps != 5 {
		t.Errorf("got %s at step %d: %s", end.Outcome, end.Steps, end.Detail)
	}
}

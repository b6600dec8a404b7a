package trainer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips where
// mounting is not allowed.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "trainbot-test", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && exec.Command("umount", dir).Run() != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

// fill writes path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{64 << 10, 4 << 10, 512, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}

// A full disk during a run: the run goes on, and once space returns its
// end is recorded from what the supervisor kept (state.json, or its
// answer while state.json could not be written) — finished, with its real
// duration and every step, not interrupted.
func TestFullDiskDuringARunRecordsTheRealEnd(t *testing.T) {
	dir := smallDisk(t, "8m")
	h := newHarnessIn(t, dir, job("f", childCommand("print", "300", "10")))
	r := h.start("f", nil)
	h.waitTail(r.ID, "Step [30/")
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	// The disk stays full until the child has ended.
	for deadline := time.Now().Add(30 * time.Second); alive(r.PID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child %d did not end in 30 s on the full disk", r.PID)
		}
	}
	time.Sleep(500 * time.Millisecond)
	freed := time.Now()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != 300 {
		t.Fatalf("got %s at step %d (%s), want finished at step 300", got.Outcome, got.Steps, got.Detail)
	}
	if !got.EndedAt.Before(freed) {
		t.Errorf("the run ended at %s by the record, after the disk had space again at %s: want its real end", got.EndedAt, freed)
	}
	ctx := context.Background()
	pts, err := h.st.Series(ctx, r.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 300 {
		t.Errorf("stored %d loss points, want all 300", len(pts))
	}
	if b, _ := os.ReadFile(filepath.Join(filepath.Dir(got.LogPath), "shim.log")); testing.Verbose() {
		t.Logf("shim.log:\n%s", b)
	}
	if log, _ := os.ReadFile(got.LogPath); !strings.Contains(string(log), "Step [300/300]") {
		t.Error("the log lacks the last line written while the disk was full")
	}
}

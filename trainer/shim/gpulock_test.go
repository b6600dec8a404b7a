package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// lockGPUs takes the GPU locks of uuids in a lock directory of the test's.
func lockGPUs(t *testing.T, uuids ...string) (*gpulock.Dir, []*os.File) {
	t.Helper()
	d, err := gpulock.Open(filepath.Join(t.TempDir(), "gpu-locks"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := gpulock.LockAll(d, uuids, gpulock.Holder{Run: 1, Job: "test", UID: os.Getuid()})
	if err != nil {
		t.Fatal(err)
	}
	return d, files
}

func holders(t *testing.T, d *gpulock.Dir) map[string]gpulock.Holding {
	t.Helper()
	hs, err := d.Holders()
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// openLocks lists the descriptors of process pid that are one of the
// files at paths.
func openLocks(t *testing.T, pid int, paths []string) []string {
	t.Helper()
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	var found []string
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed meanwhile, or a socket of another namespace
		}
		for _, p := range paths {
			if lfi, err := os.Stat(p); err == nil && os.SameFile(fi, lfi) {
				found = append(found, e.Name()+" -> "+p)
			}
		}
	}
	return found
}

// The shim holds the run's GPU locks after the starter closed its copies,
// keeps them from the child and its children (one of which left the
// group), names the main process in them, and releases them at the end.
func TestGPULocksHeldForTheRun(t *testing.T) {
	uuids := []string{"GPU-aaaa", "GPU-bbbb"}
	d, files := lockGPUs(t, uuids...)
	spec := newSpec(t, "stubborn")
	dir := spec.RunDir
	h, jobLock := start(t, spec, "", files...)
	for i, f := range files {
		if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("the starter's copy of lock %d after Start: %v, want closed", i, err)
		}
	}
	waitFor(t, 10*time.Second, "ready", logHas(t, dir, "ready\n"))
	start, err := procfs.ReadStat(h.PID)
	if err != nil {
		t.Fatal(err)
	}
	hs := holders(t, d)
	for _, u := range uuids {
		if hd := hs[u]; !hd.Held || hd.Holder.PID != h.PID || hd.Holder.PIDStart != start.Start || hd.Holder.Job != "test" {
			t.Errorf("%s while the run runs: %+v, want held, naming pid %d started at %d", u, hd, h.PID, start.Start)
		}
	}
	paths := []string{jobLock}
	for _, u := range uuids {
		paths = append(paths, filepath.Join(d.Path(), u+gpulock.Suffix))
	}
	pids := []int{h.PID}
	for _, m := range regexp.MustCompile(`grandchild (\d+) setsid=`).FindAllStringSubmatch(readLog(t, dir), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("pids %v, want the child and 2 grandchildren", pids)
	}
	for _, pid := range pids {
		if got := openLocks(t, pid, paths); len(got) > 0 {
			t.Errorf("process %d of the run holds %v", pid, got)
		}
	}
	if got := openLocks(t, h.ShimPID, paths); len(got) != 3 {
		t.Errorf("the shim holds %v, want the job's lock and 2 GPU locks", got)
	}
	if _, err := d.TryLock(uuids[0], gpulock.Holder{Job: "other"}); err == nil {
		t.Error("a second TryLock of the run's GPU succeeded")
	}

	if _, err := shimctl.Call(dir, shimctl.Request{Op: "kill", By: "test"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	wait(t, h, dir)
	hs = holders(t, d)
	for _, u := range uuids {
		if hd := hs[u]; hd.Taken() || hd.Holder.PID != h.PID {
			t.Errorf("%s after the end: %+v, want free, last held by pid %d", u, hd, h.PID)
		}
	}
	files, err = gpulock.LockAll(d, uuids, gpulock.Holder{Job: "next"})
	if err != nil {
		t.Fatalf("LockAll after the end: %v", err)
	}
	for _, f := range files {
		f.Close()
	}
}

// With the shim killed -9 while the run's main process lives, the GPU's
// flock is free, but the lock is refused as orphan-held until that process
// is gone.
func TestGPULockOfAnOrphanedRun(t *testing.T) {
	d, files := lockGPUs(t, "GPU-orphan")
	spec := newSpec(t, "quiet", "60000")
	h, _ := start(t, spec, "", files...)
	t.Cleanup(func() { unix.Kill(-h.PID, unix.SIGKILL) })
	waitFor(t, 10*time.Second, "first line", logHas(t, spec.RunDir, "step 1"))
	if err := unix.Kill(h.ShimPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if !alive(h.PID) {
		t.Fatal("the run's main process died with its shim")
	}
	hd := holders(t, d)["GPU-orphan"]
	if hd.Held || !hd.Orphan || hd.Holder.PID != h.PID {
		t.Errorf("after the shim's death: %+v, want not held but orphan-held by pid %d", hd, h.PID)
	}
	_, err := d.TryLock("GPU-orphan", gpulock.Holder{Job: "next"})
	var held *gpulock.HeldError
	if !errors.As(err, &held) || !held.Orphan || held.Holder.PID != h.PID || held.Holder.Run != 1 {
		t.Fatalf("TryLock while the orphan lives: %v, want refused as orphan-held by pid %d", err, h.PID)
	}
	if err := unix.Kill(-h.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var f *os.File
	waitFor(t, 10*time.Second, "the GPU free after the orphan's end", func() bool {
		unix.Wait4(h.PID, nil, unix.WNOHANG, nil) // reaped here when this process is its subreaper
		f, err = d.TryLock("GPU-orphan", gpulock.Holder{Job: "next"})
		return err == nil
	})
	f.Close()
}

// A shim told of GPU locks it did not inherit refuses to start the run;
// Start refuses a nil lock and closes the others.
func TestMissingGPULockIsRefused(t *testing.T) {
	spec := newSpec(t, "quiet")
	spec.ExtraLocks = 1
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	argv := shimArgv("")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(b)
	cmd.ExtraFiles = []*os.File{readyW} // no lock, and no descriptor 5
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	readyR.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, _ := bufio.NewReader(readyR).ReadString('\n')
	var ready shimctl.Ready
	json.Unmarshal([]byte(line), &ready)
	if ready.PID != 0 || !strings.Contains(ready.Error, "descriptor 5 is not an open lock file") {
		t.Errorf("the shim said %q, want the missing descriptor 5", line)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the shim exited 0")
	}
	if _, err := os.Stat(spec.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's directory: %v, want none (nothing started)", err)
	}

	_, files := lockGPUs(t, "GPU-x")
	if _, err := shimctl.Start(shimArgv(""), newSpec(t, "quiet"), nil, 10*time.Second, files[0], nil); err == nil || !strings.Contains(err.Error(), "extra lock 1 is nil") {
		t.Errorf("Start with a nil lock: %v", err)
	}
	if _, err := files[0].Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the other lock after the refusal: %v, want closed", err)
	}
}

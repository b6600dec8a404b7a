package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// The test binary doubles as the shim ("shim" as its first argument, the
// way Start runs "trainbot shim") and as the run's child programs (with
// childEnv set), so the tests run real processes end to end.
const (
	childEnv = "SHIMTEST_CHILD"
	diskEnv  = "SHIMTEST_DISK" // in the shim: "stall" or "enospc" output.log
	childOK  = "child-done"    // a child creates it in RUN_DIR when it has printed everything
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		switch os.Getenv(diskEnv) {
		case "stall":
			testHookLog = stallUntilChildDone
		case "enospc":
			testHookLog = failUntilChildDone
		}
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// A race-instrumented process sleeps 1 s at exit by default; the
		// shims and children of these tests are this binary.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// stallUntilChildDone is a disk whose first write blocks until the child
// has created RUN_DIR/child-done (at most 30 s): the child prints its all
// while the writer is blocked. It records in RUN_DIR/stall how it ended.
func stallUntilChildDone(w io.Writer, spec shimctl.Spec) io.Writer {
	return &testDisk{w: w, dir: spec.RunDir, stall: true}
}

// failUntilChildDone is a full disk: its first write writes 7 bytes and
// fails with ENOSPC, later ones fail without writing, until the child has
// created RUN_DIR/child-done. RUN_DIR/failures counts the failures.
func failUntilChildDone(w io.Writer, spec shimctl.Spec) io.Writer {
	return &testDisk{w: w, dir: spec.RunDir}
}

type testDisk struct {
	w        io.Writer
	dir      string
	stall    bool
	stalled  bool
	failures int
}

func (d *testDisk) childDone() bool {
	_, err := os.Stat(filepath.Join(d.dir, childOK))
	return err == nil
}

func (d *testDisk) Write(p []byte) (int, error) {
	if d.stall && !d.stalled {
		d.stalled = true
		start := time.Now()
		for !d.childDone() && time.Since(start) < 30*time.Second {
			time.Sleep(5 * time.Millisecond) // the simulated disk polls for the child's file
		}
		how := "child-done"
		if !d.childDone() {
			how = "timeout"
		}
		os.WriteFile(filepath.Join(d.dir, "stall"), []byte(fmt.Sprintf("%s %d", how, int64(time.Since(start)))), 0o644)
	}
	if !d.stall && !d.childDone() {
		d.failures++
		os.WriteFile(filepath.Join(d.dir, "failures"), []byte(strconv.Itoa(d.failures)), 0o644)
		if d.failures == 1 {
			n, _ := d.w.Write(p[:min(len(p), 7)])
			return n, unix.ENOSPC
		}
		return 0, unix.ENOSPC
	}
	return d.w.Write(p)
}

// child is one of the run's programs.
func child(mode string, args []string) int {
	arg := func(i int, def string) string {
		if i < len(args) {
			return args[i]
		}
		return def
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	runDir := os.Getenv("SHIMTEST_RUN_DIR")
	done := func(stats string) {
		os.WriteFile(filepath.Join(runDir, childOK), []byte(stats), 0o644)
	}
	// waitFinish waits (at most 20 s) for the test to create RUN_DIR/finish.
	waitFinish := func() {
		for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(runDir, "finish")); err == nil {
				return
			}
		}
	}
	switch mode {
	case "ctlcall": // ask the run in RUN_DIR arg 0 for its status; print the answer or the error
		resp, err := shimctl.Call(arg(0, ""), shimctl.Request{Op: "status"}, 5*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok pid", resp.State.PID)
		return 0
	case "ctlhold": // open N connections to the run in RUN_DIR arg 0 and say nothing; at the end of stdin, count those refused
		var conns []net.Conn
		for i := 0; i < atoi(arg(1, "64")); i++ {
			c, err := shimctl.Dial(arg(0, ""), 5*time.Second)
			if err != nil {
				fmt.Println("error:", err)
				return 1
			}
			conns = append(conns, c)
		}
		fmt.Println("holding", len(conns))
		io.Copy(io.Discard, os.Stdin)
		refused := 0
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			if strings.Contains(line, "may not control this run") {
				refused++
			}
		}
		fmt.Println("refused", refused)
		return 0
	case "peak": // hold N MiB for an instant (every page touched), free it, print, print its own VmHWM, exit
		b := make([]byte, atoi(arg(0, "64"))<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("peak held", len(b))
		b = nil
		runtime.GC()
		debug.FreeOSMemory()
		hwm, _ := procfs.ReadHWM(os.Getpid())
		fmt.Println("vmhwm", hwm)
		return 0
	case "steps": // N stdout lines, a stderr line every 7th, one write each; then wait for RUN_DIR/finish
		n := atoi(arg(0, "1000"))
		for i := 1; i <= n; i++ {
			fmt.Fprintf(os.Stdout, "step=%d loss=%.4f\n", i, 1/float64(i))
			if i%7 == 0 {
				fmt.Fprintf(os.Stderr, "warning %d: something on stderr\n", i)
			}
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		fmt.Fprint(os.Stderr, "progress 1\rprogress 2\rprogress 3\n")
		fmt.Fprint(os.Stdout, "no newline at the end")
		waitFinish()
		return 0
	case "ticks": // N lines, D ms apart
		n, d := atoi(arg(0, "40")), atoi(arg(1, "50"))
		for i := 1; i <= n; i++ {
			fmt.Printf("tick %d\n", i)
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
		return 0
	case "quiet": // one line, then sleep
		fmt.Println("step 1 loss=0.5")
		time.Sleep(time.Duration(atoi(arg(0, "60000"))) * time.Millisecond)
		return 0
	case "stubborn": // ignore SIGINT and SIGTERM; a grandchild in the group and one that left it with setsid
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		exe, _ := os.Executable()
		for _, setsid := range []bool{false, true} {
			c := exec.Command(exe)
			c.Env = append(os.Environ(), childEnv+"=sleeper")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
			if setsid {
				c.Stdout = os.Stdout // it holds the run's stdout too
			}
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("grandchild %d setsid=%v\n", c.Process.Pid, setsid)
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return 0
	case "sleeper":
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		time.Sleep(time.Minute)
		return 0
	case "printfast": // print 200-byte lines every D µs for T ms, timing each write; then child-done with the stats
		t, d := atoi(arg(0, "1500")), atoi(arg(1, "1000"))
		line := []byte(strings.Repeat("x", 188) + "\n")
		var n int
		var maxWrite, maxGap time.Duration
		start := time.Now()
		last := start
		for time.Since(start) < time.Duration(t)*time.Millisecond {
			n++
			copy(line, fmt.Sprintf("line %06d ", n))
			before := time.Now()
			if _, err := os.Stdout.Write(line); err != nil {
				return 1
			}
			after := time.Now()
			maxWrite = max(maxWrite, after.Sub(before))
			maxGap = max(maxGap, after.Sub(last))
			last = after
			time.Sleep(time.Duration(d) * time.Microsecond)
		}
		done(fmt.Sprintf(`{"lines":%d,"max_write_ns":%d,"max_gap_ns":%d}`, n, maxWrite, maxGap))
		return 0
	case "flood": // N MiB of 100-byte lines, then wait for RUN_DIR/finish
		n := atoi(arg(0, "12"))
		block := []byte(strings.Repeat(strings.Repeat("f", 99)+"\n", 1<<20/100))
		for i := 0; i < n*(1<<20)/len(block)+1; i++ {
			os.Stdout.Write(block)
		}
		waitFinish()
		return 0
	case "starter": // start a shim as the bot would, say its pids, and wait to be killed
		var spec shimctl.Spec
		json.Unmarshal([]byte(os.Getenv("SHIMTEST_SPEC")), &spec)
		lock, err := lockFile(os.Getenv("SHIMTEST_LOCK"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		h, err := shimctl.Start(shimArgv(""), spec, lock, 10*time.Second)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("shim %d child %d\n", h.ShimPID, h.PID)
		time.Sleep(time.Minute)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// shimArgv runs the test binary as the shim, with a simulated disk.
func shimArgv(disk string) []string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	if disk == "" {
		return []string{exe, "shim"}
	}
	return []string{"/usr/bin/env", diskEnv + "=" + disk, exe, "shim"}
}

// newSpec is a run of the child program mode in a fresh run directory.
func newSpec(t *testing.T, mode string, args ...string) shimctl.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	return shimctl.Spec{
		RunID: 1, Job: "test",
		Argv:   append([]string{exe}, args...),
		Env:    append(os.Environ(), childEnv+"="+mode, "SHIMTEST_RUN_DIR="+dir),
		RunDir: dir,
		// Short graces: the tests' children either obey at once or never.
		StopGrace: 300 * time.Millisecond, KillGrace: 300 * time.Millisecond, DrainTimeout: 500 * time.Millisecond,
	}
}

// lockFile opens and flocks a job's lock file, as the bot does.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockHeld reports whether someone holds the lock at path.
func lockHeld(t *testing.T, path string) bool {
	t.Helper()
	f, err := lockFile(path)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return false
}

// start starts spec's run under a shim with a lock in the test's
// directory, and extra (GPU locks) after it; the run is killed if the test
// ends first.
func start(t *testing.T, spec shimctl.Spec, disk string, extra ...*os.File) (*shimctl.Handle, string) {
	t.Helper()
	lockPath := filepath.Join(filepath.Dir(spec.RunDir), "job.lock")
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := lockFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := shimctl.Start(shimArgv(disk), spec, lock, 10*time.Second, extra...)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		// A run the test left behind is killed through its shim; only a
		// shim not yet reaped (its pid still its own) is killed by pid.
		shimctl.Call(spec.RunDir, shimctl.Request{Op: "kill", By: "test cleanup"}, time.Second)
		done := make(chan struct{})
		go func() { h.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			unix.Kill(h.ShimPID, unix.SIGKILL)
			<-done
		}
	})
	return h, lockPath
}

// shimLogTail is the end of a run directory's shim.log, for a failure.
func shimLogTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, shimctl.ShimLog))
	return string(b[max(0, len(b)-2048):])
}

// wait waits for the shim to exit and returns the final state.
func wait(t *testing.T, h *shimctl.Handle, dir string) shimctl.State {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shim exited with %v; shim.log: %s", err, shimLogTail(dir))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the shim did not exit in 60 s; shim.log: %s", shimLogTail(dir))
	}
	st := readState(t, dir)
	if !st.Ended {
		t.Errorf("state.json after the shim exited: ended = false")
	}
	return st
}

func readState(t *testing.T, dir string) shimctl.State {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, shimctl.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st shimctl.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state.json: %v", err)
	}
	return st
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a file or /proc
	}
}

func readLog(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, shimctl.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func logHas(t *testing.T, dir, s string) func() bool {
	return func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, shimctl.LogFile))
		return strings.Contains(string(b), s)
	}
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func vmRSS(pid int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

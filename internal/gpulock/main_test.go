package gpulock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the processes that race for locks (with
// helperEnv set): every lock test runs real processes.
const helperEnv = "GPULOCKTEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// A race-instrumented process sleeps 1 s at exit by default; the
		// helpers are this binary.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// helper is one process of a test. Each says "ready" once it has opened
// the directory, then waits for a line on stdin (the start) where the
// mode says so.
func helper(mode string, args []string) int {
	if u := os.Getenv("GPULOCKTEST_UMASK"); u != "" {
		n, _ := strconv.ParseInt(u, 8, 32)
		syscall.Umask(int(n))
	}
	d, err := Open(args[0])
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	holder := Holder{Job: os.Getenv("GPULOCKTEST_NAME"), UID: os.Getuid()}
	switch mode {
	case "race": // on the start, TryLock args[1]; say "won" or "held JOB"; hold until EOF
		in.ReadString('\n')
		f, err := d.TryLock(args[1], holder)
		var held *HeldError
		switch {
		case errors.As(err, &held):
			fmt.Printf("held %q\n", held.Holder.Job)
			return 0
		case err != nil:
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("won")
		io.Copy(io.Discard, in)
		f.Close()
		return 0
	case "hold": // TryLock args[1]; say "locked"; hold until EOF
		f, err := d.TryLock(args[1], holder)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("locked")
		io.Copy(io.Discard, in)
		f.Close()
		return 0
	case "worker": // on the start: args[1] rounds of LockAll of 1 GPU among args[2:]
		in.ReadString('\n')
		rounds, _ := strconv.Atoi(args[1])
		idx, _ := strconv.Atoi(os.Getenv("GPULOCKTEST_NAME"))
		wins, err := work(d, args[2:], 1, rounds, idx, holder, newOccupancy(filepath.Join(args[0], "occupied")))
		if err != nil {
			fmt.Println("error:", err)
			return 3
		}
		b, _ := json.Marshal(wins)
		fmt.Printf("wins %s\n", b)
		return 0
	}
	fmt.Println("error: unknown mode", mode)
	return 2
}

// proc is a helper process.
type proc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startHelper starts the helper mode on dir and waits for its "ready";
// it is killed if the test ends first.
func startHelper(t *testing.T, mode, name string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startHelperCmd(t, exec.Command(exe, args...), mode, name)
}

func startHelperCmd(t *testing.T, cmd *exec.Cmd, mode, name string) *proc {
	t.Helper()
	cmd.Env = append(cmd.Env, os.Environ()...)
	cmd.Env = append(cmd.Env, helperEnv+"="+mode, "GPULOCKTEST_NAME="+name)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line := p.line(t); line != "ready" {
		t.Fatalf("helper %s %s: %q, want ready", mode, name, line)
	}
	return p
}

// line reads the helper's next line, waiting at most 30 s.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		s, err := p.out.ReadString('\n')
		c <- res{strings.TrimSuffix(s, "\n"), err}
	}()
	select {
	case r := <-c:
		if r.err != nil && r.s == "" {
			t.Fatalf("helper %d: %v", p.cmd.Process.Pid, r.err)
		}
		return r.s
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("helper %d said nothing in 30 s", p.cmd.Process.Pid)
		return ""
	}
}

// end closes the helper's stdin (it releases what it holds and exits) and
// waits for it, at most 30 s.
func (p *proc) end(t *testing.T) {
	t.Helper()
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("helper %d: %v", p.cmd.Process.Pid, err)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("helper %d did not exit in 30 s", p.cmd.Process.Pid)
	}
}

// occupancy is the critical section's witness: a taker that holds a GPU's
// lock creates a file named by the UUID with O_EXCL, and removes it
// before it releases the lock. A second holder at the same time finds the
// file there.
type occupancy struct{ dir string }

func newOccupancy(dir string) occupancy {
	os.Mkdir(dir, 0o777)
	return occupancy{dir: dir}
}

func (o occupancy) enter(uuid string) error {
	f, err := os.OpenFile(filepath.Join(o.dir, uuid), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("two holders of %s at once", uuid)
	}
	if err != nil {
		return err
	}
	return f.Close()
}

func (o occupancy) leave(uuid string) error { return os.Remove(filepath.Join(o.dir, uuid)) }

// work does rounds of LockAll of per GPUs among uuids, each round trying
// the sets in turn from one that depends on idx and the round, until one
// is taken; inside, it enters the occupancy of each GPU, sleeps a little
// and leaves. It returns how often each GPU was won.
func work(d *Dir, uuids []string, per, rounds, idx int, h Holder, occ occupancy) (map[string]int, error) {
	wins := map[string]int{}
	n := len(uuids)
	for r := 0; r < rounds; r++ {
		for k := 0; k < n; k++ {
			var set []string
			for j := 0; j < per; j++ {
				set = append(set, uuids[(idx+r+k+j)%n])
			}
			files, err := LockAll(d, set, h)
			var held *HeldError
			if errors.As(err, &held) {
				continue
			}
			if err != nil {
				return wins, err
			}
			for _, u := range set {
				if err := occ.enter(u); err != nil {
					return wins, err
				}
			}
			time.Sleep(300 * time.Microsecond) // widen the critical section
			for _, u := range set {
				if err := occ.leave(u); err != nil {
					return wins, err
				}
				wins[u]++
			}
			for _, f := range files {
				f.Close()
			}
			break
		}
	}
	return wins, nil
}

// newDir is a fresh lock directory opened in the test's directory.
func newDir(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "locks"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc
	}
}

// reaper waits for cmd once, from any number of callers.
type reaper struct {
	once sync.Once
	cmd  *exec.Cmd
}

func (r *reaper) wait() { r.once.Do(func() { r.cmd.Wait() }) }

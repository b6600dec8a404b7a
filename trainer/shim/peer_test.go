package shim

import (
	"bufio"
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

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// nobody is the uid (and gid) of the tests that act as another user.
const nobody = 65534

// Another user of the server can neither reach a run's control socket
// (0600) nor, where the file's mode lets it connect, control the run: the
// shim checks the caller's uid (SO_PEERCRED).
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	base, caller := strangerCaller(t)
	spec := newSpec(t, "quiet", "20000")
	spec.RunDir = filepath.Join(base, "run")
	h, _ := start(t, spec, "")
	sock := filepath.Join(spec.RunDir, shimctl.SocketFile)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ctl.sock: %v %v, want mode 0600", fi.Mode(), err)
	}
	call := func() string {
		out, _ := asStranger(caller, "ctlcall", spec.RunDir).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if out := call(); !strings.Contains(out, "permission denied") {
		t.Errorf("uid %d on a 0600 socket: %q, want permission denied", nobody, out)
	}
	// Even with the socket opened to everyone, the uid check refuses.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if out := call(); !strings.Contains(out, "uid 65534 may not control this run") {
		t.Errorf("uid %d on an open socket: %q, want refused by uid", nobody, out)
	}
	if resp, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "status"}, 5*time.Second); err != nil || resp.State.PID != h.PID {
		t.Errorf("the owner's status: %+v %v, want pid %d", resp.State, err, h.PID)
	}
	if st := readState(t, spec.RunDir); st.Ended || st.Stop != nil {
		t.Errorf("the run was touched: %+v", st)
	}
}

// A stranger's idle connections take none of the shim's handlers: the
// peer is checked as it is accepted, so however many connections another
// user holds open without a word, the owner's status answers at once.
func TestStrangersIdleConnectionsDoNotDelayTheOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	base, caller := strangerCaller(t)
	spec := newSpec(t, "quiet", "20000")
	spec.RunDir = filepath.Join(base, "run")
	start(t, spec, "")
	if err := os.Chmod(filepath.Join(spec.RunDir, shimctl.SocketFile), 0o666); err != nil {
		t.Fatal(err)
	}
	const idle = 4 * maxConns
	hold := asStranger(caller, "ctlhold", spec.RunDir, strconv.Itoa(idle))
	stdin, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	hold.Stderr = hold.Stdout
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Process.Kill(); hold.Wait() })
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("the stranger's helper said nothing in 20 s")
			return ""
		}
	}
	if l := next(); l != fmt.Sprintf("holding %d", idle) {
		t.Fatalf("stranger: %q, want holding %d", l, idle)
	}
	// Every one of them was connected before the owner's: a server that
	// gave them handlers would keep the owner waiting for connDeadline
	// (5 s), past the bot's own timeout for a status (2 s).
	resp, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "status"}, 2*time.Second)
	if err != nil || resp.State == nil || resp.State.Ended {
		t.Fatalf("the owner's status with %d idle connections of another user open: %+v %v", idle, resp, err)
	}
	stdin.Close() // the helper reads what each connection was answered
	if l, want := next(), fmt.Sprintf("refused %d", idle); l != want {
		t.Errorf("stranger: %q, want %q (each refused with the reason, without a word sent)", l, want)
	}
}

// strangerCaller copies the test binary where uid 65534 may run it, into
// base, a directory that user may enter; the run of a test that acts as
// that user lives under base.
func strangerCaller(t *testing.T) (base, caller string) {
	t.Helper()
	base = t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	caller = filepath.Join(base, "caller")
	copyFile(t, exe, caller)
	return base, caller
}

// asStranger is the child program mode of caller, run as uid 65534.
func asStranger(caller, mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(caller, args...)
	cmd.Env = []string{childEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

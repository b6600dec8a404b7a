package shim

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Another user of the server can neither reach a run's control socket
// (0600) nor, where the file's mode lets it connect, control the run: the
// shim checks the caller's uid (SO_PEERCRED).
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	const nobody = 65534
	// The caller is this test binary, run as nobody from a copy it may
	// execute.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	caller := filepath.Join(base, "caller")
	copyFile(t, exe, caller)
	spec := newSpec(t, "quiet", "20000")
	spec.RunDir = filepath.Join(base, "run")
	h, _ := start(t, spec, "")
	sock := filepath.Join(spec.RunDir, SocketFile)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ctl.sock: %v %v, want mode 0600", fi.Mode(), err)
	}
	call := func() string {
		cmd := exec.Command(caller, spec.RunDir)
		cmd.Env = []string{childEnv + "=ctlcall", "GORACE=atexit_sleep_ms=0"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, _ := cmd.CombinedOutput()
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
	if resp, err := Call(spec.RunDir, Request{Op: "status"}, 5*time.Second); err != nil || resp.State.PID != h.PID {
		t.Errorf("the owner's status: %+v %v, want pid %d", resp.State, err, h.PID)
	}
	if st := readState(t, spec.RunDir); st.Ended || st.Stop != nil {
		t.Errorf("the run was touched: %+v", st)
	}
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

package gpulock

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A missing directory is made 01777 whatever the umask.
func TestOpenCreates(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "locks")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path() != path {
		t.Errorf("path %q, want %q", d.Path(), path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.ModeDir | os.ModeSticky | 0o777; fi.Mode() != want {
		t.Errorf("mode %v, want %v", fi.Mode(), want)
	}
	// Opened again (another trainbot), it is used as it is.
	if _, err := Open(path); err != nil {
		t.Errorf("second Open: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "parent")); err == nil || !strings.Contains(err.Error(), "no such") {
		t.Errorf("Open under a missing parent: %v, want an error", err)
	}
}

// An unsafe path is refused with the path and the fix in the message.
func TestOpenRefusesUnsafe(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "good")
	os.Mkdir(good, 0o755)
	mkdir := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(base, "link")
	os.Symlink(good, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	tests := []struct {
		name string
		path string
		want string // "" for accepted
	}{
		{"symlink to a directory", link, "is a symbolic link"},
		{"dangling symlink", func() string { p := filepath.Join(base, "dangling"); os.Symlink("/nonexistent", p); return p }(), "is a symbolic link"},
		{"file", file, "is not a directory"},
		{"0777 without sticky", mkdir("open", 0o777), "world-writable without the sticky bit (mode 0777)"},
		{"0770 without sticky", mkdir("group", 0o770), "group-writable without the sticky bit (mode 0770)"},
		{"01777", mkdir("sticky", 0o777|os.ModeSticky), ""},
		{"01770", mkdir("stickygroup", 0o770|os.ModeSticky), ""},
		{"0755", mkdir("mine", 0o755), ""},
		{"0700", mkdir("private", 0o700), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.path)
			if tt.want == "" {
				if err != nil {
					t.Errorf("Open: %v, want it accepted", err)
				}
				return
			}
			var ue *UnsafeDirError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) || ue.Fix == "" {
				t.Errorf("Open: %v, want an UnsafeDirError naming %s: %q and a fix", err, tt.path, tt.want)
			}
		})
	}
	// The fix it names is the fix.
	p := filepath.Join(base, "open")
	_, err := Open(p)
	if !strings.Contains(err.Error(), "chmod 1777 "+p) {
		t.Fatalf("the fix: %v", err)
	}
	os.Chmod(p, 0o777|os.ModeSticky)
	if _, err := Open(p); err != nil {
		t.Errorf("after chmod 1777: %v", err)
	}
}

// Another user's directory: accepted with the sticky bit (a labmate's
// trainbot made it), refused without, naming the owner.
func TestOpenAnotherUsersDirectory(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("making a directory of another user needs root")
	}
	base := t.TempDir()
	for _, c := range []struct {
		name string
		mode os.FileMode
		want string
	}{
		{"sticky", 0o777 | os.ModeSticky, ""},
		{"open", 0o777, "owned by uid 65534 and world-writable without the sticky bit"},
		{"readonly", 0o755, ""},
	} {
		p := filepath.Join(base, c.name)
		os.Mkdir(p, 0o700)
		os.Chmod(p, c.mode)
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// nobody is the uid (and gid) of the tests that act as another user.
const nobody = 65534

// Two users share the directory: each locks a GPU whose file the other
// created (0666 whatever the creator's umask), sees the other's hold and
// who it is.
func TestTwoUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
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
	d, err := Open(filepath.Join(base, "locks"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.TryLock("GPU-roots", Holder{Job: "root's", UID: 0})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	stranger := func(uuid string) *proc {
		cmd := exec.Command(caller, d.Path(), uuid)
		cmd.Env = []string{"GORACE=atexit_sleep_ms=0", "GPULOCKTEST_UMASK=077"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		return startHelperCmd(t, cmd, "hold", "stranger's")
	}
	for _, uuid := range []string{"GPU-roots", "GPU-strangers"} {
		p := stranger(uuid)
		if line := p.line(t); line != "locked" {
			t.Fatalf("the stranger locking %s: %s", uuid, line)
		}
		_, err := d.TryLock(uuid, Holder{Job: "root's"})
		var held *HeldError
		if !errors.As(err, &held) || held.Holder.UID != nobody || held.Holder.Job != "stranger's" {
			t.Errorf("%s while the stranger holds it: %v, want held by uid %d", uuid, err, nobody)
		}
		p.end(t)
		f, err := d.TryLock(uuid, Holder{Job: "root's"})
		if err != nil {
			t.Errorf("%s after the stranger: %v", uuid, err)
			continue
		}
		f.Close()
	}
	fi, err := os.Stat(filepath.Join(d.Path(), "GPU-strangers.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || fi.Mode().Perm() != 0o666 {
		t.Errorf("the stranger's lock file: uid %d mode %v, want %d and 0666 (its umask was 077)", st.Uid, fi.Mode(), nobody)
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

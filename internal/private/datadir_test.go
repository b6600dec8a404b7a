package private

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mkfile writes path with mode (whatever the umask).
func mkfile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (os.ModePerm | os.ModeSetgid)
}

// ownGroup is the process's group, as a Sharing.
func ownGroup(t *testing.T) Sharing {
	t.Helper()
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skipf("no name for gid %d: %v", os.Getgid(), err)
	}
	return Sharing{Group: g.Name, GID: os.Getgid()}
}

// A data directory an earlier version wrote 0644 and 0755 becomes
// private inside; its own mode is the user's (Exposures tells).
func TestMakeDataDirTakesBackWhatWasReadable(t *testing.T) {
	Restrict(false)
	data := filepath.Join(t.TempDir(), "data")
	if skipped, err := MakeDataDir(data, NotShared); err != nil || len(skipped) > 0 {
		t.Fatalf("a new directory: skipped %v, err %v", skipped, err)
	}
	if got := modeOf(t, data); got != 0o700 {
		t.Errorf("a new data directory is %v, want 0700", got)
	}
	db, log := filepath.Join(data, "trainbot.db"), filepath.Join(data, "runs", "1", "output.log")
	mkfile(t, db, 0o644)
	mkfile(t, log, 0o644)
	os.Chmod(filepath.Join(data, "runs"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(data, "link")) // a link is left alone
	os.Chmod(data, 0o750)
	if skipped, err := MakeDataDir(data, NotShared); err != nil || len(skipped) > 0 {
		t.Fatalf("skipped %v, err %v", skipped, err)
	}
	for path, want := range map[string]os.FileMode{db: 0o600, log: 0o600, filepath.Join(data, "runs"): 0o700, data: 0o750} {
		if got := modeOf(t, path); got != want {
			t.Errorf("%s is %v, want %v", path, got, want)
		}
	}
	if _, err := MakeDataDir(filepath.Join(db, "under-a-file"), NotShared); err == nil || !strings.HasPrefix(err.Error(), "data directory: ") {
		t.Errorf("a data directory under a file: %v, want the error", err)
	}
}

// Shared, the group reads what the owner reads and enters what the owner
// enters; it never writes, and others get nothing.
func TestMakeDataDirShared(t *testing.T) {
	s := ownGroup(t)
	Restrict(true)
	defer Restrict(false)
	data := filepath.Join(t.TempDir(), "data")
	db, script := filepath.Join(data, "trainbot.db"), filepath.Join(data, "runs", "1", "run.sh")
	mkfile(t, db, 0o666)
	mkfile(t, script, 0o700)
	if skipped, err := MakeDataDir(data, s); err != nil || len(skipped) > 0 {
		t.Fatalf("skipped %v, err %v", skipped, err)
	}
	for path, want := range map[string]os.FileMode{data: 0o750 | os.ModeSetgid, filepath.Join(data, "runs", "1"): 0o750 | os.ModeSetgid,
		db: 0o640, script: 0o750} {
		if got := modeOf(t, path); got != want {
			t.Errorf("%s is %v, want %v", path, got, want)
		}
	}
	if !s.Shared() || NotShared.Shared() {
		t.Errorf("Shared: %v for %+v, %v for NotShared", s.Shared(), s, NotShared.Shared())
	}
	if got, want := s.Note("/d"), "data directory /d is shared with group "+s.Group+" (mode 2750, files 0640): its members can read the history"; !strings.HasPrefix(got, want) {
		t.Errorf("Note = %q, want it to start %q", got, want)
	}
}

func TestLookupGroup(t *testing.T) {
	own := ownGroup(t)
	for _, name := range []string{own.Group, strconv.Itoa(own.GID)} {
		if s, err := LookupGroup(name); err != nil || s != own {
			t.Errorf("LookupGroup(%q) = %+v, %v; want %+v", name, s, err, own)
		}
	}
	s, err := LookupGroup("no-such-group-xyz")
	if err == nil || err.Error() != `no group "no-such-group-xyz" on this host (see getent group)` || s.Shared() {
		t.Errorf("an unknown group: %+v, %v", s, err)
	}
}

// The data directory and a config file with a secret are told when
// others may read them, with the chmod that fixes it; a config without
// secrets is its owner's business.
func TestExposures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "trainbot.toml")
	mkfile(t, cfg, 0o644)
	secrets := []string{"telegram.token"}
	if got := Exposures(dir, cfg, nil, NotShared); len(got) != 0 {
		t.Errorf("private, no secrets: %v", got)
	}
	if got := Exposures(dir, "", secrets, NotShared); len(got) != 0 {
		t.Errorf("no config file: %v", got)
	}
	os.Chmod(dir, 0o755)
	got := Exposures(dir, cfg, secrets, NotShared)
	want := []string{
		`data directory ` + dir + ` is readable by group and others (mode 0755): chmod 700 "` + dir + `"`,
		`config ` + cfg + ` holds a secret (telegram.token) and is readable by group and others (mode 0644): chmod 600 "` + cfg + `"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %d exposures", got, len(want))
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("got %s\nwant %s", got[i], want[i])
		}
	}
	if x := got[0]; x.What != "data directory" || x.Path != dir || x.Who != "group and others" || x.Mode.Perm() != 0o755 || x.Keys != nil {
		t.Errorf("the data directory's exposure: %+v", x)
	}
	// Shared, the group may read and enter: only others are told.
	os.Chmod(dir, 0o750)
	shared := Sharing{Group: "lab", GID: 1234}
	if got := Exposures(dir, "", nil, shared); len(got) != 0 {
		t.Errorf("shared 0750: %v", got)
	}
	os.Chmod(dir, 0o755)
	if got := Exposures(dir, "", nil, shared); len(got) != 1 || got[0].Who != "others" || !strings.HasSuffix(got[0].Fix, `chmod 2750 "`+dir+`"`) {
		t.Errorf("shared 0755: %v", got)
	}
	os.Chmod(dir, 0o700)
	if got := Exposures(filepath.Join(dir, "missing"), "", nil, NotShared); len(got) != 0 {
		t.Errorf("a data directory not made yet: %v", got)
	}
}

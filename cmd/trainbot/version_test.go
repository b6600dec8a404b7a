package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-compiler", Value: "gc"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T22:33:42Z"}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "d5fcc38c5af1f79c3e2514a17e89f1fa57f0b44a"
	for _, c := range []struct {
		name    string
		version string
		bi      *debug.BuildInfo
		want    buildInfo
	}{
		{"a build from a modified checkout", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201223342-d5fcc38c5af1+dirty"}, Settings: vcs(rev, "true")},
			buildInfo{"v0.0.0-20261201223342-d5fcc38c5af1+dirty", rev, "true", "go1.26.8"}},
		{"a tagged release, -X main.Version", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs(rev, "false")},
			buildInfo{"v1.2.3", rev, "false", "go1.26.8"}},
		{"go run: no vcs settings", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "-compiler", Value: "gc"}}},
			buildInfo{"(devel)", "unknown", "unknown", "go1.26.8"}},
		{"no build info", "", nil, buildInfo{"unknown", "unknown", "unknown", "unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readBuildInfo(c.version, c.bi); got != c.want {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

// trainbot version prints what the binary carries: the test binary's (go
// test records no vcs settings), and, built in a git repository holding
// this checkout's files, its revision and whether its tree was modified.
func TestVersionPrintsTheRevision(t *testing.T) {
	bi, _ := debug.ReadBuildInfo()
	if code, out, errOut := trainbot(t, "", "version"); code != 0 || out != readBuildInfo(Version, bi).String() {
		t.Errorf("version: %d %q %s, want %q", code, out, errOut, readBuildInfo(Version, bi).String())
	}
	if testing.Short() {
		t.Skip("-short: no build of trainbot in a new repository")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): no files to build from", err)
	}
	files, err := exec.Command("git", "-C", strings.TrimSpace(string(top)), "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	// A new repository: the go command records no vcs settings in a git
	// worktree (its .git is a file), and a clone would hold the last commit,
	// not the code under test.
	repo := filepath.Join(t.TempDir(), "trainbot")
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(top)), name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@127.0.0.1", "-C", repo}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "the code under test")
	head := git("rev-parse", "HEAD")
	build := func() string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "trainbot")
		cmd := exec.Command("go", "build", "-tags", "nonvml", "-o", bin, "./cmd/trainbot")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("trainbot version: %v", err)
		}
		return string(out)
	}
	if got := build(); !strings.Contains(got, "\nrevision "+head+"\nmodified false\n") {
		t.Errorf("version of a clean tree at %s:\n%s", head, got)
	}
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := build(); !strings.Contains(got, "\nrevision "+head+"\nmodified true\n") {
		t.Errorf("version of a modified tree at %s:\n%s", head, got)
	}
}

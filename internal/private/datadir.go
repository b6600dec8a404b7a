package private

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/internal/termsafe"
)

// Sharing is what [store] shared_group makes of the data directory: the
// group that may read it, or none (GID -1: NotShared): private to
// trainbot's user.
type Sharing struct {
	Group string // the group's name
	GID   int
}

// NotShared is a data directory private to trainbot's user.
var NotShared = Sharing{GID: -1}

// Shared reports whether a group may read the data directory.
func (s Sharing) Shared() bool { return s.GID >= 0 }

// Note says what sharing does, for the log and for check.
func (s Sharing) Note(dir string) string {
	return fmt.Sprintf("data directory %s is shared with group %s (mode 2750, files 0640): its members can read the history, run logs and charts", dir, s.Group)
}

// LookupGroup resolves shared_group, a group's name or gid: the group must
// exist, and trainbot's user must be in it (or be root) to give it the
// data directory. The error says why not, and what to do.
func LookupGroup(name string) (Sharing, error) {
	bad := func(format string, args ...any) (Sharing, error) {
		return NotShared, fmt.Errorf(format, args...)
	}
	var g *user.Group
	var err error
	if _, nerr := strconv.Atoi(name); nerr == nil {
		g, err = user.LookupGroupId(name)
	} else {
		g, err = user.LookupGroup(name)
	}
	if err != nil {
		return bad("no group %q on this host (see getent group)", name)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return bad("group %q has gid %q, not a number", name, g.Gid)
	}
	if os.Getuid() != 0 && gid != os.Getgid() {
		groups, err := os.Getgroups()
		if err != nil || !slices.Contains(groups, gid) {
			return bad("you (uid %d) are not in group %s: trainbot cannot give it the data directory (sudo usermod -aG %s $USER, then log in again)", os.Getuid(), g.Name, g.Name)
		}
	}
	return Sharing{Group: g.Name, GID: gid}, nil
}

// MakeDataDir creates the data directory 0700 (or, shared, 2750 and the
// group's), and takes from what an earlier version wrote inside it the
// bits the umask would not give now (0644 files become 0600; shared, they
// become the group's and 0640). An existing private directory's own mode
// is left as the user set it: Exposures tells when it shows too much.
// Files an earlier version created 0644 — trainbot.db, its -wal and -shm
// included, before the store opens and migrates it — become 0600.
//
// A path it cannot change (another user's file) does not stop trainbot:
// the failures come back in skipped, to be logged.
func MakeDataDir(dir string, s Sharing) (skipped []error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil // gone meanwhile, unreadable, or a link: nothing to change
		}
		switch {
		case s.Shared():
			err = share(path, d.IsDir(), s.GID)
		case path != dir:
			err = Tighten(path)
		}
		if err != nil {
			skipped = append(skipped, err)
		}
		return nil
	})
	return skipped, nil
}

// share gives path to the group: readable (and, a directory, enterable
// and setgid), never writable by it, and nothing for others.
func share(path string, isDir bool, gid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if err := os.Lchown(path, -1, gid); err != nil {
		return fmt.Errorf("give %s to group %d: %w", path, gid, err)
	}
	perm := fi.Mode().Perm()
	want := perm&0o700 | (perm&0o500)>>3 // the group gets the owner's r and x
	var mode os.FileMode = want
	if isDir {
		mode |= os.ModeSetgid
	}
	if fi.Mode()&(os.ModePerm|os.ModeSetgid) == mode {
		return nil
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("share %s: %w", path, err)
	}
	return nil
}

// Exposure is a data directory, or a config file holding a secret, that
// others may read.
type Exposure struct {
	What string // "data directory", "config"
	Path string
	Who  string // "group", "others", "group and others" (Exposed)
	Mode os.FileMode
	Fix  string   // the command that fixes it
	Keys []string // the secrets a config file holds
}

// String is the one line that says it: the path, who may read it, and the
// chmod that fixes it.
func (x Exposure) String() string {
	held := ""
	if len(x.Keys) > 0 {
		held = " holds a secret (" + strings.Join(x.Keys, ", ") + ") and"
	}
	return fmt.Sprintf("%s %s%s is readable by %s (mode %04o): %s", x.What, x.Path, held, x.Who, x.Mode.Perm(), x.Fix)
}

// Exposures checks the data directory and, when it holds secrets (the
// config's keys that hold one), the config file (none when configPath is
// ""). A data directory that does not exist yet is made private when it is
// created.
func Exposures(dataDir, configPath string, secrets []string, s Sharing) []Exposure {
	var out []Exposure
	if fi, err := os.Stat(dataDir); err == nil {
		allowed, mode := os.FileMode(0), "700"
		if s.Shared() {
			allowed, mode = 0o050, "2750"
		}
		if who := Exposed(fi, allowed); who != "" {
			out = append(out, Exposure{What: "data directory", Path: dataDir, Who: who, Mode: fi.Mode(),
				Fix: "chmod " + mode + " " + termsafe.Argv([]string{dataDir})})
		}
	}
	if configPath != "" && len(secrets) > 0 {
		if fi, err := os.Stat(configPath); err == nil {
			if who := Exposed(fi, 0); who != "" {
				out = append(out, Exposure{What: "config", Path: configPath, Who: who, Mode: fi.Mode(), Keys: secrets,
					Fix: "chmod 600 " + termsafe.Argv([]string{configPath})})
			}
		}
	}
	return out
}

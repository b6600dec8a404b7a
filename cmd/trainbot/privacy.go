package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// sharing is what [store] shared_group makes of the data directory: the
// group that may read it, or none (gid -1): private to trainbot's user.
type sharing struct {
	group string // as configured
	gid   int
}

func (s sharing) shared() bool { return s.gid >= 0 }

// sharingFromConfig resolves shared_group: the group must exist, and
// trainbot's user must be in it (or be root) to give it the directory.
func sharingFromConfig(c *config.Config) (sharing, config.Errors) {
	name := c.Store.SharedGroup
	if name == "" {
		return sharing{gid: -1}, nil
	}
	bad := func(format string, args ...any) (sharing, config.Errors) {
		return sharing{gid: -1}, config.Errors{c.ErrorAt("store.shared_group", format, args...)}
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
	return sharing{group: g.Name, gid: gid}, nil
}

// makeDataDir creates the data directory 0700 (or, shared, 2750 and the
// group's), and takes from what an earlier version wrote inside it the
// bits the umask would not give now (0644 files become 0600; shared, they
// become the group's and 0640). An existing private directory's own mode
// is left as the user set it: exposures tells when it shows too much.
// Files an earlier version created 0644 — trainbot.db, its -wal and -shm
// included, before the store opens and migrates it — become 0600.
//
// A path it cannot change (another user's file) does not stop trainbot:
// the failures come back in skipped, to be logged.
func makeDataDir(dir string, s sharing) (skipped []error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil // gone meanwhile, unreadable, or a link: nothing to change
		}
		switch {
		case s.shared():
			err = share(path, d.IsDir(), s.gid)
		case path != dir:
			err = private.Tighten(path)
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

// exposure is a data directory, or a config file holding a secret, that
// others may read.
type exposure struct {
	what string // "data directory", "config"
	path string
	who  string // "group", "others", "group and others"
	mode os.FileMode
	fix  string // the command that fixes it
	keys []string
}

// String is the one line that says it: the path, who may read it, and the
// chmod that fixes it.
func (x exposure) String() string {
	held := ""
	if len(x.keys) > 0 {
		held = " holds a secret (" + strings.Join(x.keys, ", ") + ") and"
	}
	return fmt.Sprintf("%s %s%s is readable by %s (mode %04o): %s", x.what, x.path, held, x.who, x.mode.Perm(), x.fix)
}

// exposures checks the data directory and, when it holds a secret, the
// config file. A data directory that does not exist yet is made private
// when it is created.
func exposures(c *config.Config, configPath string, s sharing) []exposure {
	var out []exposure
	if fi, err := os.Stat(c.DataDir); err == nil {
		allowed, mode := os.FileMode(0), "700"
		if s.shared() {
			allowed, mode = 0o050, "2750"
		}
		if who := private.Exposed(fi, allowed); who != "" {
			out = append(out, exposure{what: "data directory", path: c.DataDir, who: who, mode: fi.Mode(),
				fix: "chmod " + mode + " " + shimctl.QuoteArgv([]string{c.DataDir})})
		}
	}
	if keys := c.SecretsInFile(); configPath != "" && len(keys) > 0 {
		if fi, err := os.Stat(configPath); err == nil {
			if who := private.Exposed(fi, 0); who != "" {
				out = append(out, exposure{what: "config", path: configPath, who: who, mode: fi.Mode(), keys: keys,
					fix: "chmod 600 " + shimctl.QuoteArgv([]string{configPath})})
			}
		}
	}
	return out
}

// sharingNote says what shared_group does, for the log and for check.
func sharingNote(dir string, s sharing) string {
	return fmt.Sprintf("data directory %s is shared with group %s (mode 2750, files 0640): its members can read the history, run logs and charts", dir, s.group)
}

// Package private keeps trainbot's secrets and files to its user: on a
// server shared by many Unix users, the training it starts does not
// inherit its secrets (WithoutSecrets), and its data directory, database,
// logs, charts, state files, locks and sockets are no one else's to read.
//
// The one mechanism is the process umask, set once at start (Restrict):
// 077, or 027 when the data directory is shared with a group, so every
// file any package creates — SQLite's database, WAL and shared memory
// files included, which take the database file's mode — is 0600 (0640) and
// every directory 0700 (0750), whatever mode the code asks for. The
// per-run supervisor inherits it; the training it starts gets the umask
// trainbot had before (Original), since the script's own files
// (checkpoints, exports) are its user's business.
//
// The umask is process-wide state, so this package mirrors it: Mode and
// Tighten use the mask Restrict set, or the process's own when it never
// ran.
//
// What an earlier version left readable is taken back at start
// (MakeDataDir); with [store] shared_group the data directory is given to
// a group instead (LookupGroup, Sharing). What the umask cannot take back
// — the data directory's own mode, a config file holding a secret — is
// told, with the chmod that fixes it (Exposures).
package private

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Masks set by Restrict.
const (
	PrivateMask = 0o077 // files 0600, directories 0700
	SharedMask  = 0o027 // files 0640, directories 0750: the group reads
)

var (
	mu       sync.Mutex
	set      bool
	mask     int // the mask Restrict set
	original int // the umask before the first Restrict
)

// Restrict sets the process umask to PrivateMask, or SharedMask when
// shared. The first call remembers the umask it replaces (Original).
func Restrict(shared bool) {
	m := PrivateMask
	if shared {
		m = SharedMask
	}
	mu.Lock()
	defer mu.Unlock()
	old := syscall.Umask(m)
	if !set {
		original, set = old, true
	}
	mask = m
}

// Original returns the umask the process had before Restrict first ran;
// ok is false when it never ran.
func Original() (umask int, ok bool) {
	mu.Lock()
	defer mu.Unlock()
	return original, set
}

// Mask returns the umask in force: the one Restrict set, or else the
// process's (from /proc/self/status; 022 when it cannot be read).
func Mask() int {
	mu.Lock()
	defer mu.Unlock()
	if set {
		return mask
	}
	return processMask()
}

// processMask reads the umask without changing it (Linux 4.7 and later).
func processMask() int {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32); err == nil {
					return int(m)
				}
			}
		}
	}
	return 0o022
}

// Mode returns perm as the umask in force leaves it: what a file created
// now with perm gets. For a chmod that must not give more than a create.
func Mode(perm os.FileMode) os.FileMode {
	return perm &^ os.FileMode(Mask())
}

// Tighten takes from an existing file or directory the permission bits
// the umask in force would not have given it (a database an earlier
// version created 0644 becomes 0600), and keeps the special bits (setgid
// of a shared directory). A missing path is no error.
func Tighten(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	perm := fi.Mode().Perm()
	want := Mode(perm)
	if want == perm {
		return nil
	}
	if err := os.Chmod(path, want|fi.Mode()&(os.ModeSetgid|os.ModeSetuid|os.ModeSticky)); err != nil {
		return fmt.Errorf("make %s private: %w", path, err)
	}
	return nil
}

// Exposed says what of a file or directory others than its owner may
// read, beyond allowed (0o050: the group may read and enter): "" when
// nothing, else "group", "others" or "group and others". For a directory
// entering (x) counts, since known names inside it (trainbot.db) can then
// be opened.
func Exposed(fi os.FileInfo, allowed os.FileMode) string {
	bits := os.FileMode(0o044)
	if fi.IsDir() {
		bits = 0o055
	}
	extra := fi.Mode().Perm() & bits &^ allowed
	switch {
	case extra&0o070 != 0 && extra&0o007 != 0:
		return "group and others"
	case extra&0o070 != 0:
		return "group"
	case extra&0o007 != 0:
		return "others"
	}
	return ""
}

// EnvPrefix starts the names of trainbot's own environment variables.
const EnvPrefix = "TRAINBOT_"

// WithoutSecrets is environ without trainbot's secrets, for a process that
// runs someone's training (the run's supervisor, the run, sbatch whose
// environment becomes a Slurm job's): without every TRAINBOT_ variable
// (trainbot's settings, TRAINBOT_TELEGRAM_TOKEN among them; a run's own are
// set afresh) and without every variable named in secret (the config's
// push channels' key_env, secret_env…). What is left is the environment
// trainbot was started with: PATH, HOME, CUDA_VISIBLE_DEVICES, a conda
// environment.
func WithoutSecrets(environ, secret []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) || slices.Contains(secret, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CheckpointSettle is how long a checkpoint file must stay unchanged to be
// taken as complete when no "<file>.done" marker says so.
const CheckpointSettle = 30 * time.Second

// CheckpointDoneSuffix is the marker a script may write beside a
// checkpoint once it is complete ("ckpt-40.pt.done", empty): such a file
// is complete at once, without waiting CheckpointSettle.
const CheckpointDoneSuffix = ".done"

// ErrNoCheckpoint is returned by NewestCheckpoint when no complete file
// matches.
var ErrNoCheckpoint = errors.New("no complete checkpoint")

// NewestCheckpoint returns the newest complete checkpoint file of pattern
// (a job's checkpoint key): a glob ("ckpt/*.pt") or a directory (its
// files), relative to dir unless absolute. A file is complete when
// "<file>.done" exists, or when it has not changed for settle before now
// (settle 0: every file is). Markers themselves, directories and
// "*.tmp" files are never checkpoints. Of the complete files, the newest by
// modification time wins (the later name on a tie). No match is an error
// wrapping ErrNoCheckpoint; a malformed glob is filepath.ErrBadPattern.
func NewestCheckpoint(dir, pattern string, settle time.Duration, now time.Time) (path string, mod time.Time, err error) {
	if strings.TrimSpace(pattern) == "" {
		return "", time.Time{}, fmt.Errorf("checkpoint pattern is empty: %w", ErrNoCheckpoint)
	}
	p := pattern
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if st, serr := os.Stat(p); serr == nil && st.IsDir() {
		p = filepath.Join(globEscape(p), "*")
	}
	matches, err := filepath.Glob(p)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("checkpoint %q: %w", pattern, err)
	}
	for _, m := range matches {
		if strings.HasSuffix(m, CheckpointDoneSuffix) || strings.HasSuffix(m, ".tmp") {
			continue
		}
		st, err := os.Stat(m)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if !checkpointDone(m) && now.Sub(st.ModTime()) < settle {
			continue
		}
		if path == "" || st.ModTime().After(mod) || (st.ModTime().Equal(mod) && m > path) {
			path, mod = m, st.ModTime()
		}
	}
	if path == "" {
		return "", time.Time{}, fmt.Errorf("checkpoint %q: %w", pattern, ErrNoCheckpoint)
	}
	return path, mod, nil
}

func checkpointDone(path string) bool {
	_, err := os.Stat(path + CheckpointDoneSuffix)
	return err == nil
}

// globEscape makes a directory's name literal in a glob.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

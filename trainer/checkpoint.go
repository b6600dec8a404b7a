package trainer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CheckpointSettle is how long a checkpoint file must have been unchanged
// to count as complete, unless a "<file>.done" marker says it is.
const CheckpointSettle = 30 * time.Second

// doneSuffix marks a complete checkpoint: the script writes
// "ckpt-40.pt.done" once "ckpt-40.pt" is whole.
const doneSuffix = ".done"

// NewestCheckpoint is the newest complete checkpoint of pattern (a glob,
// or a directory: its files), relative to dir: a file with a .done marker,
// or unchanged for settle by now. "" when there is none.
func NewestCheckpoint(dir, pattern string, settle time.Duration, now time.Time) (path string, mod time.Time, err error) {
	if pattern == "" {
		return "", time.Time{}, nil
	}
	if !filepath.IsAbs(pattern) && dir != "" {
		pattern = filepath.Join(dir, pattern)
	}
	if fi, err := os.Stat(pattern); err == nil && fi.IsDir() {
		pattern = filepath.Join(pattern, "*")
	}
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", time.Time{}, err
	}
	for _, m := range matches {
		if strings.HasSuffix(m, doneSuffix) {
			continue
		}
		fi, err := os.Stat(m)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", time.Time{}, err
		}
		if fi.IsDir() {
			continue
		}
		_, derr := os.Stat(m + doneSuffix)
		if derr != nil && now.Sub(fi.ModTime()) < settle {
			continue // still being written, maybe
		}
		if path == "" || fi.ModTime().After(mod) {
			path, mod = m, fi.ModTime()
		}
	}
	return path, mod, nil
}

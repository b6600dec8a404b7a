package tfevents

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// FilePrefix starts the name of every event file
// (events.out.tfevents.TIME.HOST[.PID.N][.SUFFIX]).
const FilePrefix = "events.out.tfevents."

// File reads one event file by offset as it grows.
type File struct {
	Path string
	Rel  string // the path under the followed directory ("events.out…", "loss_train/events.out…")
	// Off is the offset of the next record to read.
	Off     int64
	plugins Plugins
	buf     []byte
	// Corrupt counts the stretches of bytes skipped as corrupt; Warned
	// says the one warning of the file was given.
	Corrupt int
	Warned  bool
	// Torn is the size of the incomplete record at the end of the file
	// after the last read (0 when the file ends at a record's end).
	Torn int64
}

// NewFile returns a File that reads path from offset 0.
func NewFile(path, rel string) *File {
	return &File{Path: path, Rel: rel, plugins: Plugins{}}
}

// Record is what one record of a file held: its scalars, and the offset
// just past it (the file's offset to store once they are stored).
type Record struct {
	Scalars []Scalar
	End     int64
}

// readChunk is how much of a file one Read takes at most (a record
// longer than it is read whole, up to MaxRecord).
const readChunk = 1 << 20

// Read reads the complete records from Off, at most about budget bytes,
// calls f with each record that holds scalars, and advances Off. It
// returns the bytes consumed; a torn last record is left for the next
// Read. A record that does not decode is skipped like a corrupt one.
func (f *File) Read(budget int64, fn func(Record)) (int64, []Corrupt, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return 0, nil, err
	}
	defer fh.Close()
	var total int64
	var corrupt []Corrupt
	want := readChunk
	for total < budget {
		if cap(f.buf) < want {
			f.buf = make([]byte, want)
		}
		b := f.buf[:want]
		n, err := fh.ReadAt(b, f.Off)
		if err != nil && !errors.Is(err, io.EOF) {
			return total, corrupt, err
		}
		b = b[:n]
		frames, used, bad := Frames(b)
		for _, c := range bad {
			c.Off += int(f.Off)
			corrupt = append(corrupt, c)
		}
		for _, fr := range frames {
			scalars, derr := DecodeEvent(fr.Data, f.plugins)
			if derr != nil {
				corrupt = append(corrupt, Corrupt{Off: int(f.Off) + fr.End - len(fr.Data) - frameExtra, Len: len(fr.Data) + frameExtra, Why: derr.Error()})
			}
			if len(scalars) > 0 {
				fn(Record{Scalars: scalars, End: f.Off + int64(fr.End)})
			}
		}
		f.Off += int64(used)
		total += int64(used)
		f.Corrupt += len(bad)
		f.Torn = int64(n - used)
		if n < want { // the end of the file
			return total, corrupt, nil
		}
		if used == 0 {
			// One record longer than the buffer: read it whole next time.
			if want >= MaxRecord+frameExtra {
				return total, corrupt, fmt.Errorf("record at %d: longer than %d bytes", f.Off, MaxRecord)
			}
			want = min(2*want, MaxRecord+frameExtra)
		}
	}
	return total, corrupt, nil
}

// Dir follows the event files under a directory: those in it, and those
// in its subdirectories down to MaxDepth (PyTorch's add_scalars and
// Lightning's version_N write there), each by offset, new files as they
// appear. A corrupt record is skipped with one warning per file.
type Dir struct {
	Root string
	Log  *slog.Logger
	// Files by Rel path.
	Files map[string]*File
	// Offsets are where files seen by an earlier reader were read to
	// (stored by the bot): records before them are replayed (Record.Replay).
	Offsets map[string]int64
	// Since, when set, leaves out the files last written before it: those
	// of earlier runs logging to the same directory (a writer always
	// starts a file of its own).
	Since time.Time
	old   map[string]bool // files left out for Since
}

// MaxDepth is how deep under Root event files are looked for.
const MaxDepth = 2

// maxFiles bounds the files a Dir follows.
const maxFiles = 1000

// DirRecord is a record of one of a Dir's files.
type DirRecord struct {
	Record
	File *File
	// Replay is true for a record an earlier reader already stored
	// (before Offsets[File.Rel]).
	Replay bool
}

// NewDir follows root; offsets (nil for none) are how far an earlier
// reader stored each file.
func NewDir(root string, offsets map[string]int64, log *slog.Logger) *Dir {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dir{Root: root, Log: log, Files: map[string]*File{}, Offsets: offsets}
}

// Poll looks for new files and reads every file's new records, at most
// about budget bytes in all, calling fn with each record in file order
// (files sorted by name: the writer's start time is in it). It returns
// the bytes read.
func (d *Dir) Poll(budget int64, fn func(DirRecord)) int64 {
	d.scan()
	var total int64
	for _, rel := range slices.Sorted(maps.Keys(d.Files)) {
		f := d.Files[rel]
		stored := d.Offsets[rel]
		n, corrupt, err := f.Read(budget-total, func(r Record) {
			fn(DirRecord{Record: r, File: f, Replay: r.End <= stored})
		})
		total += n
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.Log.Warn("read event file", "file", f.Path, "err", err)
		}
		if len(corrupt) > 0 && !f.Warned {
			f.Warned = true
			c := corrupt[0]
			d.Log.Warn("event file: skipped a corrupt record (further ones in this file are skipped without a word)",
				"file", f.Path, "offset", c.Off, "bytes", c.Len, "why", c.Why)
		}
		if total >= budget {
			break
		}
	}
	return total
}

// TornAtEnd lists the files whose last record is incomplete, for the end of
// a run (their writer died mid-record).
func (d *Dir) TornAtEnd() []*File {
	var out []*File
	for _, rel := range slices.Sorted(maps.Keys(d.Files)) {
		if f := d.Files[rel]; f.Torn > 0 {
			out = append(out, f)
		}
	}
	return out
}

// scan adds the event files not followed yet.
func (d *Dir) scan() {
	if len(d.Files) >= maxFiles {
		return
	}
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return // not there yet
		}
		for _, e := range entries {
			name := e.Name()
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			switch {
			case e.IsDir() && depth < MaxDepth:
				walk(filepath.Join(dir, name), r, depth+1)
			case e.Type().IsRegular() && strings.HasPrefix(name, FilePrefix):
				if _, ok := d.Files[r]; ok || d.old[r] || len(d.Files) >= maxFiles {
					continue
				}
				if _, stored := d.Offsets[r]; !stored && !d.Since.IsZero() {
					if fi, err := e.Info(); err != nil || fi.ModTime().Before(d.Since) {
						if d.old == nil {
							d.old = map[string]bool{}
						}
						d.old[r] = err == nil
						continue
					}
				}
				d.Files[r] = NewFile(filepath.Join(dir, name), r)
			}
		}
	}
	walk(d.Root, "", 0)
}

// Sub is the subdirectory of a file under the followed directory ("" for
// a file in it): MetricName's prefix.
func (f *File) Sub() string {
	if i := strings.LastIndexByte(f.Rel, '/'); i >= 0 {
		return f.Rel[:i]
	}
	return ""
}

// Package gpulock is the per-GPU lock that every trainbot on a host
// honours: one file per GPU UUID in a host-wide directory (by default
// /tmp/trainbot-gpu-locks, mode 01777 like /tmp), flock'ed for the whole
// life of the run that has the GPU — by the run's supervisor, as it holds
// the job's lock — and holding one JSON line, the Holder, that says which
// trainbot run that is.
//
// Trust model: the locks are cooperative between the users of one host.
// Every user may create, take and rewrite lock files in the directory (the
// files are mode 0666, so that a labmate's trainbot can lock a GPU whose
// file someone else created), and the sticky bit keeps them from deleting
// or replacing each other's files; anyone can still use a GPU without a
// lock, and a lock file's content is what its last writer said. So a lock
// says which trainbot run has the GPU, and nothing more: NVML's view of
// memory and processes is the ground truth about everyone else (package
// gpu). Open refuses a directory in which anyone could replace the lock
// files (writable by others without the sticky bit) or that is not a
// directory at all.
//
// A lock is the flock(2) of the open file description, so it goes with
// the process that holds it, whatever kills it. When that process (a run's
// supervisor) dies while the run's main process lives on, the flock is
// free but the GPU is not: TryLock also refuses a lock whose last Holder's
// process (PID, told from a newer one with the same pid by PIDStart), or a
// process of its group, still lives (HeldError.Orphan).
//
// Lock files are never removed: a file removed while it is held would let
// the next taker create a new one and hold "the same" lock beside the
// first.
package gpulock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is the lock directory the callers use unless configured
// otherwise.
const DefaultDir = "/tmp/trainbot-gpu-locks"

// Suffix ends every lock file's name: the sanitised UUID, then Suffix.
const Suffix = ".lock"

const (
	maxUUID   = 200      // longer is not a GPU's UUID (a file name has 255 bytes)
	maxHolder = 64 << 10 // a holder is one short JSON line
	// A Holders probe holds a shared flock for two system calls; a
	// TryLock that meets one tries again, waiting 1, 2, 4, 8 and 16 ms,
	// before it calls the lock held.
	probeRetries = 5
)

// Dir is a host-wide lock directory, as Open checked it. It may be used
// from any number of goroutines.
type Dir struct {
	path string
}

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// UnsafeDirError is Open's refusal of a path that cannot keep the locks.
type UnsafeDirError struct {
	Path   string
	Reason string // "is a symbolic link", "is writable by others without the sticky bit (mode 0777)", …
	Fix    string // what to do about it
}

func (e *UnsafeDirError) Error() string {
	return "GPU lock directory " + e.Path + " " + e.Reason + ": " + e.Fix
}

// Open returns the host-wide lock directory dir, created when missing:
// mkdir, then mode 01777 whatever the umask (like /tmp: every user may
// create lock files in it, nobody may remove another's). A directory
// created meanwhile by someone else, another user included, is used as it
// is. It refuses, with an *UnsafeDirError that names the path and the fix,
// a symbolic link, something other than a directory, and a directory that
// others may write to without the sticky bit (there anyone could remove a
// held lock's file and create another: two holders of one GPU).
//
// A directory of another user with the sticky bit is accepted: the first
// trainbot of a host creates the directory, and its labmates' trainbots
// must share it. Its owner could remove others' lock files — which the
// trust model leaves to the users' cooperation (see the package comment).
func Open(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("GPU lock directory: no path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("GPU lock directory %s: %w", dir, err)
	}
	created := false
	switch err := unix.Mkdir(abs, 0o1777); {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	default:
		var st unix.Stat_t
		if unix.Lstat(abs, &st) != nil {
			return nil, fmt.Errorf("create the GPU lock directory %s: %w", abs, err)
		}
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Lstat(abs, &st) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return nil, &UnsafeDirError{Path: abs, Reason: "is a symbolic link",
					Fix: "trainbot does not follow it (whoever may change the link may point it anywhere); remove it (rm " + abs + ") or set [gpu] lock_dir to a real directory"}
			case unix.S_IFDIR:
			default:
				return nil, &UnsafeDirError{Path: abs, Reason: "is not a directory",
					Fix: "remove it or set [gpu] lock_dir to another path"}
			}
		}
		return nil, fmt.Errorf("open the GPU lock directory %s: %w", abs, err)
	}
	defer unix.Close(fd)
	if created {
		// Through the descriptor, not the path: the directory made is the
		// one whose mode is set.
		if err := unix.Fchmod(fd, 0o1777); err != nil {
			return nil, fmt.Errorf("GPU lock directory %s: chmod 1777: %w", abs, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("GPU lock directory %s: %w", abs, err)
	}
	if err := checkDir(abs, st, os.Getuid()); err != nil {
		return nil, err
	}
	return &Dir{path: abs}, nil
}

// checkDir refuses a directory that others may write to without the
// sticky bit; uid is the caller's.
func checkDir(path string, st unix.Stat_t, uid int) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &UnsafeDirError{Path: path, Reason: "is not a directory", Fix: "remove it or set [gpu] lock_dir to another path"}
	}
	perm := st.Mode & 0o7777
	if perm&0o022 == 0 || perm&unix.S_ISVTX != 0 {
		return nil
	}
	who := "group"
	if perm&0o002 != 0 {
		who = "world"
	}
	if st.Uid != 0 && int(st.Uid) != uid {
		return &UnsafeDirError{Path: path,
			Reason: fmt.Sprintf("is owned by uid %d and %s-writable without the sticky bit (mode %04o): anyone who may write to it could remove a held lock's file and make another", st.Uid, who, perm),
			Fix:    "ask its owner to chmod 1777 " + path + ", or set [gpu] lock_dir to another path"}
	}
	return &UnsafeDirError{Path: path,
		Reason: fmt.Sprintf("is %s-writable without the sticky bit (mode %04o): anyone who may write to it could remove a held lock's file and make another", who, perm),
		Fix:    "chmod 1777 " + path + " (or chmod go-w it, for a directory of yours alone)"}
}

// Holder is what a lock file says of the run that holds (or last held)
// the GPU: one JSON line.
type Holder struct {
	UUID string `json:"uuid"` // the GPU's
	Run  int64  `json:"run"`  // the run's id in its trainbot's store
	Job  string `json:"job"`
	User string `json:"user"` // who runs that trainbot (a user name)
	UID  int    `json:"uid"`
	// PID is the run's main process, also its process group id; 0 until
	// it is known. PIDStart is its start time in clock ticks after boot
	// (field 22 of /proc/PID/stat), which tells it from a newer process
	// that got the same pid; TryLock, Update and SetPID fill it from /proc
	// when it is 0.
	PID      int    `json:"pid"`
	PIDStart uint64 `json:"pid_start"`
	DataDir  string `json:"data_dir"` // the holding trainbot's data directory
	Host     string `json:"host"`     // TryLock fills it with the host name when empty
	// Since is when the lock was taken; TryLock fills it when zero.
	Since time.Time `json:"since"`
}

// HeldError is TryLock's refusal of a GPU that someone holds.
type HeldError struct {
	UUID   string
	Holder Holder // what the lock file says; zero when HolderErr
	// HolderErr says why Holder is zero: the file was empty or not a
	// holder (an older or foreign file, or a holder still being written).
	HolderErr error
	// Orphan: nobody holds the flock, but Holder's process, or a process
	// of its group, lives on (its supervisor was killed; the training goes
	// on without it).
	Orphan bool
}

func (e *HeldError) Error() string {
	h := e.Holder
	switch {
	case e.HolderErr != nil:
		return fmt.Sprintf("GPU %s is locked; the lock file does not say by whom (%v)", e.UUID, e.HolderErr)
	case e.Orphan:
		return fmt.Sprintf("GPU %s: process group %d of run #%d (%s) of %s lives on after its supervisor died", e.UUID, h.PID, h.Run, h.Job, h.who())
	}
	return fmt.Sprintf("GPU %s is held by run #%d (%s) of %s since %s", e.UUID, h.Run, h.Job, h.who(), h.Since.Format(time.RFC3339))
}

// who is the holder's user and host for an error message.
func (h Holder) who() string {
	u := h.User
	if u == "" {
		u = fmt.Sprintf("uid %d", h.UID)
	}
	if h.Host != "" {
		u += "@" + h.Host
	}
	return u
}

// fileName is the lock file's name for uuid: every byte but letters,
// digits, '-', '_' and '.' becomes '_' (a GPU's UUID, GPU-…, is kept as
// it is; a MIG device's GPU-…/1/0 loses its slashes).
func fileName(uuid string) (string, error) {
	if uuid == "" {
		return "", errors.New("GPU lock: no UUID")
	}
	if len(uuid) > maxUUID {
		return "", fmt.Errorf("GPU lock: UUID of %d bytes (at most %d)", len(uuid), maxUUID)
	}
	b := []byte(uuid)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b) + Suffix, nil
}

// TryLock takes the lock of the GPU uuid without waiting and writes h in
// it (with UUID set, and Since, Host and PIDStart filled when zero). It
// returns the locked file, which the caller keeps open for as long as the
// run has the GPU — handing it to the run's supervisor (shimctl.Start),
// which then holds it — and closes to release the lock.
//
// The lock file is created when missing, mode 0666 whatever the umask, so
// every user's trainbot can lock it later. It returns a *HeldError when
// someone holds the lock, or when nobody does but the process the lock
// file names (or its process group) still lives (Orphan).
func (d *Dir) TryLock(uuid string, h Holder) (*os.File, error) {
	f, _, err := d.tryLock(uuid, h)
	return f, err
}

// tryLock is TryLock, returning also what the lock file held before (to
// put back when LockAll gives the lock up again).
func (d *Dir) tryLock(uuid string, h Holder) (*os.File, []byte, error) {
	name, err := fileName(uuid)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(d.path, name)
	host := hostname()
	for attempt := 0; ; attempt++ {
		f, err := openLock(path)
		if err != nil {
			return nil, nil, err
		}
		fd := int(f.Fd())
		if err := lockEx(fd); err != nil {
			if !errors.Is(err, unix.EWOULDBLOCK) {
				f.Close()
				return nil, nil, fmt.Errorf("lock %s: %w", path, err)
			}
			holder, herr := readHolderSettled(fd)
			f.Close()
			return nil, nil, &HeldError{UUID: uuid, Holder: holder, HolderErr: herr}
		}
		// The file locked must still be the one the path names (only its
		// owner or the directory's may remove it; nobody should): else
		// the lock is of a file nobody else can open. Open the path again.
		if !stillNamed(path, fd) {
			f.Close()
			if attempt < 3 {
				continue
			}
			return nil, nil, fmt.Errorf("lock %s: the file keeps being replaced", path)
		}
		prev, _ := readAll(fd)
		if last, err := parseHolder(prev); err == nil && last.PID > 0 && sameHost(last, host) && lives(last.PID, last.PIDStart) {
			f.Close() // nothing was written: the file still names the orphan
			return nil, nil, &HeldError{UUID: uuid, Holder: last, Orphan: true}
		}
		h.UUID = uuid
		if h.Since.IsZero() {
			h.Since = time.Now()
		}
		if h.Host == "" {
			h.Host = host
		}
		if err := writeHolder(f, h); err != nil {
			rewrite(f, prev)
			f.Close()
			return nil, nil, fmt.Errorf("lock %s: write the holder: %w", path, err)
		}
		return f, prev, nil
	}
}

// openLock opens the lock file at path read-write, creating it (0666)
// when missing. An existing file is opened without O_CREAT: in a sticky
// world-writable directory, fs.protected_regular (on in most
// distributions) refuses O_CREAT of a file owned by neither the opener nor
// the directory's owner, though its mode allows the open — the lock file
// a labmate created.
func openLock(path string) (*os.File, error) {
	const flags = unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK // O_NONBLOCK: a FIFO planted there must not block the open
	for attempt := 0; ; attempt++ {
		fd, err := unix.Open(path, flags, 0)
		if errors.Is(err, unix.ENOENT) {
			fd, err = unix.Open(path, flags|unix.O_CREAT|unix.O_EXCL, 0o666)
			if err == nil {
				if err := unix.Fchmod(fd, 0o666); err != nil { // whatever the umask
					unix.Close(fd)
					return nil, fmt.Errorf("lock file %s: chmod 666: %w", path, err)
				}
			} else if errors.Is(err, unix.EEXIST) && attempt < 3 {
				continue // created meanwhile by another taker
			}
		}
		if err != nil {
			return nil, openError(path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			unix.Close(fd)
			return nil, fmt.Errorf("lock file %s is not a regular file: remove it (trainbot makes it again)", path)
		case st.Nlink != 1:
			unix.Close(fd)
			return nil, fmt.Errorf("lock file %s has %d links: not a file trainbot made (a hard link to another file would be overwritten); remove it", path, st.Nlink)
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// openError says why the lock file at path could not be opened, and what
// to do about it.
func openError(path string, err error) error {
	var st unix.Stat_t
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("lock file %s is a symbolic link: trainbot does not follow it; remove it", path)
	case errors.Is(err, unix.EACCES) && unix.Lstat(path, &st) == nil:
		return fmt.Errorf("lock file %s (uid %d, mode %04o) may not be written by uid %d: its owner should chmod 666 it: %w", path, st.Uid, st.Mode&0o7777, os.Getuid(), err)
	case errors.Is(err, unix.EACCES) && unix.Stat(filepath.Dir(path), &st) == nil:
		return fmt.Errorf("lock file %s cannot be created: the directory (uid %d, mode %04o) may not be written by uid %d; its owner should chmod 1777 it: %w", path, st.Uid, st.Mode&0o7777, os.Getuid(), err)
	}
	return fmt.Errorf("open lock file %s: %w", path, err)
}

// lockEx takes the exclusive flock without waiting, trying again briefly
// when a Holders probe's shared lock is in the way.
func lockEx(fd int) error {
	wait := time.Millisecond
	for i := 0; ; i++ {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK) || i == probeRetries:
			return err
		}
		time.Sleep(wait) // a probe holds its shared lock for two system calls
		wait *= 2
	}
}

// stillNamed reports whether path names the file open as fd.
func stillNamed(path string, fd int) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// Update rewrites the holder of a lock taken with TryLock, which f still
// holds (to record the run's main process once it started, say). An
// empty UUID or zero Since keeps the file's; PIDStart is filled when 0.
// Once f went to the run's supervisor (shimctl.Start closes the caller's
// copy), the supervisor records the PID itself (SetPID).
func (d *Dir) Update(f *os.File, h Holder) error {
	if f == nil {
		return errors.New("GPU lock: update of a nil file")
	}
	cur, _ := readHolder(int(f.Fd()))
	if h.UUID == "" {
		h.UUID = cur.UUID
	}
	if h.Since.IsZero() {
		h.Since = cur.Since
	}
	if err := writeHolder(f, h); err != nil {
		return fmt.Errorf("GPU lock %s: %w", f.Name(), err)
	}
	return nil
}

// ErrNotHolder is wrapped by SetPID's error for a file that holds no
// Holder (not a GPU lock): the file is left as it is.
var ErrNotHolder = errors.New("the file holds no GPU lock holder")

// SetPID records pid (its start time read from /proc) as the holder's
// process in the locked file f: what a run's supervisor does once it has
// started the run's main process, so that the lock names it even after the
// supervisor dies.
func SetPID(f *os.File, pid int) error {
	fd := int(f.Fd())
	h, err := readHolder(fd)
	if err == nil && h.UUID == "" {
		err = errors.New("no uuid")
	}
	if err != nil {
		return fmt.Errorf("GPU lock %s: %w (%v)", f.Name(), ErrNotHolder, err)
	}
	h.PID, h.PIDStart = pid, 0
	if err := writeHolder(f, h); err != nil {
		return fmt.Errorf("GPU lock %s: %w", f.Name(), err)
	}
	return nil
}

// writeHolder replaces the file's content with h as one JSON line:
// written over the old content, then cut to its length, so that a reader
// sees the old holder, the new one, or the new one followed by the old
// one's tail, which parseHolder ignores — never an empty file.
func writeHolder(f *os.File, h Holder) error {
	if h.PID > 0 && h.PIDStart == 0 {
		h.PIDStart, _ = procStart(h.PID)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return rewrite(f, append(b, '\n'))
}

func rewrite(f *os.File, b []byte) error {
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(b)))
}

// readAll reads the whole (small) file open as fd.
func readAll(fd int) ([]byte, error) {
	buf := make([]byte, 0, 512)
	for len(buf) < maxHolder {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, err := unix.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

var errEmpty = errors.New("the lock file is empty")

// parseHolder reads the first JSON value of a lock file's content.
func parseHolder(b []byte) (Holder, error) {
	var h Holder
	if len(bytes.TrimSpace(b)) == 0 {
		return h, errEmpty
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&h); err != nil {
		return Holder{}, fmt.Errorf("the lock file holds no holder: %w", err)
	}
	return h, nil
}

func readHolder(fd int) (Holder, error) {
	b, err := readAll(fd)
	if err != nil {
		return Holder{}, err
	}
	return parseHolder(b)
}

// readHolderSettled reads the holder of a lock held by someone else, who
// may have taken the flock but not yet written its holder: an unreadable
// holder is read again for a few milliseconds.
func readHolderSettled(fd int) (Holder, error) {
	wait := time.Millisecond
	for i := 0; ; i++ {
		h, err := readHolder(fd)
		if err == nil || i == 3 {
			return h, err
		}
		time.Sleep(wait) // the holder writes it right after its flock
		wait *= 2
	}
}

// hostname is this host's name ("" when it cannot be told).
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// sameHost reports whether h was written on this host (a PID means
// nothing elsewhere). A holder without a host is taken for this one's.
func sameHost(h Holder, host string) bool {
	return h.Host == "" || host == "" || h.Host == host
}

// LockAll takes the locks of every GPU in uuids, or none: in the order of
// the sorted UUIDs, so that two trainbots asking for overlapping sets
// meet at the same first lock, and giving back what it took (with the
// lock files' earlier holders put back) when one is refused — with that
// one's error, a *HeldError when it is held. The files are in the order
// of uuids. A UUID given twice is an error.
func LockAll(d *Dir, uuids []string, h Holder) ([]*os.File, error) {
	order := make([]int, len(uuids))
	names := make([]string, len(uuids))
	for i, u := range uuids {
		order[i] = i
		n, err := fileName(u)
		if err != nil {
			return nil, err
		}
		names[i] = n
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	for k := 1; k < len(order); k++ {
		if names[order[k]] == names[order[k-1]] {
			return nil, fmt.Errorf("GPU lock: %s and %s are the same lock", uuids[order[k-1]], uuids[order[k]])
		}
	}
	files := make([]*os.File, len(uuids))
	prevs := make([][]byte, len(uuids))
	for k, i := range order {
		f, prev, err := d.tryLock(uuids[i], h)
		if err != nil {
			for _, j := range order[:k] {
				rewrite(files[j], prevs[j])
				files[j].Close()
			}
			return nil, err
		}
		files[i], prevs[i] = f, prev
	}
	return files, nil
}

// Holding is what Holders tells of one GPU's lock.
type Holding struct {
	UUID   string
	Holder Holder // what the lock file says: the holder, or the last one
	// HolderErr says why Holder is zero: the file was empty or not a
	// holder, or could not be opened (then Held is true: a lock that
	// cannot be looked at is not taken for free).
	HolderErr error
	Held      bool // a process holds the flock now
	Orphan    bool // nobody holds the flock, but Holder's process or its group lives on
}

// Taken reports whether the GPU is not free to lock.
func (h Holding) Taken() bool { return h.Held || h.Orphan }

// Holders tells, for every lock file in the directory, its UUID, what it
// says of its holder, and whether it is held now (a shared flock on a
// fresh read-only descriptor is refused) or orphan-held (as TryLock tells
// it). A GPU that never had a lock file is not in the map. It takes no
// lock for longer than two system calls (TryLock waits those out), and
// about 10 µs per lock file (see the benchmark).
func (d *Dir) Holders() (map[string]Holding, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("GPU lock directory: %w", err)
	}
	host := hostname()
	out := make(map[string]Holding, len(ents))
	for _, e := range ents {
		name := e.Name()
		stem, ok := strings.CutSuffix(name, Suffix)
		if !ok || stem == "" || !e.Type().IsRegular() {
			continue
		}
		hd := probe(filepath.Join(d.path, name), host)
		hd.UUID = stem
		if u := hd.Holder.UUID; u != "" {
			if n, err := fileName(u); err == nil && n == name {
				hd.UUID = u // the UUID as given, where the file name lost a '/'
			}
		}
		out[hd.UUID] = hd
	}
	return out, nil
}

// probe looks at one lock file.
func probe(path, host string) Holding {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return Holding{Held: true, HolderErr: fmt.Errorf("open %s: %w", path, err)}
	}
	defer unix.Close(fd)
	var hd Holding
	switch err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		unix.Flock(fd, unix.LOCK_UN) // at once: a TryLock may be waiting
	case errors.Is(err, unix.EWOULDBLOCK):
		hd.Held = true
	default:
		return Holding{Held: true, HolderErr: fmt.Errorf("flock %s: %w", path, err)}
	}
	hd.Holder, hd.HolderErr = readHolder(fd)
	if !hd.Held && hd.HolderErr == nil && hd.Holder.PID > 0 && sameHost(hd.Holder, host) {
		hd.Orphan = lives(hd.Holder.PID, hd.Holder.PIDStart)
	}
	return hd
}

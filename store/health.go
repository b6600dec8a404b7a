package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file watches whether the store can still write: a full or failing
// disk (SQLite's SQLITE_FULL, SQLITE_IOERR), and a database file deleted or
// replaced under the running store. Options.OnHealth hears of the changes
// only, so a chat is told once, not at every failing write.

// HealthKind says what changed.
type HealthKind int

// Health changes.
const (
	// HealthFailing: writes fail because the disk is full or failing;
	// history is not being saved (points stay queued, up to MaxPending).
	HealthFailing HealthKind = iota + 1
	// HealthRecovered: writes succeed again after HealthFailing.
	HealthRecovered
	// HealthReplaced: the database file was deleted or replaced while the
	// store had it open. From then on writes are refused (ErrReplaced), so
	// nothing is written into a file no one will read again; reads go on.
	HealthReplaced
	// HealthDamaged: the database file is damaged (a write or read said
	// SQLITE_CORRUPT or SQLITE_NOTADB, or its header is gone or names
	// more pages than the file holds: truncated). Writes are refused
	// (ErrDamaged) and the file is moved aside at once
	// (trainbot.db.damaged-TIME, named in Err); restarting trainbot starts
	// a new one, which the runs' directories refill.
	HealthDamaged
	// HealthMovedAside: Open found the database file damaged, moved it
	// aside (Err names where) and started a new one.
	HealthMovedAside
)

func (k HealthKind) String() string {
	switch k {
	case HealthFailing:
		return "failing"
	case HealthRecovered:
		return "recovered"
	case HealthReplaced:
		return "replaced"
	case HealthDamaged:
		return "damaged"
	case HealthMovedAside:
		return "moved_aside"
	}
	return "unknown"
}

// HealthEvent is a change of whether the store can write.
type HealthEvent struct {
	Kind HealthKind
	Dir  string // the data directory
	Err  error  // the failed write (HealthFailing), what was found (HealthReplaced)
}

// ErrReplaced is the error of every write after the database file was
// deleted or replaced under the store.
var ErrReplaced = fmt.Errorf("the database file was deleted or replaced while trainbot ran; restart trainbot (%w)", trainer.ErrUnrecorded)

// ErrDamaged is the error of every write after the database file was found
// damaged.
var ErrDamaged = fmt.Errorf("the database file is damaged; restart trainbot: it starts a new one and rebuilds the history from the run directories (%w)", trainer.ErrUnrecorded)

// damagedErr reports whether err says the database file is damaged.
func damagedErr(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// fileDamage looks at a database file's 100-byte header: nil when the
// file is sound as far as its header tells, or does not exist, or is
// empty with no write-ahead log (a database not written yet). short is set
// when the only fault is a file shorter than the pages its header counts,
// which a checkpoint in progress may show for a moment.
func fileDamage(path string) (damage error, short bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false // missing (the replaced check says so) or unreadable (the writes say)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	size := fi.Size()
	if size == 0 {
		if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
			return fmt.Errorf("%s is empty while its write-ahead log holds %d bytes: it was truncated", path, wal.Size()), false
		}
		return nil, false
	}
	var h [100]byte
	if n, _ := f.ReadAt(h[:], 0); n < len(h) {
		return fmt.Errorf("%s is %d bytes, shorter than a database header: it was truncated", path, size), false
	}
	if string(h[:16]) != sqliteMagic {
		return fmt.Errorf("%s does not start with a database header: it was overwritten or truncated", path), false
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	// The page count is valid when the change counter matches the
	// version-valid-for number (SQLite 3.7.0 and later).
	if binary.BigEndian.Uint32(h[24:28]) == binary.BigEndian.Uint32(h[92:96]) && pages*pageSize > size {
		return fmt.Errorf("%s is %d bytes while its header counts %d pages of %d bytes: it was truncated", path, size, pages, pageSize), true
	}
	return nil, false
}

// diskFault reports whether err says the disk is full or failing.
func diskFault(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
		return true
	}
	return false
}

// retryable reports whether a write that failed with err may succeed
// later, unchanged: the disk is full or failing, the database is busy, or
// the file was replaced (a restart writes it).
func retryable(err error) bool {
	if diskFault(err) || errors.Is(err, ErrReplaced) || errors.Is(err, ErrDamaged) {
		return true
	}
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// health follows the writes of a store and watches its database file.
type health struct {
	dir, path string
	opened    os.FileInfo // the database file, as opened
	on        func(HealthEvent)
	settle    time.Duration
	log       *slog.Logger
	kick      chan struct{}

	mu       sync.Mutex
	failing  bool
	lastFail time.Time
	lastOK   time.Time
	replaced error // non-nil: writes are refused (ErrReplaced, ErrDamaged)
	short    bool  // the last check found the file shorter than its header says
	events   []HealthEvent
}

func newHealth(dir, path string, o Options, log *slog.Logger) (*health, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return &health{dir: dir, path: path, opened: fi, on: o.OnHealth, settle: o.RecoverAfter, log: log, kick: make(chan struct{}, 1)}, nil
}

// refused returns the error of a write once the file was replaced.
func (h *health) refused() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replaced
}

// note records how a write went. A disk fault makes the store failing;
// a success after RecoverAfter without a fault makes it recovered. Any
// failure has the file checked at once.
func (h *health) note(err error) {
	if errors.Is(err, ErrReplaced) || errors.Is(err, ErrDamaged) {
		return
	}
	if damagedErr(err) {
		h.damaged(err)
		return
	}
	now := time.Now()
	h.mu.Lock()
	switch {
	case err == nil:
		h.lastOK = now
		h.recoverLocked(now)
	case diskFault(err):
		h.lastFail = now
		if !h.failing && h.replaced == nil {
			h.failing = true
			h.events = append(h.events, HealthEvent{Kind: HealthFailing, Dir: h.dir, Err: err})
		}
	}
	signal := len(h.events) > 0 || err != nil
	h.mu.Unlock()
	if signal {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// recoverLocked ends a failing spell once a write succeeded and none
// failed for settle: a small write that fits where a batch does not must
// not announce a recovery.
func (h *health) recoverLocked(now time.Time) {
	if h.failing && h.replaced == nil && h.lastOK.After(h.lastFail) && now.Sub(h.lastFail) >= h.settle {
		h.failing = false
		h.events = append(h.events, HealthEvent{Kind: HealthRecovered, Dir: h.dir})
	}
}

// damaged refuses writes from now on, the file being damaged (what says
// so: err), moves the file aside and tells once. Moved at once, not at the
// next start: SQLite would otherwise checkpoint its write-ahead log into
// the damaged file when trainbot closes it, and a file half made of the
// log's pages can pass for a database at the next start.
func (h *health) damaged(err error) {
	h.mu.Lock()
	if h.replaced != nil {
		h.mu.Unlock()
		return
	}
	h.replaced = fmt.Errorf("%w (%v)", ErrDamaged, err)
	h.mu.Unlock()
	e := HealthEvent{Kind: HealthDamaged, Dir: h.dir, Err: err}
	if fi, serr := os.Stat(h.path); serr == nil && os.SameFile(fi, h.opened) {
		if ev, merr := moveAside(h.path, err); merr != nil {
			h.log.Error("move the damaged database aside", "err", merr)
		} else {
			e.Err = ev.Err
		}
	}
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// noteRead tells the watcher how a read went: only damage counts (a
// read's other errors are its caller's).
func (h *health) noteRead(err error) {
	if err != nil && damagedErr(err) {
		h.damaged(err)
	}
}

// check compares the database file with the one opened, and looks at its
// header.
func (h *health) check() {
	fi, err := os.Stat(h.path)
	var found error
	switch {
	case errors.Is(err, os.ErrNotExist):
		found = fmt.Errorf("%s was deleted", h.path)
	case err != nil:
		return // cannot tell (a failing disk): the writes say it
	case !os.SameFile(h.opened, fi):
		found = fmt.Errorf("%s was replaced by another file", h.path)
	}
	if found == nil {
		// The file opened: is it still whole?
		damage, short := fileDamage(h.path)
		h.mu.Lock()
		confirmed := damage != nil && (!short || h.short) // a short file twice in a row is not a checkpoint
		h.short = damage != nil && short
		h.mu.Unlock()
		if confirmed {
			h.damaged(damage)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if found != nil && h.replaced == nil {
		h.replaced = fmt.Errorf("%w: %v", ErrReplaced, found)
		h.events = append(h.events, HealthEvent{Kind: HealthReplaced, Dir: h.dir, Err: found})
	}
	h.recoverLocked(time.Now())
}

// watch checks the file every interval and after a failed write, and
// hands the changes to OnHealth, in order, from this one goroutine.
func (h *health) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
		h.check()
		h.mu.Lock()
		events := h.events
		h.events = nil
		h.mu.Unlock()
		for _, e := range events {
			switch e.Kind {
			case HealthFailing:
				h.log.Error("the database cannot be written: the disk is full or failing; history is not being saved", "dir", h.dir, "err", e.Err)
			case HealthRecovered:
				h.log.Warn("the database can be written again: history is saved again", "dir", h.dir)
			case HealthReplaced:
				h.log.Error("the database file was deleted or replaced while trainbot ran: writes are refused; restart trainbot", "dir", h.dir, "err", e.Err)
			case HealthDamaged:
				h.log.Error("the database file is damaged: moved aside, writes are refused; restart trainbot (it starts a new database and rebuilds the history from the run directories)", "dir", h.dir, "err", e.Err)
			case HealthMovedAside:
				h.log.Error("the database file was damaged: moved aside, a new one started; the history is rebuilt from the run directories", "dir", h.dir, "err", e.Err)
			}
			if h.on != nil {
				h.on(e)
			}
		}
	}
}

// writeDB is the store's one write connection. Every write goes through
// it: it refuses them once the database file was replaced, and tells the
// health watcher how each went. A transaction's owner tells how the whole
// went (its commit), as only the owner sees that.
type writeDB struct {
	*sql.DB
	h *health
}

// ExecContext runs one write statement.
func (w writeDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := w.h.refused(); err != nil {
		return nil, err
	}
	res, err := w.DB.ExecContext(ctx, query, args...)
	w.h.note(err)
	return res, err
}

// BeginTx begins a write transaction.
func (w writeDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	if err := w.h.refused(); err != nil {
		return nil, err
	}
	tx, err := w.DB.BeginTx(ctx, opts)
	if err != nil {
		w.h.note(err)
	}
	return tx, err
}

package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// setMaxPageCount caps the database's size on the writer connection: with
// the cap at the current size, a write that needs a new page fails with
// SQLITE_FULL, as on a full disk. It goes around writeDB so the health
// watcher does not count it as a write.
func setMaxPageCount(t *testing.T, s *Store, pages int64) {
	t.Helper()
	if _, err := s.w.DB.ExecContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
}

func points(from, n int) []trainer.TimedPoint {
	pts := make([]trainer.TimedPoint, n)
	now := time.Now()
	for i := range pts {
		pts[i] = trainer.TimedPoint{Point: logparse.Point{Name: "loss", Step: int64(from + i), Epoch: math.NaN(), Value: float64(i)}, At: now}
	}
	return pts
}

func countPoints(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM metrics`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// events collects the health events of a store.
func healthEvents(opts *Options) chan HealthEvent {
	ch := make(chan HealthEvent, 16)
	opts.OnHealth = func(e HealthEvent) { ch <- e }
	return ch
}

func awaitEvent(t *testing.T, ch <-chan HealthEvent, want HealthKind) HealthEvent {
	t.Helper()
	select {
	case e := <-ch:
		if e.Kind != want {
			t.Fatalf("got health event %s (%v), want %s", e.Kind, e.Err, want)
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatalf("no health event, want %s", want)
	}
	return HealthEvent{}
}

// A full disk fails the point writes with SQLITE_FULL: it is told once,
// the points wait in the queue, and once there is space they are all
// written and the recovery is told once.
func TestDiskFullIsToldOncePointsWaitAndRecover(t *testing.T) {
	dir := t.TempDir()
	opts := Options{FlushEvery: time.Hour, RecoverAfter: time.Nanosecond}
	events := healthEvents(&opts)
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	s.AddPoints(id, points(0, 100))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	setMaxPageCount(t, s, 1) // no more than the pages it has
	s.AddPoints(id, points(100, 12000))
	err = s.Flush(ctx)
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_FULL {
		t.Fatalf("flush on a full disk: got %v, want SQLITE_FULL", err)
	}
	e := awaitEvent(t, events, HealthFailing)
	if e.Dir != dir || !diskFault(e.Err) {
		t.Errorf("got %+v, want the data directory and the write's error", e)
	}
	// More points and more failing writes: nothing more is told.
	s.AddPoints(id, points(12100, 1000))
	if err := s.Flush(ctx); err == nil {
		t.Fatal("flush on a full disk succeeded")
	}
	if _, err := s.CreateRun(ctx, &trainer.Run{Job: "big " + string(make([]byte, 64<<10)), State: trainer.StateRunning, StartedAt: time.Now()}); err == nil {
		t.Fatal("a run of 64 KiB was stored on a full disk")
	}
	if got := s.DroppedPoints(); got != 0 {
		t.Fatalf("%d points dropped on a full disk, want 0: they wait", got)
	}

	setMaxPageCount(t, s, 1<<30) // space again
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush once there is space: %v", err)
	}
	awaitEvent(t, events, HealthRecovered)
	if got, want := countPoints(t, s), 100+12000+1000; got != want {
		t.Errorf("%d points stored, want %d: none lost", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		t.Errorf("one more health event %s (%v), want none", e.Kind, e.Err)
	default:
	}
}

// Failing batches wait at the head of the queue within MaxPending; what
// does not fit is dropped and counted.
func TestPointsThatWaitStayWithinMaxPending(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour, MaxPending: 6000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setMaxPageCount(t, s, 1)
	s.AddPoints(1, points(0, 5000)) // one batch, taken and failing
	if err := s.Flush(context.Background()); err == nil {
		t.Fatal("flush on a full disk succeeded")
	}
	s.AddPoints(1, points(5000, 3000))
	if got := s.DroppedPoints(); got != 2000 {
		t.Errorf("dropped %d, want 2000 (the queue holds 6000)", got)
	}
	setMaxPageCount(t, s, 1<<30)
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countPoints(t, s); got != 6000 {
		t.Errorf("%d points stored, want the 6000 that were queued", got)
	}
}

// A batch that fails for another reason is dropped, so that it cannot
// wedge the queue.
func TestABatchThatCannotBeWrittenIsDropped(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.AddPoints(1, points(0, 10))
	s.w.DB.Close() // "sql: database is closed": not the disk
	if err := s.Flush(context.Background()); err == nil {
		t.Fatal("flush to a closed database succeeded")
	}
	s.pmu.Lock()
	n := len(s.pending)
	s.pmu.Unlock()
	if n != 0 {
		t.Errorf("%d points still queued, want the batch dropped", n)
	}
	s.Close()
}

// A database file deleted or replaced under the store is noticed, told
// once, and no longer written; reads go on.
func TestReplacedDatabaseRefusesWrites(t *testing.T) {
	for _, how := range []string{"deleted", "renamed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{FlushEvery: time.Hour, CheckEvery: 10 * time.Millisecond}
			events := healthEvents(&opts)
			s, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(ctx, id); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, DBName)
			switch how {
			case "deleted":
				err = os.Remove(path)
			case "renamed":
				err = os.Rename(path, path+".old")
			case "replaced":
				tmp := filepath.Join(dir, "new.db")
				if err = os.WriteFile(tmp, nil, 0o644); err == nil {
					err = os.Rename(tmp, path)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			e := awaitEvent(t, events, HealthReplaced)
			if e.Dir != dir || e.Err == nil {
				t.Errorf("got %+v", e)
			}
			if _, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()}); !errors.Is(err, ErrReplaced) {
				t.Errorf("CreateRun: got %v, want ErrReplaced", err)
			}
			if _, _, err := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "console", Key: "k", Payload: []byte("{}")}); !errors.Is(err, ErrReplaced) {
				t.Errorf("EnqueueOutbox: got %v, want ErrReplaced", err)
			}
			s.AddPoints(id, points(0, 10))
			if err := s.Flush(ctx); !errors.Is(err, ErrReplaced) {
				t.Errorf("Flush: got %v, want ErrReplaced", err)
			}
			s.pmu.Lock()
			queued := len(s.pending)
			s.pmu.Unlock()
			if queued != 10 {
				t.Errorf("%d points queued, want the 10 kept", queued)
			}
			if r, err := s.Run(ctx, id); err != nil || r.ID != id {
				t.Errorf("read after the file went: %v", err)
			}
			select {
			case e := <-events:
				t.Errorf("one more health event %s (%v), want none", e.Kind, e.Err)
			default:
			}
		})
	}
}

// A small write that fits where a batch of points does not is no
// recovery: the chat would be told of a recovery and a failure again.
func TestASmallWriteDoesNotEndAFailingSpell(t *testing.T) {
	opts := Options{FlushEvery: time.Hour, RecoverAfter: time.Hour}
	events := healthEvents(&opts)
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	setMaxPageCount(t, s, 1)
	s.AddPoints(1, points(0, 5000))
	if err := s.Flush(ctx); err == nil {
		t.Fatal("flush on a full disk succeeded")
	}
	awaitEvent(t, events, HealthFailing)
	if err := s.Set(ctx, "k", "v"); err != nil {
		t.Fatalf("a small write: %v (the test needs one that fits)", err)
	}
	s.health.mu.Lock()
	failing, pending := s.health.failing, len(s.health.events)
	s.health.mu.Unlock()
	if !failing || pending != 0 {
		t.Errorf("failing %v with %d events to tell, want still failing and nothing to tell", failing, pending)
	}
}

// A database file truncated under the store (or overwritten) is damaged:
// told once, writes refused with an error that says no retry mends it,
// points kept queued, the file moved aside at once (so that closing the
// store cannot checkpoint its log into it); the next Open starts anew.
func TestDamagedDatabaseIsToldAndMovedAside(t *testing.T) {
	for _, how := range []string{"truncated", "overwritten", "shortened"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{FlushEvery: time.Hour, CheckEvery: 10 * time.Millisecond}
			events := healthEvents(&opts)
			s, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			s.AddPoints(id, points(0, 5000))
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// Pages in the file itself, not only in the write-ahead log.
			if _, err := s.w.DB.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, DBName)
			switch how {
			case "truncated":
				s.AddPoints(id, points(5000, 10)) // the log holds something again
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				err = os.Truncate(path, 0)
			case "overwritten":
				err = os.WriteFile(path, []byte(strings.Repeat("not a database, ", 10)), 0o644)
			case "shortened":
				var fi os.FileInfo
				if fi, err = os.Stat(path); err == nil {
					err = os.Truncate(path, fi.Size()/2)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			e := awaitEvent(t, events, HealthDamaged)
			aside, _ := filepath.Glob(path + ".damaged-*")
			if len(aside) == 0 || e.Err == nil || !strings.Contains(e.Err.Error(), aside[0]) {
				t.Errorf("moved aside to %v, told %v", aside, e.Err)
			}
			if _, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()}); !errors.Is(err, ErrDamaged) || !errors.Is(err, trainer.ErrUnrecorded) {
				t.Errorf("CreateRun: got %v, want ErrDamaged (trainer.ErrUnrecorded)", err)
			}
			s.AddPoints(id, points(6000, 10))
			if err := s.Flush(ctx); !errors.Is(err, ErrDamaged) {
				t.Errorf("Flush: got %v, want ErrDamaged", err)
			}
			select {
			case e := <-events:
				t.Errorf("one more health event %s (%v), want none", e.Kind, e.Err)
			case <-time.After(100 * time.Millisecond): // ten more checks
			}
			s.Close()
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("closing the damaged store left a %s: %v", DBName, err)
			}
			s2, err := Open(dir, Options{})
			if err != nil {
				t.Fatalf("open after the damage: %v", err)
			}
			defer s2.Close()
			if id2, err := s2.CreateRun(ctx, &trainer.Run{ID: id, Job: "j", State: trainer.StateRunning, StartedAt: time.Now()}); err != nil || id2 != id {
				t.Errorf("the new database: CreateRun got %d, %v", id2, err)
			}
		})
	}
}

// A database file damaged while no trainbot ran: a command that only reads
// is refused (it must not empty the history), the bot moves it aside.
func TestDamagedDatabaseAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DBName)
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database, ", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("open for reading: got %v, want ErrDamaged", err)
	}
	opts := Options{MoveAsideDamaged: true}
	events := healthEvents(&opts)
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := awaitEvent(t, events, HealthMovedAside)
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 || !strings.Contains(e.Err.Error(), aside[0]) {
		t.Errorf("moved aside to %v, told %v", aside, e.Err)
	}
	if _, err := s.CreateRun(context.Background(), &trainer.Run{Job: "j", State: trainer.StateRunning, StartedAt: time.Now()}); err != nil {
		t.Errorf("the new database: %v", err)
	}
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

type pendingPoint struct {
	run int64
	t   int64
	p   logparse.Point
}

// batchSize is the most points written in one transaction.
const batchSize = 5000

// AddPoints queues points for the background writer; it never waits for the
// disk. When the queue is full (the disk is stuck), points are dropped and
// counted in DroppedPoints.
func (s *Store) AddPoints(runID int64, at time.Time, pts []logparse.Point) {
	if len(pts) == 0 {
		return
	}
	t := ms(at)
	s.pmu.Lock()
	for _, p := range pts {
		if len(s.pending) >= s.maxPending {
			s.dropped++
			continue
		}
		s.pending = append(s.pending, pendingPoint{run: runID, t: t, p: p})
	}
	n := len(s.pending)
	s.pmu.Unlock()
	if n >= batchSize {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// DroppedPoints returns how many points were dropped because the queue was full.
func (s *Store) DroppedPoints() int64 {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.dropped
}

// Flush waits until every point queued before the call is written.
func (s *Store) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case s.flushes <- done:
	case <-s.stopped:
		return errors.New("flush: store is closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer owns point writing: on a timer, when the queue grows, and on Flush.
func (s *Store) writer(ctx context.Context, every time.Duration) {
	defer s.wg.Done()
	defer close(s.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.writeQueued()
		case <-s.kick:
			s.writeQueued()
		case done := <-s.flushes:
			done <- s.writeQueued()
		}
	}
}

// writeQueued writes everything queued, in batches; a failing batch is
// logged and dropped so that one bad write never wedges the queue.
func (s *Store) writeQueued() error {
	var firstErr error
	for {
		s.pmu.Lock()
		batch := s.pending
		if len(batch) > batchSize {
			batch = batch[:batchSize:batchSize]
			s.pending = append([]pendingPoint(nil), s.pending[batchSize:]...)
		} else {
			s.pending = nil
		}
		s.pmu.Unlock()
		if len(batch) == 0 {
			return firstErr
		}
		if err := s.writeBatch(batch); err != nil {
			s.log.Error("write metric points", "points", len(batch), "err", err)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
}

func (s *Store) writeBatch(batch []pendingPoint) error {
	ctx := context.Background()
	// Name ids first, outside the points transaction (one connection).
	ids := make([]int64, len(batch))
	for i, pp := range batch {
		id, err := s.nameID(ctx, pp.p.Name)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO metrics(run_id, name_id, step, epoch, value, t) VALUES(?,?,?,?,?,?)`)
	if err != nil {
		tx.Rollback()
		return err
	}
	for i, pp := range batch {
		var epoch, value any
		if !math.IsNaN(pp.p.Epoch) {
			epoch = pp.p.Epoch
		}
		if !math.IsNaN(pp.p.Value) {
			value = pp.p.Value
		}
		if _, err := stmt.ExecContext(ctx, pp.run, ids[i], pp.p.Step, epoch, value, pp.t); err != nil {
			stmt.Close()
			tx.Rollback()
			return fmt.Errorf("insert point of run %d: %w", pp.run, err)
		}
	}
	stmt.Close()
	return tx.Commit()
}

// nameID returns the id of a metric name, creating it.
func (s *Store) nameID(ctx context.Context, name string) (int64, error) {
	if v, ok := s.names.Load(name); ok {
		return v.(int64), nil
	}
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	if v, ok := s.names.Load(name); ok {
		return v.(int64), nil
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO metric_names(name) VALUES(?) ON CONFLICT(name) DO NOTHING`, name); err != nil {
		return 0, err
	}
	var id int64
	if err := s.w.QueryRowContext(ctx, `SELECT id FROM metric_names WHERE name = ?`, name).Scan(&id); err != nil {
		return 0, err
	}
	s.names.Store(name, id)
	return id, nil
}

// lookupName returns a name's id without creating it.
func (s *Store) lookupName(ctx context.Context, name string) (int64, bool, error) {
	if v, ok := s.names.Load(name); ok {
		return v.(int64), true, nil
	}
	var id int64
	err := s.r.QueryRowContext(ctx, `SELECT id FROM metric_names WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return id, true, nil
}

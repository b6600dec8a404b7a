package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

type pendingPoint struct {
	run int64
	t   int64
	p   logparse.Point
	// offsets marks a read position instead of a point: the run's log
	// (logOff) and metrics-file (t) offsets, written in the transaction of
	// the points queued before it.
	offsets bool
	logOff  int64
}

// droppedMsg is logged when points start to be dropped.
const droppedMsg = "metric points dropped: the write queue is full (the disk is slow or stuck); the run logs still have them"

// batchSize is the most points written in one transaction.
const batchSize = 5000

// AddPoints queues points for the background writer; it never waits for the
// disk. When the queue is full (the disk is stuck), points are dropped,
// counted in DroppedPoints and logged (once until points are written again).
func (s *Store) AddPoints(runID int64, pts []trainer.TimedPoint) {
	if len(pts) == 0 {
		return
	}
	s.pmu.Lock()
	started := false
	for _, p := range pts {
		if len(s.pending) >= s.maxPending {
			s.dropped++
			started = started || !s.dropping
			s.dropping = true
			continue
		}
		s.pending = append(s.pending, pendingPoint{run: runID, t: ms(p.At), p: p.Point})
	}
	n := len(s.pending)
	s.pmu.Unlock()
	if started {
		s.log.Warn(droppedMsg, "run", runID, "queued", n)
	}
	if n >= batchSize {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// ThinPoints thins a run's stored points of one metric to a step width.
func (s *Store) ThinPoints(runID int64, name string, width int64) {}

// SetOffsets queues how far the run's log and metrics file have been read:
// it is written in the same transaction as the points queued before it, so
// that after a restart the bot resumes reading exactly after the last
// stored point. A full queue does not drop it.
func (s *Store) SetOffsets(runID, logOffset, metricsOffset int64) {
	s.pmu.Lock()
	s.pending = append(s.pending, pendingPoint{run: runID, offsets: true, logOff: logOffset, t: metricsOffset})
	s.pmu.Unlock()
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

// writeQueued writes everything queued, in batches. A batch that failed
// because the disk is full or failing, the database is busy or its file was
// replaced goes back to the head of the queue, to be tried again on the
// next tick; any other failing batch is logged and dropped, so that one bad
// write never wedges the queue.
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
		recovered := len(batch) == 0 && s.dropping
		s.dropping = s.dropping && !recovered
		dropped := s.dropped
		s.pmu.Unlock()
		if recovered {
			s.log.Warn("metric points are queued again", "dropped", dropped)
		}
		if len(batch) == 0 {
			return firstErr
		}
		err := s.writeBatch(batch)
		s.health.note(err)
		if err != nil && retryable(err) {
			s.requeue(batch, err)
			return fmt.Errorf("write metric points: %w", err)
		}
		if err != nil {
			s.log.Error("write metric points", "points", len(batch), "err", err)
			if firstErr == nil {
				firstErr = err
			}
		} else if s.retrying {
			s.retrying = false
			s.log.Info("metric points written again")
		}
	}
}

// requeue puts a batch that could not be written back at the head of the
// queue. Beyond MaxPending the newest points are dropped and counted, as
// AddPoints drops them.
func (s *Store) requeue(batch []pendingPoint, err error) {
	s.pmu.Lock()
	s.pending = append(batch, s.pending...)
	over := len(s.pending) - s.maxPending
	started := false
	if over > 0 {
		s.pending = s.pending[:s.maxPending]
		s.dropped += int64(over)
		started = !s.dropping
		s.dropping = true
	}
	n := len(s.pending)
	s.pmu.Unlock()
	if !s.retrying {
		s.retrying = true
		s.log.Warn("metric points kept in memory to write again", "queued", n, "err", err)
	}
	if started {
		s.log.Warn(droppedMsg, "queued", n)
	}
}

func (s *Store) writeBatch(batch []pendingPoint) (err error) {
	ctx := context.Background()
	// Name ids first, outside the points transaction (one connection).
	var offsets []pendingPoint
	points := batch[:0:0]
	for _, pp := range batch {
		if pp.offsets {
			offsets = append(offsets, pp)
		} else {
			points = append(points, pp)
		}
	}
	batch = points
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
	defer tx.Rollback()
	for i, pp := range batch {
		key := [2]int64{pp.run, ids[i]}
		if s.runNames[key] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO run_metric_names(run_id, name_id) VALUES(?, ?)`, pp.run, ids[i]); err != nil {
			return fmt.Errorf("record metric name: %w", err)
		}
		defer func() { // only once the transaction commits
			if err == nil {
				s.runNames[key] = true
			}
		}()
	}
	// Many rows per statement: the per-statement cost dominates otherwise.
	var full *sql.Stmt
	args := make([]any, 0, rowsPerInsert*7)
	for start := 0; start < len(batch); start += rowsPerInsert {
		end := min(start+rowsPerInsert, len(batch))
		args = args[:0]
		for i := start; i < end; i++ {
			pp := batch[i]
			var epoch, value any
			if !math.IsNaN(pp.p.Epoch) {
				epoch = pp.p.Epoch
			}
			if !math.IsNaN(pp.p.Value) {
				value = pp.p.Value
			}
			s.seq++
			args = append(args, pp.run, ids[i], pp.p.Step, s.seq, epoch, value, pp.t)
		}
		n := end - start
		if n == rowsPerInsert {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, insertMetrics(rowsPerInsert)); err != nil {
					return err
				}
				defer full.Close()
			}
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, insertMetrics(n), args...)
		}
		if err != nil {
			return fmt.Errorf("insert points: %w", err)
		}
	}
	for _, o := range offsets {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET log_offset = ?, metrics_offset = ? WHERE id = ?`, o.logOff, o.t, o.run); err != nil {
			return fmt.Errorf("record read offsets: %w", err)
		}
	}
	err = tx.Commit()
	return err
}

// rowsPerInsert is how many points one INSERT statement carries.
const rowsPerInsert = 200

func insertMetrics(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO metrics(run_id, name_id, step, seq, epoch, value, t) VALUES ")
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
	}
	return b.String()
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

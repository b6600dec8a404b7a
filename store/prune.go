package store

import (
	"context"
	"fmt"
	"time"
)

// pruneBatch is how many rows one delete takes: the writer connection is
// held for one batch at a time, so points and samples are written between
// two batches. A variable so that a test can cut it.
var pruneBatch = 5000

// Pruned counts the rows one Prune deleted.
type Pruned struct {
	DeviceSamples, RunMemory, Audit int64
	// Refused counts the refused audit entries past MaxRefused.
	Refused int64
}

// Prune deletes device samples and runs' memory samples older than
// KeepSamples, and audit entries older than KeepAudit, before now (a keep
// of 0 keeps everything), and the oldest refused audit entries past
// MaxRefused. Runs, their metric points and their peak memory are never
// pruned: a run's memory chart older than KeepSamples has only its peaks.
func (s *Store) Prune(ctx context.Context, now time.Time) (Pruned, error) {
	var p Pruned
	var err error
	if s.keepSamples > 0 {
		cut := ms(now.Add(-s.keepSamples))
		if p.DeviceSamples, err = s.pruneTable(ctx, "device_samples", "t", cut); err != nil {
			return p, err
		}
		if p.RunMemory, err = s.pruneTable(ctx, "run_memory", "t", cut); err != nil {
			return p, err
		}
		if p.DeviceSamples+p.RunMemory > 0 {
			// The thinning's row counts were read before: read them again.
			s.smu.Lock()
			s.series = nil
			s.smu.Unlock()
		}
	}
	if s.keepAudit > 0 {
		if p.Audit, err = s.pruneTable(ctx, "audit", "t", ms(now.Add(-s.keepAudit))); err != nil {
			return p, err
		}
	}
	if p.Refused, err = s.trimRefused(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// pruneTable deletes the rows of table whose column is before cut, a batch
// at a time.
func (s *Store) pruneTable(ctx context.Context, table, column string, cut int64) (int64, error) {
	return s.pruneWhere(ctx, table, column+" < ?", cut)
}

// pruneWhere deletes the rows of table that where (with its arguments)
// selects, a batch at a time, pausing between batches so that other writes
// get the connection.
func (s *Store) pruneWhere(ctx context.Context, table, where string, args ...any) (int64, error) {
	var total int64
	batch := pruneBatch
	q := fmt.Sprintf(`DELETE FROM %s WHERE rowid IN (SELECT rowid FROM %s WHERE %s LIMIT %d)`, table, table, where, batch)
	for {
		res, err := s.w.ExecContext(ctx, q, args...)
		if err != nil {
			return total, fmt.Errorf("prune %s: %w", table, err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < int64(batch) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pruner runs Prune after first, then every every, until ctx ends.
func (s *Store) pruner(ctx context.Context, first, every time.Duration) {
	defer s.wg.Done()
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		p, err := s.Prune(ctx, start)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("prune old samples", "err", err)
		case p.DeviceSamples+p.RunMemory+p.Audit+p.Refused > 0:
			s.log.Info("pruned old rows", "device_samples", p.DeviceSamples, "run_memory", p.RunMemory, "audit", p.Audit, "audit_refused", p.Refused,
				"took", time.Since(start).Round(time.Millisecond))
		}
		t.Reset(every)
	}
}

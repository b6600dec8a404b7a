package store

import (
	"context"
	"fmt"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// nonFiniteThinnedKey marks, in kv, a database whose runs' NaN and ±Inf
// points were thinned by thinOldNonFinite.
const nonFiniteThinnedKey = "store.nonfinite_thinned"

// oldNonFiniteAbove is how many NaN and ±Inf points a metric of an earlier
// run must have stored for thinOldNonFinite to thin them: fewer cost a
// chart little.
const oldNonFiniteAbove = 1000

// thinNonFinite deletes the NaN and ±Inf points of a metric that are not
// the first or the last of their kind in their bucket: the non-finite half
// of eachDrop.
const thinNonFinite = `DELETE FROM metrics WHERE run_id = ?1 AND name_id = ?2 AND (step, seq) IN (` + nonFiniteToThin + `)`

// nonFiniteToThin selects the NaN and ±Inf points of a metric (?1 the run,
// ?2 the name) that are not the first or the last (by step, seq) of their
// kind (NaN, +Inf, -Inf) in their bucket of width ?3.
const nonFiniteToThin = `SELECT step, seq FROM (
		SELECT step, seq, row_number() OVER k AS f, count(*) OVER (k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n
		FROM (SELECT step, seq, CASE WHEN value IS NULL THEN 0 WHEN value > 0 THEN 1 ELSE 2 END AS kind,
				CASE WHEN step >= 0 THEN step / ?3 ELSE (step + 1) / ?3 - 1 END AS b
			FROM metrics WHERE run_id = ?1 AND name_id = ?2 AND (value IS NULL OR abs(value) >= 9e999))
		WINDOW k AS (PARTITION BY b, kind ORDER BY step, seq))
	WHERE f > 1 AND f < n`

// thinOldNonFinite thins, once per database, the NaN and ±Inf points that
// runs recorded by earlier versions stored one per step (a run that
// diverged and went on printing NaN), by the rule the recorder applies
// now (trainer.BucketWidth of the metric's steps; the first and last of
// each kind per bucket). It goes run by run, a metric per statement, so
// that each step reads one run's rows, and it stops with ctx (Close); an
// interrupted pass starts over at the next Open (what is thinned stays
// thinned). Its end is marked in kv.
func (s *Store) thinOldNonFinite(ctx context.Context) {
	start := time.Now()
	runs, metrics, deleted, err := s.thinOldNonFiniteRuns(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("thin the NaN and Inf points of earlier runs", "err", err)
		}
		return
	}
	if err := s.Set(ctx, nonFiniteThinnedKey, time.Now().UTC().Format(time.RFC3339)); err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.Error("thin the NaN and Inf points of earlier runs", "err", err)
		return
	}
	if deleted > 0 {
		s.log.Info("thinned the NaN and Inf points of earlier runs", "runs", runs, "metrics", metrics, "deleted", deleted, "took", time.Since(start).Round(time.Millisecond))
	}
}

func (s *Store) thinOldNonFiniteRuns(ctx context.Context) (runs, metrics int, deleted int64, err error) {
	last := int64(-1 << 62)
	for {
		var id int64
		err := s.r.QueryRowContext(ctx, `SELECT coalesce(min(id), 0) FROM runs WHERE id > ?`, last).Scan(&id)
		if err != nil {
			return runs, metrics, deleted, err
		}
		if id == 0 {
			return runs, metrics, deleted, nil
		}
		last = id
		n, d, err := s.thinRunNonFinite(ctx, id)
		if err != nil {
			return runs, metrics, deleted, fmt.Errorf("run %d: %w", id, err)
		}
		if n > 0 {
			runs, metrics, deleted = runs+1, metrics+n, deleted+d
		}
	}
}

// thinRunNonFinite thins the metrics of one run that have more than
// oldNonFiniteAbove NaN and ±Inf points.
func (s *Store) thinRunNonFinite(ctx context.Context, run int64) (metrics int, deleted int64, err error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name_id FROM metrics WHERE run_id = ? AND (value IS NULL OR abs(value) >= 9e999)
		GROUP BY name_id HAVING count(*) > ?`, run, oldNonFiniteAbove)
	if err != nil {
		return 0, 0, err
	}
	var names []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, 0, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	for _, name := range names {
		var lo, hi int64
		if err := s.r.QueryRowContext(ctx, `SELECT (SELECT min(step) FROM metrics WHERE run_id = ?1 AND name_id = ?2),
			(SELECT max(step) FROM metrics WHERE run_id = ?1 AND name_id = ?2)`, run, name).Scan(&lo, &hi); err != nil {
			return metrics, deleted, err
		}
		res, err := s.w.ExecContext(ctx, thinNonFinite, run, name, trainer.BucketWidth(hi-lo, trainer.MaxBuckets))
		if err != nil {
			return metrics, deleted, err
		}
		d, _ := res.RowsAffected()
		metrics, deleted = metrics+1, deleted+d
	}
	return metrics, deleted, nil
}

package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

	"github.com/trainbot/trainbot/trainer"
)

// The thinning of a metric's stored points, decided in Go by the writer:
// when a metric's bucket width grows (trainer's thinner asks with
// ThinPoints), the points of the batch being written and the rows already
// stored are thinned together in the batch's transaction, so that the
// batch's points thinning drops are never written, and only the rows it
// drops are deleted, by key. A burst (10⁶ lines in a second) is thinned in
// the queue before any of it reaches SQLite.

// thinRow is one point of a metric as thinning sees it: stored (batch < 0)
// or the batch's point at index batch.
type thinRow struct {
	step, seq int64
	value     float64 // NaN for NULL
	batch     int
}

// eachDrop calls drop with each row (of rows, in (step, seq) order) that
// thinning to buckets of width drops, in order, without collecting them (a
// burst's batch drops ~10⁵ of its points): of each bucket
// trainer.BucketOf(step, width), every finite row that is not the first or
// the last (by step, seq) or the minimum or the maximum (by value, then
// step, seq: the first of equal minima, the last of equal maxima), and
// every NaN, +Inf or -Inf row that is not the first or the last of its
// kind. This is the rule of the SQL statement it replaces (thinMetricsSQL
// in the tests, which check that both keep the same rows).
func eachDrop(rows []thinRow, width int64, drop func(thinRow)) {
	var keep []bool
	for i := 0; i < len(rows); {
		b := trainer.BucketOf(rows[i].step, width)
		j := i + 1
		for j < len(rows) && trainer.BucketOf(rows[j].step, width) == b {
			j++
		}
		first, last, lo, hi := -1, -1, -1, -1
		var nfFirst, nfLast [3]int
		for k := range nfFirst {
			nfFirst[k], nfLast[k] = -1, -1
		}
		for k := i; k < j; k++ {
			v := rows[k].value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				kind := 0
				switch {
				case math.IsInf(v, 1):
					kind = 1
				case math.IsInf(v, -1):
					kind = 2
				}
				if nfFirst[kind] < 0 {
					nfFirst[kind] = k
				}
				nfLast[kind] = k
				continue
			}
			if first < 0 {
				first = k
			}
			last = k
			if lo < 0 || v < rows[lo].value {
				lo = k
			}
			if hi < 0 || v >= rows[hi].value {
				hi = k
			}
		}
		keep = slices.Grow(keep[:0], j-i)[:j-i]
		clear(keep)
		for _, k := range [...]int{first, last, lo, hi, nfFirst[0], nfFirst[1], nfFirst[2], nfLast[0], nfLast[1], nfLast[2]} {
			if k >= 0 {
				keep[k-i] = true
			}
		}
		for k := i; k < j; k++ {
			if !keep[k-i] {
				drop(rows[k])
			}
		}
		i = j
	}
}

// byStepSeq orders rows by (step, seq).
func byStepSeq(a, b thinRow) int {
	return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.seq, b.seq))
}

// querier is what storedRows reads through: the read pool (outside the
// write transaction, which then holds the write lock only to delete) or
// the transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// thinPlan decides the thinning of one metric of a run to width: over the
// rows stored (read through q) and the batch's points of the metric
// (batch[i] for i in idx, whose seqs are seqs[i]) together. It marks the
// batch's points not to write (drop[i]) and returns the keys of the stored
// rows to delete (deleteRows). scratch is the rows' array, kept for the
// next call.
func thinPlan(ctx context.Context, q querier, run, nameID, width int64, batch []pendingPoint, seqs []int64, idx []int, drop []bool, scratch *[]thinRow) ([][2]int64, error) {
	rows, err := storedRows(ctx, q, run, nameID, (*scratch)[:0])
	if err != nil {
		return nil, err
	}
	rows = slices.Grow(rows, len(idx))
	for _, i := range idx {
		rows = append(rows, thinRow{step: batch[i].p.Step, seq: seqs[i], value: batch[i].p.Value, batch: i})
	}
	*scratch = rows
	slices.SortFunc(rows, byStepSeq) // the batch's seqs are past the stored ones
	var del [][2]int64
	eachDrop(rows, width, func(r thinRow) {
		if r.batch >= 0 {
			drop[r.batch] = true
		} else {
			del = append(del, [2]int64{r.step, r.seq})
		}
	})
	return del, nil
}

// storedRows appends a metric's stored rows to rows, in (step, seq) order
// (the table's key order: no sort).
func storedRows(ctx context.Context, q querier, run, nameID int64, rows []thinRow) ([]thinRow, error) {
	rs, err := q.QueryContext(ctx, `SELECT step, seq, value FROM metrics WHERE run_id = ? AND name_id = ? ORDER BY step, seq`, run, nameID)
	if err != nil {
		return nil, fmt.Errorf("read points to thin: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		r := thinRow{batch: -1}
		var v sql.NullFloat64
		if err := rs.Scan(&r.step, &r.seq, &v); err != nil {
			return nil, fmt.Errorf("read points to thin: %w", err)
		}
		r.value = math.NaN()
		if v.Valid {
			r.value = v.Float64
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// rowsPerDelete is how many (step, seq) keys one DELETE carries.
const rowsPerDelete = 200

// deleteRows deletes a metric's rows by key, many per statement, until
// stop (nil: never) says so between two statements; done is how many keys
// it deleted.
func deleteRows(ctx context.Context, tx *sql.Tx, run, nameID int64, keys [][2]int64, stop func() bool) (done int, err error) {
	args := make([]any, 0, 2+2*rowsPerDelete)
	done, err = execInChunks(ctx, tx, len(keys), rowsPerDelete, deleteMetrics, stop, func(start, end int) []any {
		args = append(args[:0], run, nameID)
		for _, k := range keys[start:end] {
			args = append(args, k[0], k[1])
		}
		return args
	})
	if err != nil {
		return done, fmt.Errorf("delete thinned points: %w", err)
	}
	return done, nil
}

func deleteMetrics(rows int) string {
	return "DELETE FROM metrics WHERE run_id = ? AND name_id = ? AND (step, seq) IN (VALUES " + repeatTuple("(?,?)", rows) + ")"
}

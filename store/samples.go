package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// AddDeviceSamples stores device samples in one transaction, then thins
// the series of a device that has grown past its budget (thinSamples).
func (s *Store) AddDeviceSamples(ctx context.Context, samples []history.DeviceSample) error {
	err := s.insertEach(ctx, "add device sample", `INSERT INTO device_samples(t, device, uuid, name, mem_used, mem_total, util, temp, power_mw)
		VALUES(?,?,?,?,?,?,?,?,?)`, len(samples), func(i int) []any {
		d := samples[i]
		return []any{ms(d.T), d.Device, d.UUID, d.Name, d.MemUsed, d.MemTotal, d.Util, d.TempC, d.PowerMilliW}
	})
	if err != nil {
		return err
	}
	return s.thinSamples(ctx, &deviceSeries, len(samples), func(i int) (int64, int64) { return int64(samples[i].Device), ms(samples[i].T) })
}

// AddRunMemory stores run memory samples in one transaction, then thins
// the series of a run that has grown past its budget (thinSamples).
func (s *Store) AddRunMemory(ctx context.Context, samples []history.RunMemory) error {
	err := s.insertEach(ctx, "add run memory", `INSERT INTO run_memory(run_id, t, gpu_bytes, gpu_total, host_bytes) VALUES(?,?,?,?,?)`,
		len(samples), func(i int) []any {
			m := samples[i]
			return []any{m.RunID, ms(m.T), m.GPUBytes, m.GPUTotal, m.HostBytes}
		})
	if err != nil {
		return err
	}
	return s.thinSamples(ctx, &runMemorySeries, len(samples), func(i int) (int64, int64) { return samples[i].RunID, ms(samples[i].T) })
}

// sampleTable is a table of time series: device_samples has one per
// device, run_memory one per run. Each is thinned on its time axis by the
// rule of metric points (trainer.BucketWidth): once a series holds more
// rows than keep+1 per bucket (Options.SampleBuckets), it is cut into
// buckets of a width in milliseconds that leaves 2,000 to 10,000 buckets
// across its time range, and of each bucket only the first and last rows
// and the rows with the extremes of its main values (at most keep) stay.
type sampleTable struct {
	name  string
	count string // count(*), min(t), max(t) of one series
	thin  string // ?1: the series, ?2: the width
	keep  int64
}

var (
	deviceSeries = sampleTable{
		name:  "device_samples",
		count: `SELECT count(*), coalesce(min(t), 0), coalesce(max(t), 0) FROM device_samples WHERE device = ?`,
		keep:  4,
		// the first, the last, the least and the most memory used
		thin: `DELETE FROM device_samples WHERE rowid IN (SELECT id FROM (
			SELECT rowid AS id, row_number() OVER s AS f, count(*) OVER (s ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n,
				row_number() OVER m AS r
			FROM device_samples WHERE device = ?1
			WINDOW s AS (PARTITION BY t / ?2 ORDER BY t, rowid), m AS (PARTITION BY t / ?2 ORDER BY mem_used, t, rowid))
		WHERE f > 1 AND f < n AND r > 1 AND r < n)`,
	}
	runMemorySeries = sampleTable{
		name:  "run_memory",
		count: `SELECT count(*), coalesce(min(t), 0), coalesce(max(t), 0) FROM run_memory WHERE run_id = ?`,
		keep:  6,
		// the first, the last, and the least and the most of GPU and of
		// host memory (NULL is unknown: it sorts last and is not an extreme)
		thin: `DELETE FROM run_memory WHERE rowid IN (SELECT id FROM (
			SELECT rowid AS id, row_number() OVER s AS f, count(*) OVER (s ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n,
				row_number() OVER g AS rg, count(gpu_bytes) OVER (g ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS ng,
				row_number() OVER h AS rh, count(host_bytes) OVER (h ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS nh
			FROM run_memory WHERE run_id = ?1
			WINDOW s AS (PARTITION BY t / ?2 ORDER BY t, rowid),
				g AS (PARTITION BY t / ?2 ORDER BY gpu_bytes NULLS LAST, t, rowid),
				h AS (PARTITION BY t / ?2 ORDER BY host_bytes NULLS LAST, t, rowid))
		WHERE f > 1 AND f < n AND rg > 1 AND rg <> ng AND rh > 1 AND rh <> nh)`,
	}
)

// sampleCount is what the store knows of one series: its rows and time range.
type sampleCount struct {
	n, lo, hi int64
}

type seriesKey struct {
	table *sampleTable
	id    int64
}

// thinSamples counts n rows just stored (series id and time of row i), and
// thins each series of them that passed its table's budget. A series'
// count is read from the table the first time this process sees it.
func (s *Store) thinSamples(ctx context.Context, tab *sampleTable, n int, row func(i int) (id, t int64)) error {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.series == nil {
		s.series = map[seriesKey]*sampleCount{}
	}
	var touched, seeded []seriesKey
	for i := range n {
		id, t := row(i)
		k := seriesKey{tab, id}
		if !slices.Contains(touched, k) {
			touched = append(touched, k)
		}
		c := s.series[k]
		if c == nil {
			c = &sampleCount{}
			// This counts the rows just stored too.
			if err := s.w.QueryRowContext(ctx, tab.count, id).Scan(&c.n, &c.lo, &c.hi); err != nil {
				return fmt.Errorf("count %s: %w", tab.name, err)
			}
			s.series[k] = c
			seeded = append(seeded, k)
		}
		if slices.Contains(seeded, k) {
			continue
		}
		c.n++
		c.lo, c.hi = min(c.lo, t), max(c.hi, t)
	}
	for _, k := range touched {
		c := s.series[k]
		if c.n <= (tab.keep+1)*s.sampleBuckets {
			continue
		}
		res, err := s.w.ExecContext(ctx, tab.thin, k.id, trainer.BucketWidth(c.hi-c.lo, s.sampleBuckets))
		if err != nil {
			return fmt.Errorf("thin %s: %w", tab.name, err)
		}
		gone, _ := res.RowsAffected()
		c.n -= gone
	}
	return nil
}

// insertEach runs one prepared insert for each of n rows in one transaction.
func (s *Store) insertEach(ctx context.Context, what, query string, n int, row func(i int) []any) error {
	if n == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer stmt.Close()
	for i := 0; i < n; i++ {
		if _, err := stmt.ExecContext(ctx, row(i)...); err != nil {
			s.health.note(err)
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	err = tx.Commit()
	s.health.note(err)
	return err
}

// RunMemorySeries returns a run's memory samples in time order.
func (s *Store) RunMemorySeries(ctx context.Context, runID int64) ([]history.RunMemory, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT t, gpu_bytes, gpu_total, host_bytes FROM run_memory WHERE run_id = ? ORDER BY t`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.RunMemory
	for rows.Next() {
		var t int64
		var g, gt, h sql.NullInt64
		if err := rows.Scan(&t, &g, &gt, &h); err != nil {
			return nil, err
		}
		out = append(out, history.RunMemory{RunID: runID, T: fromMS(t), GPUBytes: nullInt(g), GPUTotal: nullInt(gt), HostBytes: nullInt(h)})
	}
	return out, rows.Err()
}

// DeviceSeries returns the samples of one device between two instants, in time order.
func (s *Store) DeviceSeries(ctx context.Context, device int, from, to time.Time) ([]history.DeviceSample, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT t, device, uuid, name, mem_used, mem_total, util, temp, power_mw
		FROM device_samples WHERE device = ? AND t >= ? AND t <= ? ORDER BY t`, device, ms(from), ms(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.DeviceSample
	for rows.Next() {
		var d history.DeviceSample
		var t int64
		if err := rows.Scan(&t, &d.Device, &d.UUID, &d.Name, &d.MemUsed, &d.MemTotal, &d.Util, &d.TempC, &d.PowerMilliW); err != nil {
			return nil, err
		}
		d.T = fromMS(t)
		out = append(out, d)
	}
	return out, rows.Err()
}

func nullInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	x := v.Int64
	return &x
}

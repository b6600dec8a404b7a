package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// DeviceSample is one accelerator at one instant.
type DeviceSample struct {
	T           time.Time
	Device      int
	UUID        string
	Name        string
	MemUsed     int64 // bytes
	MemTotal    int64 // bytes
	Util        int   // percent, -1 unknown
	TempC       int   // -1 unknown
	PowerMilliW int64 // 0 unknown
}

// RunMemory is what one run's processes held at one instant.
type RunMemory struct {
	RunID     int64
	T         time.Time
	GPUBytes  *int64 // memory on accelerators held by the run's processes; nil without a GPU
	GPUTotal  *int64 // capacity of the devices the run uses; nil when unknown
	HostBytes *int64 // resident host memory of the run's process tree; nil when not sampled
}

// AddDeviceSamples stores device samples in one transaction.
func (s *Store) AddDeviceSamples(ctx context.Context, samples []DeviceSample) error {
	return s.insertEach(ctx, "add device sample", `INSERT INTO device_samples(t, device, uuid, name, mem_used, mem_total, util, temp, power_mw)
		VALUES(?,?,?,?,?,?,?,?,?)`, len(samples), func(i int) []any {
		d := samples[i]
		return []any{ms(d.T), d.Device, d.UUID, d.Name, d.MemUsed, d.MemTotal, d.Util, d.TempC, d.PowerMilliW}
	})
}

// AddRunMemory stores run memory samples in one transaction.
func (s *Store) AddRunMemory(ctx context.Context, samples []RunMemory) error {
	return s.insertEach(ctx, "add run memory", `INSERT INTO run_memory(run_id, t, gpu_bytes, gpu_total, host_bytes) VALUES(?,?,?,?,?)`,
		len(samples), func(i int) []any {
			m := samples[i]
			return []any{m.RunID, ms(m.T), m.GPUBytes, m.GPUTotal, m.HostBytes}
		})
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
func (s *Store) RunMemorySeries(ctx context.Context, runID int64) ([]RunMemory, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT t, gpu_bytes, gpu_total, host_bytes FROM run_memory WHERE run_id = ? ORDER BY t`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunMemory
	for rows.Next() {
		var t int64
		var g, gt, h sql.NullInt64
		if err := rows.Scan(&t, &g, &gt, &h); err != nil {
			return nil, err
		}
		out = append(out, RunMemory{RunID: runID, T: fromMS(t), GPUBytes: nullInt(g), GPUTotal: nullInt(gt), HostBytes: nullInt(h)})
	}
	return out, rows.Err()
}

// DeviceSeries returns the samples of one device between two instants, in time order.
func (s *Store) DeviceSeries(ctx context.Context, device int, from, to time.Time) ([]DeviceSample, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT t, device, uuid, name, mem_used, mem_total, util, temp, power_mw
		FROM device_samples WHERE device = ? AND t >= ? AND t <= ? ORDER BY t`, device, ms(from), ms(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DeviceSample
	for rows.Next() {
		var d DeviceSample
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

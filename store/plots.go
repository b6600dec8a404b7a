package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// DevicesBetween returns, in order, the devices that have samples between
// two instants. It seeks the (device, t) index once per device instead of
// scanning the samples.
func (s *Store) DevicesBetween(ctx context.Context, from, to time.Time) ([]int, error) {
	var out []int
	last := -1 << 31
	for range 4096 {
		var d sql.NullInt64
		if err := s.r.QueryRowContext(ctx, `SELECT min(device) FROM device_samples WHERE device > ?`, last).Scan(&d); err != nil {
			return nil, err
		}
		if !d.Valid {
			return out, nil
		}
		last = int(d.Int64)
		var one int
		err := s.r.QueryRowContext(ctx, `SELECT 1 FROM device_samples WHERE device = ? AND t >= ? AND t <= ? LIMIT 1`,
			last, ms(from), ms(to)).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			out = append(out, last)
		}
	}
	return out, nil
}

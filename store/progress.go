package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/trainbot/trainbot/history"
)

// LastRunMemory returns the newest memory sample of a run; ok is false when
// the run has none.
func (s *Store) LastRunMemory(ctx context.Context, runID int64) (m history.RunMemory, ok bool, err error) {
	var t int64
	var g, gt, h sql.NullInt64
	err = s.r.QueryRowContext(ctx, `SELECT t, gpu_bytes, gpu_total, host_bytes FROM run_memory WHERE run_id = ? ORDER BY t DESC LIMIT 1`, runID).
		Scan(&t, &g, &gt, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return history.RunMemory{}, false, nil
	}
	if err != nil {
		return history.RunMemory{}, false, fmt.Errorf("last memory of run %d: %w", runID, err)
	}
	return history.RunMemory{RunID: runID, T: fromMS(t), GPUBytes: nullInt(g), GPUTotal: nullInt(gt), HostBytes: nullInt(h)}, true, nil
}

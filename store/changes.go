package store

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

var _ trainer.ChangeRecorder = (*Store)(nil)

// RecordChange stores one live change of a run (调参); a second record of
// the same version replaces the first.
func (s *Store) RecordChange(ctx context.Context, c trainer.LiveChange) error {
	values, err := json.Marshal(c.Values)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO run_changes (run_id, version, at, step, by, "values", signal) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.RunID, c.Version, c.At.UnixNano(), c.Step, c.By, string(values), int(c.Signal))
	if err != nil {
		return fmt.Errorf("record change of run %d: %w", c.RunID, err)
	}
	return nil
}

// RunChanges returns a run's live changes, oldest first.
func (s *Store) RunChanges(ctx context.Context, runID int64) ([]trainer.LiveChange, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT version, at, step, by, "values", signal FROM run_changes WHERE run_id = ? ORDER BY version`, runID)
	if err != nil {
		return nil, fmt.Errorf("changes of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []trainer.LiveChange
	for rows.Next() {
		c := trainer.LiveChange{RunID: runID}
		var at int64
		var values string
		var sig int
		if err := rows.Scan(&c.Version, &at, &c.Step, &c.By, &values, &sig); err != nil {
			return nil, err
		}
		c.At, c.Signal = time.Unix(0, at), syscall.Signal(sig)
		if err := json.Unmarshal([]byte(values), &c.Values); err != nil {
			return nil, fmt.Errorf("changes of run %d: version %d: %w", runID, c.Version, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

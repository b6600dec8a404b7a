package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trainbot/trainbot/trainer"
)

var _ trainer.QueueStore = (*Store)(nil)

// AddQueued stores a queued start request and returns its id.
func (s *Store) AddQueued(ctx context.Context, e trainer.QueueEntry) (int64, error) {
	params, err := json.Marshal(e.Params)
	if err != nil {
		return 0, err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO queue(job, params, note, requested_by, user_id, origin, created_at, host) VALUES(?,?,?,?,?,?,?,?)`,
		e.Job, string(params), e.Note, e.By, e.UserID, e.Origin, ms(e.At), e.Host)
	if err != nil {
		return 0, fmt.Errorf("queue a start: %w", err)
	}
	return res.LastInsertId()
}

// Queued returns the queued start requests, oldest first.
func (s *Store) Queued(ctx context.Context) ([]trainer.QueueEntry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, job, params, note, requested_by, user_id, origin, created_at, host FROM queue ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read the queue: %w", err)
	}
	defer rows.Close()
	var out []trainer.QueueEntry
	for rows.Next() {
		var e trainer.QueueEntry
		var params string
		var at int64
		if err := rows.Scan(&e.ID, &e.Job, &params, &e.Note, &e.By, &e.UserID, &e.Origin, &at, &e.Host); err != nil {
			return nil, fmt.Errorf("read the queue: %w", err)
		}
		if err := json.Unmarshal([]byte(params), &e.Params); err != nil {
			return nil, fmt.Errorf("queue entry %d: params: %w", e.ID, err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// RemoveQueued removes a queued start request; false when it was not there.
func (s *Store) RemoveQueued(ctx context.Context, id int64) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM queue WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("remove queue entry %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

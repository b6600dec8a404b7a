package store

import (
	"context"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// EndedRuns counts the ended runs by job and outcome (the history never
// loses a run, so the counts only grow: Prometheus counters).
func (s *Store) EndedRuns(ctx context.Context) ([]history.OutcomeCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT job, outcome, count(*) FROM runs WHERE state = ? GROUP BY job, outcome ORDER BY job, outcome`,
		string(trainer.StateEnded))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.OutcomeCount
	for rows.Next() {
		var c history.OutcomeCount
		if err := rows.Scan(&c.Job, &c.Outcome, &c.Runs); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// OutboxPending counts the outbox items still to be delivered (not sent,
// not refused for good).
func (s *Store) OutboxPending(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND failed = 0`).Scan(&n)
	return n, err
}

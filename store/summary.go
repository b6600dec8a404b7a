package store

import (
	"context"
	"fmt"

	"github.com/trainbot/trainbot/history"
)

// MetricExtremes returns the extremes of every metric of a run that has a
// finite value (NaN and ±Inf are left out).
func (s *Store) MetricExtremes(ctx context.Context, runID int64) (map[string]history.Extremes, error) {
	out := map[string]history.Extremes{}
	// SQLite takes a bare column (step) from the row that holds the min()
	// or max() of an aggregate with a single min or max.
	for _, agg := range []string{"min", "max"} {
		rows, err := s.r.QueryContext(ctx, `SELECT n.name, `+agg+`(m.value), m.step FROM metrics m
			JOIN metric_names n ON n.id = m.name_id
			WHERE m.run_id = ? AND m.value IS NOT NULL AND m.value > -1e308 AND m.value < 1e308
			GROUP BY m.name_id`, runID)
		if err != nil {
			return nil, fmt.Errorf("metric extremes of run %d: %w", runID, err)
		}
		for rows.Next() {
			var name string
			var v float64
			var step int64
			if err := rows.Scan(&name, &v, &step); err != nil {
				rows.Close()
				return nil, err
			}
			e := out[name]
			if agg == "min" {
				e.Min, e.MinStep = v, step
			} else {
				e.Max, e.MaxStep = v, step
			}
			out[name] = e
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nullID stores a run id of 0 as NULL.
// nullText is NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// SeriesReader reads metric series for charts.
type SeriesReader interface {
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	Series(ctx context.Context, runID int64, name string) ([]store.Point, error)
	Flush(ctx context.Context) error
}

// ErrNoMetric is returned when a run has no metric to draw.
var ErrNoMetric = errors.New("no metric to draw")

// RunChart draws the loss chart of a run: every loss-like metric, or the
// named one. It returns the PNG and a caption.
func RunChart(ctx context.Context, h SeriesReader, run *trainer.Run, metric string, smoothing float64) ([]byte, string, error) {
	if err := h.Flush(ctx); err != nil {
		return nil, "", fmt.Errorf("flush points: %w", err)
	}
	names, err := h.MetricNames(ctx, run.ID)
	if err != nil {
		return nil, "", fmt.Errorf("read metrics of run %d: %w", run.ID, err)
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("run #%d has no metric yet, so there is nothing to draw: %w", run.ID, ErrNoMetric)
	}
	var pick []string
	if metric != "" {
		for _, n := range names {
			if n == metric {
				pick = []string{n}
			}
		}
		if pick == nil {
			return nil, "", fmt.Errorf("run #%d has no metric %q; it has %s: %w", run.ID, metric, strings.Join(names, ", "), ErrNoMetric)
		}
	} else {
		for _, n := range names {
			if trainer.IsLossName(n) {
				pick = append(pick, n)
			}
		}
		if len(pick) == 0 {
			pick = names[:1]
		}
		if len(pick) > 4 {
			pick = pick[:4]
		}
	}
	chart := plots.LossChart{
		Title:     fmt.Sprintf("%s · run #%d · %s", run.Job, run.ID, run.Outcome),
		Smoothing: smoothing,
	}
	if chart.Smoothing == 0 {
		chart.Smoothing = plots.DefaultSmoothing
	}
	if len(pick) == 1 {
		chart.YLabel = pick[0]
	}
	total := 0
	for _, n := range pick {
		pts, err := h.Series(ctx, run.ID, n)
		if err != nil {
			return nil, "", fmt.Errorf("read %s of run %d: %w", n, run.ID, err)
		}
		s := plots.Series{Name: n, Points: make([]plots.XY, len(pts))}
		for i, p := range pts {
			s.Points[i] = plots.XY{X: float64(p.Step), Y: p.Value}
		}
		total += len(pts)
		chart.Series = append(chart.Series, s)
	}
	png, err := plots.Loss(chart)
	if errors.Is(err, plots.ErrNoData) {
		return nil, "", fmt.Errorf("run #%d has no finite value of %s to draw: %w", run.ID, strings.Join(pick, ", "), ErrNoMetric)
	}
	if err != nil {
		return nil, "", fmt.Errorf("draw run %d: %w", run.ID, err)
	}
	caption := fmt.Sprintf("run #%d %s · %s · %d points", run.ID, run.Job, strings.Join(pick, ", "), total)
	return png, caption, nil
}

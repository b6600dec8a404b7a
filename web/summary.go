package web

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// Per-pixel summaries. A chart of a metric's whole range (the first view
// of every chart, and every zoom wider than a tenth or so) is drawn from
// a summary: the metric reduced once to the lowest and highest point of
// each of summaryColumns columns across its steps, kept in memory. An
// ended run's summary never changes and is kept (the most recent
// maxSummaries); a running run's is rebuilt when older than summaryAge. A
// zoom too narrow for the summary (a pixel narrower than one of its
// columns) reads the store for its range, which is then a small part of
// the metric. The store keeps at most ~40,000 points of a metric (the
// recorder's thinning), so a summary costs one such read (~20-40 ms here)
// and answers later charts in well under a millisecond.
const (
	summaryColumns = 4096
	maxSummaries   = 64
	summaryAge     = time.Second
)

type summaryKey struct {
	run    int64
	metric string
}

// summary is one metric's envelope at summaryColumns columns.
type summary struct {
	from, to int64 // the metric's first and last step
	pts      Series
	built    time.Time
	final    bool // the run had ended
	empty    bool
}

// covers says whether the summary has at least one column per pixel of a
// chart width px wide over [from, to].
func (s *summary) covers(from, to int64, width int) bool {
	span := float64(s.to-s.from) + 1
	return (float64(to-from)+1)*summaryColumns >= span*float64(width)
}

type summaries struct {
	mu    sync.Mutex
	m     map[summaryKey]*summary
	order []summaryKey // oldest first
}

// get returns the summary of a metric of a run, building it when there
// is none or when the run was running and it is older than summaryAge.
func (p *Pages) summary(ctx context.Context, run *trainer.Run, metric string) (*summary, error) {
	k := summaryKey{run.ID, metric}
	now := time.Now()
	c := &p.sums
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok && (s.final || now.Sub(s.built) < summaryAge) {
		return s, nil
	}
	final := run.State != trainer.StateRunning
	steps, values, err := p.stepValues(ctx, run, metric, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	s = &summary{built: now, final: final, empty: len(steps) == 0}
	if !s.empty {
		s.from, s.to = steps[0], steps[len(steps)-1]
		s.pts = Downsample(steps, values, s.from, s.to, summaryColumns)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[summaryKey]*summary{}
	}
	if _, had := c.m[k]; !had {
		c.order = append(c.order, k)
	}
	c.m[k] = s
	for len(c.order) > maxSummaries {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	return s, nil
}

// chainHistory is a History that reads a chain of on_failure resumes as
// one curve (the store does).
type chainHistory interface {
	ChainStepValues(ctx context.Context, runID int64, name string, from, to int64) ([]int64, []float64, error)
}

// stepValues are a run's steps and values of metric between from and to;
// of its whole chain when it resumes another run.
func (p *Pages) stepValues(ctx context.Context, run *trainer.Run, metric string, from, to int64) ([]int64, []float64, error) {
	if ch, ok := p.Store.(chainHistory); ok && run.ResumedFrom != 0 {
		return ch.ChainStepValues(ctx, run.ID, metric, from, to)
	}
	return p.Store.StepValues(ctx, run.ID, metric, from, to)
}

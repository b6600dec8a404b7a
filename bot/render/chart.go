package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/trainer"
)

// SeriesReader reads metric series for charts.
type SeriesReader interface {
	// MetricNames returns the names of the metrics a run logged, losses first.
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	// Series returns every point of one metric of a run, in step order.
	Series(ctx context.Context, runID int64, name string) ([]history.Point, error)
	// Flush waits until the points queued so far are written.
	Flush(ctx context.Context) error
}

// ChartData is what charts read from the history: metric series, the
// memory a run held, and the devices' samples.
type ChartData interface {
	SeriesReader
	// RunMemorySeries returns a run's memory samples in time order.
	RunMemorySeries(ctx context.Context, runID int64) ([]history.RunMemory, error)
	// DevicesBetween returns the devices sampled between two instants.
	DevicesBetween(ctx context.Context, from, to time.Time) ([]int, error)
	// DeviceSeries returns one device's samples between two instants.
	DeviceSeries(ctx context.Context, device int, from, to time.Time) ([]history.DeviceSample, error)
}

// Errors of charts, wrapped in messages meant for the user.
var (
	// ErrNoMetric is returned when a run has no metric to draw.
	ErrNoMetric = errors.New("no metric to draw")
	// ErrNoSamples is returned when a run has no memory or device sample.
	ErrNoSamples = errors.New("no samples to draw")
)

// userError is a message for the user that still matches its sentinel
// with errors.Is.
type userError struct {
	msg  string
	kind error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.kind }

func userErrorf(kind error, format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Chart kinds, as `trainbot plot --kind` and 画图 take them.
const (
	KindLoss   = "loss"
	KindMemory = "memory"
	KindUtil   = "util"
)

// Charts draws the charts of runs from the history.
type Charts struct {
	Data ChartData
	// Painter draws; plots.Default() when nil.
	Painter *plots.Painter
	// Smoothing is the EMA weight of loss charts: plots.DefaultSmoothing
	// when 0, no smoothed line when negative.
	Smoothing float64
	// Now is the clock (time.Now when nil), for runs still going.
	Now func() time.Time
	// Lang is the language of the charts' words, their captions and what
	// is said when there is nothing to draw.
	Lang i18n.Lang
	// CLI are the flags a trainbot command printed for the host (the chart
	// drawn there: "trainbot plot --config FILE 12") needs to read this
	// bot's history: "" when the command's own config lookup finds it.
	CLI string
}

// command is the trainbot command line sub args, with the flags of CLI.
func (c Charts) command(sub, args string) string {
	if c.CLI != "" {
		sub += " " + c.CLI
	}
	return "trainbot " + sub + " " + args
}

// LossOptions choose what a loss chart shows.
type LossOptions struct {
	// Metric is the metric to draw; "" draws every loss the run logged.
	Metric string
	// XTime puts time since the start on X instead of the step.
	XTime bool
	// XStep puts the step on X of a chart whose X is time by default (the
	// memory overlay of 对比).
	XStep bool
}

func (c *Charts) painter() *plots.Painter {
	if c.Painter == nil {
		return plots.Default()
	}
	return c.Painter
}

func (c *Charts) smoothing() float64 {
	switch {
	case c.Smoothing == 0:
		return plots.DefaultSmoothing
	case c.Smoothing < 0:
		return 0
	}
	return c.Smoothing
}

func (c *Charts) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// runTitle names a run in a chart title: "demo · run #12 · finished".
func (c *Charts) runTitle(run *trainer.Run) string {
	return c.Lang.T(i18n.ChartRunTitle, run.Job, run.ID, OutcomeWord(c.Lang, run.Outcome))
}

// pickLosses chooses the metrics of a loss chart: the named one, else
// every loss-like one (at most four), else the first metric.
func pickLosses(l i18n.Lang, run *trainer.Run, names []string, metric string) ([]string, error) {
	if len(names) == 0 {
		return nil, userErrorf(ErrNoMetric, "%s", l.T(i18n.ChartNoMetric, run.ID))
	}
	if metric != "" {
		for _, n := range names {
			if strings.EqualFold(n, metric) {
				return []string{n}, nil
			}
		}
		return nil, userErrorf(ErrNoMetric, "%s", l.T(i18n.ChartNoSuchMetric, run.ID, metric, strings.Join(names, ", ")))
	}
	var pick []string
	for _, n := range names {
		if trainer.IsLossName(n) {
			pick = append(pick, n)
		}
	}
	if len(pick) == 0 {
		pick = names[:1]
	}
	return pick[:min(len(pick), 4)], nil
}

// toXY turns stored points into chart points: X is the step, or the
// seconds since start (the instant trainbot read the point).
func toXY(pts []history.Point, start time.Time, xTime bool) []plots.XY {
	out := make([]plots.XY, len(pts))
	t0 := start.UnixMilli()
	for i, p := range pts {
		x := float64(p.Step)
		if xTime {
			x = float64(p.T-t0) / 1000
		}
		out[i] = plots.XY{X: x, Y: p.Value}
	}
	return out
}

// ChangeReader is ChartData that also has the runs' live changes (调参):
// charts mark them. The store is one.
type ChangeReader interface {
	// RunChanges returns a run's live changes, oldest first.
	RunChanges(ctx context.Context, runID int64) ([]trainer.LiveChange, error)
}

// changeMarkers are the run's live changes as chart markers, at the step
// each was made (or its seconds since the start, with xTime); none when
// the data has no changes to tell.
func (c *Charts) changeMarkers(ctx context.Context, run *trainer.Run, xTime bool) []plots.Marker {
	cr, ok := c.Data.(ChangeReader)
	if !ok {
		return nil
	}
	changes, err := cr.RunChanges(ctx, run.ID)
	if err != nil {
		return nil // a chart without its markers rather than none
	}
	var out []plots.Marker
	for _, ch := range changes {
		x := float64(ch.Step)
		if xTime {
			x = ch.At.Sub(run.StartedAt).Seconds()
		}
		out = append(out, plots.Marker{X: x, Label: ch.Label()})
	}
	return out
}

// flushWait bounds how long a chart waits for the points queued before it
// to be written: the store's writer runs niced, and on a host whose every
// core the training holds it can be minutes behind; the chart is drawn
// from what is written then, a few seconds short at its end, rather than
// not at all.
var flushWait = 5 * time.Second

// flush writes the points queued so far, for up to flushWait; only a
// failure other than that wait's end is an error.
func (c *Charts) flush(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, flushWait)
	defer cancel()
	err := c.Data.Flush(fctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flush points: %w", err)
	}
	return nil
}

// Loss draws the loss chart of a run.
func (c *Charts) Loss(ctx context.Context, run *trainer.Run, o LossOptions) (chat.Image, error) {
	if err := c.flush(ctx); err != nil {
		return chat.Image{}, err
	}
	names, err := c.Data.MetricNames(ctx, run.ID)
	if err != nil {
		return chat.Image{}, fmt.Errorf("read metrics of run %d: %w", run.ID, err)
	}
	pick, err := pickLosses(c.Lang, run, names, o.Metric)
	if err != nil {
		return chat.Image{}, err
	}
	chart := plots.LossChart{Title: c.runTitle(run), Lang: c.Lang, Smoothing: c.smoothing(), XTime: o.XTime}
	if len(pick) == 1 {
		chart.YLabel = pick[0]
	}
	total, finite := 0, 0
	series := c.Data.Series
	if cd, ok := c.Data.(chainData); ok && run.ResumedFrom != 0 {
		series = cd.ChainSeries // a chain of resumes is one curve
	}
	for _, n := range pick {
		pts, err := series(ctx, run.ID, n)
		if err != nil {
			return chat.Image{}, fmt.Errorf("read %s of run %d: %w", n, run.ID, err)
		}
		s := plots.Series{Name: n, Points: toXY(pts, run.StartedAt, o.XTime)}
		for _, p := range pts {
			if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
				finite++
			}
		}
		total += len(pts)
		chart.Series = append(chart.Series, s)
	}
	chart.YBytes = len(pick) == 1 && byteMetric(pick[0], chart.Series)
	chart.Markers = c.changeMarkers(ctx, run, o.XTime)
	png, err := c.painter().Loss(chart)
	if errors.Is(err, plots.ErrNoData) {
		return chat.Image{}, userErrorf(ErrNoMetric, "%s", c.Lang.T(i18n.ChartAllNaN, run.ID, strings.Join(pick, ", "), total))
	}
	if err != nil {
		return chat.Image{}, fmt.Errorf("draw run %d: %w", run.ID, err)
	}
	caption := c.Lang.T(i18n.ChartLossCaption, run.ID, run.Job, strings.Join(pick, ", "), total)
	if finite < total {
		caption += c.Lang.T(i18n.ChartNaNCaption, total-finite)
	}
	name := "loss"
	if o.Metric != "" {
		name = fileSafe(pick[0])
	}
	file := fmt.Sprintf("run-%d-%s.png", run.ID, name)
	cmd := c.command("plot", strconv.FormatInt(run.ID, 10))
	if o.Metric != "" {
		cmd += " --metric " + pick[0]
	}
	if o.XTime {
		cmd += " --x time"
	}
	return chat.Image{Name: file, PNG: png, Caption: caption, Command: cmd + " -o " + file}, nil
}

// fileSafe keeps letters, digits, '-', '_' and '.' of a metric name.
func fileSafe(s string) string {
	out := strings.Map(func(r rune) rune {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
	if strings.Trim(out, "_.") == "" {
		return "metric"
	}
	return out
}

func (c *Charts) end(run *trainer.Run) time.Time {
	if run.EndedAt.IsZero() {
		return c.now()
	}
	return run.EndedAt
}

// Memory draws what a run held over time: GPU memory of its processes with
// the devices' capacity as a ceiling, and the host memory of its process
// tree.
func (c *Charts) Memory(ctx context.Context, run *trainer.Run) (chat.Image, error) {
	samples, err := c.Data.RunMemorySeries(ctx, run.ID)
	if err != nil {
		return chat.Image{}, fmt.Errorf("read memory of run %d: %w", run.ID, err)
	}
	chart := plots.MemoryChart{Title: c.runTitle(run), Lang: c.Lang}
	peakGPU, peakHost, total := int64(-1), int64(-1), int64(-1)
	for _, m := range samples {
		x := m.T.Sub(run.StartedAt).Seconds()
		if m.GPUBytes != nil {
			chart.GPU = append(chart.GPU, plots.XY{X: x, Y: float64(*m.GPUBytes)})
			peakGPU = max(peakGPU, *m.GPUBytes)
		}
		if m.GPUTotal != nil && *m.GPUTotal > 0 {
			chart.GPUTotal = append(chart.GPUTotal, plots.XY{X: x, Y: float64(*m.GPUTotal)})
			total = max(total, *m.GPUTotal)
		}
		if m.HostBytes != nil {
			chart.Host = append(chart.Host, plots.XY{X: x, Y: float64(*m.HostBytes)})
			peakHost = max(peakHost, *m.HostBytes)
		}
	}
	// One peak per run: the recorded peak (the end report's) when it is
	// above every sample, as the chart and its caption show it.
	hostNote := ""
	if run.PeakGPUMem != nil && *run.PeakGPUMem > peakGPU {
		peakGPU = *run.PeakGPUMem
		chart.GPUPeak = float64(peakGPU)
	}
	if run.PeakHostMem != nil && *run.PeakHostMem > peakHost && len(chart.Host) > 0 {
		peakHost = *run.PeakHostMem
		chart.HostPeak, chart.HostPeakNote = float64(peakHost), peakShort(c.Lang, run.PeakHostHow)
		hostNote = chart.HostPeakNote
	}
	png, err := c.painter().Memory(chart)
	if errors.Is(err, plots.ErrNoData) {
		return chat.Image{}, userErrorf(ErrNoSamples, "%s", c.Lang.T(i18n.ChartNoMemory, run.ID))
	}
	if err != nil {
		return chat.Image{}, fmt.Errorf("draw memory of run %d: %w", run.ID, err)
	}
	var parts []string
	if peakGPU > 0 { // samples of 0 bytes are no peak (a run that filled the GPU between two samples)
		s := c.Lang.T(i18n.ChartPeakGPU, FormatBytes(peakGPU))
		if total > 0 {
			s = c.Lang.T(i18n.ChartPeakGPUOf, FormatBytes(peakGPU), FormatBytes(total))
		}
		parts = append(parts, s)
	}
	if peakHost >= 0 {
		s := c.Lang.T(i18n.ChartPeakHost, FormatBytes(peakHost))
		switch {
		case hostNote != "" && c.Lang == i18n.Zh:
			s += c.Lang.T(i18n.DetailParen, PeakHowText(c.Lang, run.PeakHostHow))
		case hostNote != "":
			s += " (" + hostNote + ")"
		}
		parts = append(parts, s)
	}
	// 显存 is GPU memory: a chart of host memory alone says 内存.
	captionMsg := i18n.ChartMemCaption
	if len(chart.GPU) == 0 {
		captionMsg = i18n.ChartMemCaptionHost
	}
	caption := c.Lang.T(captionMsg, run.ID, run.Job, strings.Join(parts, " · "))
	file := fmt.Sprintf("run-%d-memory.png", run.ID)
	return chat.Image{Name: file, PNG: png, Caption: caption, Command: c.command("plot", fmt.Sprintf("%d --kind memory -o %s", run.ID, file))}, nil
}

// Device draws the utilisation and temperature of the devices sampled
// while a run ran.
func (c *Charts) Device(ctx context.Context, run *trainer.Run) (chat.Image, error) {
	from, to := run.StartedAt, c.end(run)
	devices, err := c.Data.DevicesBetween(ctx, from, to)
	if err != nil {
		return chat.Image{}, fmt.Errorf("read devices: %w", err)
	}
	chart := plots.DeviceChart{Title: c.runTitle(run), Lang: c.Lang}
	var names []string
	for _, d := range devices {
		samples, err := c.Data.DeviceSeries(ctx, d, from, to)
		if err != nil {
			return chat.Image{}, fmt.Errorf("read device %d: %w", d, err)
		}
		ds := plots.DeviceSeries{Name: fmt.Sprintf("GPU %d", d)}
		for _, s := range samples {
			if s.Name != "" && !strings.Contains(ds.Name, "·") {
				ds.Name += " · " + s.Name
			}
			x := s.T.Sub(run.StartedAt).Seconds()
			if s.Util >= 0 {
				ds.Util = append(ds.Util, plots.XY{X: x, Y: float64(s.Util)})
			}
			if s.TempC >= 0 {
				ds.TempC = append(ds.TempC, plots.XY{X: x, Y: float64(s.TempC)})
			}
		}
		chart.Devices = append(chart.Devices, ds)
		names = append(names, ds.Name)
	}
	png, err := c.painter().Device(chart)
	if errors.Is(err, plots.ErrNoData) {
		return chat.Image{}, userErrorf(ErrNoSamples, "%s", c.Lang.T(i18n.ChartNoDevice, run.ID))
	}
	if err != nil {
		return chat.Image{}, fmt.Errorf("draw devices of run %d: %w", run.ID, err)
	}
	caption := c.Lang.T(i18n.ChartDevCaption, run.ID, run.Job, strings.Join(names, ", "))
	file := fmt.Sprintf("run-%d-util.png", run.ID)
	return chat.Image{Name: file, PNG: png, Caption: caption, Command: c.command("plot", fmt.Sprintf("%d --kind util -o %s", run.ID, file))}, nil
}

// peakOf returns the highest of a run's samples, or -1.
func peakOf(samples []history.RunMemory, get func(history.RunMemory) *int64) int64 {
	peak := int64(-1)
	for _, m := range samples {
		if v := get(m); v != nil {
			peak = max(peak, *v)
		}
	}
	return peak
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RunCharts draws the charts that go with a report or the end of a run:
// the loss chart, then the memory chart. A run with nothing to draw yet
// gets no chart and no error.
func (c *Charts) RunCharts(ctx context.Context, run *trainer.Run) ([]chat.Image, error) {
	var out []chat.Image
	var errs []error
	loss, err := c.Loss(ctx, run, LossOptions{})
	switch {
	case err == nil:
		out = append(out, loss)
	case !errors.Is(err, ErrNoMetric):
		errs = append(errs, err)
	}
	mem, err := c.Memory(ctx, run)
	switch {
	case err == nil:
		out = append(out, mem)
	case !errors.Is(err, ErrNoSamples):
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// chainData is chart data that can read a chain of on_failure resumes as
// one series (the store can).
type chainData interface {
	ChainSeries(ctx context.Context, runID int64, name string) ([]history.Point, error)
}

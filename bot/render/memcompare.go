package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// byteMetric reports whether a metric holds byte counts, to be drawn in
// binary units: its name says memory (logparse.IsMemoryName) and every
// finite value is at least 1 MiB. A memory the script prints in MB with no
// unit (MMEngine's "memory: 3000") stays a plain number.
func byteMetric(name string, series []plots.Series) bool {
	if !logparse.IsMemoryName(name) {
		return false
	}
	n := 0
	for _, s := range series {
		for _, p := range s.Points {
			if finite(p.Y) {
				if p.Y < 1<<20 {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

// CompareAll is 对比 without a metric: the table, the loss overlay and the
// memory overlay (left out when no run has a memory figure).
func (c *Charts) CompareAll(ctx context.Context, runs []*trainer.Run, o LossOptions) ([]chat.Image, string, error) {
	cmp, series, err := c.comparison(ctx, runs, o.Metric, o.XTime, true)
	if err != nil {
		return nil, "", err
	}
	var imgs []chat.Image
	text := cmp.Text(c.Lang)
	if cmp.Metric != "" {
		img, err := c.compareChart(cmp, runs, series, o)
		if err != nil {
			return nil, "", err
		}
		if img.PNG == nil {
			text += fmt.Sprintf("\n(no %s chart: no run has a finite value of it)", cmp.Metric)
		} else {
			imgs = append(imgs, img)
		}
	}
	mem, err := c.memoryOverlay(ctx, runs, cmp, o)
	switch {
	case errors.Is(err, ErrNoSamples):
	case err != nil:
		return nil, "", err
	default:
		imgs = append(imgs, mem)
	}
	return imgs, text, nil
}

// CompareMemory is 对比 A B 显存 (and `trainbot compare --metric memory`):
// the table and the runs' memory overlaid. Runs with no memory sample nor
// peak, but a metric the script printed as "memory", get that metric's
// overlay instead.
func (c *Charts) CompareMemory(ctx context.Context, runs []*trainer.Run, o LossOptions) (chat.Image, string, error) {
	cmp, _, err := c.comparison(ctx, runs, o.Metric, false, true)
	if err != nil {
		return chat.Image{}, "", err
	}
	img, err := c.memoryOverlay(ctx, runs, cmp, o)
	if errors.Is(err, ErrNoSamples) && o.Metric == "" {
		if img, text, err2 := c.Compare(ctx, runs, LossOptions{Metric: "memory", XTime: !o.XStep}); err2 == nil {
			return img, text, nil
		}
	}
	if err != nil {
		return chat.Image{}, "", err
	}
	return img, cmp.Text(c.Lang), nil
}

// memoryOverlay draws each run's memory over time (or over steps with
// o.XStep): the GPU memory of its processes when NVML sampled any of the
// runs, else the resident host memory of its process tree, each run's
// peak marked (its recorded high-water mark when the samples missed it),
// and the GPUs' capacity as a ceiling. ErrNoSamples when no run has a
// memory figure.
func (c *Charts) memoryOverlay(ctx context.Context, runs []*trainer.Run, cmp Comparison, o LossOptions) (chat.Image, error) {
	samples := make([][]history.RunMemory, len(runs))
	gpu := false
	for i, r := range runs {
		mem, err := c.Data.RunMemorySeries(ctx, r.ID)
		if err != nil {
			return chat.Image{}, fmt.Errorf("read memory of run %d: %w", r.ID, err)
		}
		samples[i] = mem
		for _, m := range mem {
			gpu = gpu || (m.GPUBytes != nil && *m.GPUBytes > 0)
		}
	}
	differs := differingParams(runs)
	jobsDiffer := false
	for _, r := range runs[1:] {
		jobsDiffer = jobsDiffer || r.Job != runs[0].Job
	}
	var steps []stepClock // per run, the step reached at an instant (X = step)
	if o.XStep && cmp.Metric != "" {
		for _, r := range runs {
			pts, err := c.Data.Series(ctx, r.ID, cmp.Metric)
			if err != nil {
				return chat.Image{}, fmt.Errorf("read %s of run %d: %w", cmp.Metric, r.ID, err)
			}
			steps = append(steps, newStepClock(pts))
		}
	}
	var series []plots.Series
	var total int64
	hows := map[string]bool{}
	found := false
	for i, r := range runs {
		s := plots.Series{Name: compareLabel(runs, i, jobsDiffer, differs[i])}
		for _, m := range samples[i] {
			v := m.HostBytes
			if gpu {
				v = m.GPUBytes
				if m.GPUTotal != nil {
					total = max(total, *m.GPUTotal)
				}
			}
			if v == nil {
				continue
			}
			x := m.T.Sub(r.StartedAt).Seconds()
			if steps != nil {
				x = steps[i].at(m.T.UnixMilli())
			}
			s.Points = append(s.Points, plots.XY{X: x, Y: float64(*v)})
		}
		peak, how := r.PeakHostMem, r.PeakHostHow
		if gpu {
			peak, how = r.PeakGPUMem, ""
		}
		if peak != nil && *peak > 0 {
			s.Peak = float64(*peak)
			if !gpu && how != history.PeakSampled {
				s.PeakNote = peakShort(how)
				hows[how] = true
			}
			if len(s.Points) == 0 { // a run too short to be sampled: its peak alone
				x := r.Duration(c.now()).Seconds()
				if steps != nil {
					x = float64(r.Steps)
				}
				s.Points = []plots.XY{{X: x, Y: s.Peak}}
			}
		}
		found = found || len(s.Points) > 0
		series = append(series, s)
	}
	if !found {
		return chat.Image{}, userErrorf(ErrNoSamples, "%s", c.Lang.T(i18n.CmpNoMemPeak))
	}
	ids := make([]string, len(runs))
	nums := make([]string, len(runs))
	for i, r := range runs {
		ids[i], nums[i] = fmt.Sprintf("#%d", r.ID), fmt.Sprint(r.ID)
	}
	what := "host memory of each run's process tree (RSS samples"
	zh := "内存对比"
	if gpu {
		what, zh = "GPU memory of each run's processes (NVML samples", "显存对比"
	}
	if len(hows) > 0 {
		var notes []string
		for _, h := range sortedKeys(hows) {
			notes = append(notes, trainer.PeakHostNote(h))
		}
		what += "; peaks: " + strings.Join(notes, "; ")
	}
	what += ")"
	chart := plots.LossChart{
		Lang:   c.Lang,
		KindZH: zh, KindEN: "Memory",
		Title:  fmt.Sprintf("%s · runs %s", what, strings.Join(ids, " vs ")),
		XLabel: "time since start", XTime: true,
		YLabel: "memory",
		YBytes: true, Peaks: true,
		Series: series,
	}
	if steps != nil {
		chart.XLabel, chart.XTime = "step", false
	}
	if total > 0 {
		chart.Ceiling, chart.CeilingLabel = float64(total), "GPU total "+FormatBytes(total)
	}
	png, err := c.painter().Loss(chart)
	if errors.Is(err, plots.ErrNoData) {
		return chat.Image{}, userErrorf(ErrNoSamples, "%s", c.Lang.T(i18n.CmpNoMem))
	}
	if err != nil {
		return chat.Image{}, fmt.Errorf("draw memory comparison: %w", err)
	}
	file := "compare-" + strings.Join(nums, "-") + "-memory.png"
	cmd := c.command("compare", strings.Join(nums, " ")+" --metric memory")
	if steps != nil {
		cmd += " --x step"
	}
	caption := fmt.Sprintf("memory of runs %s", strings.Join(ids, ", "))
	var peaks []string
	for i, s := range series {
		if len(s.Points) > 0 {
			peaks = append(peaks, fmt.Sprintf("%s %s", ids[i], FormatBytes(int64(math.Max(s.Peak, maxY(s.Points))))))
		}
	}
	if len(peaks) > 0 {
		caption += " · peaks " + strings.Join(peaks, ", ")
	}
	return chat.Image{Name: file, PNG: png, Caption: caption, Command: cmd + " -o " + file}, nil
}

// peakShort is how a peak was measured, for a chart's label.
func peakShort(how string) string {
	switch how {
	case history.PeakMain:
		return "VmHWM, exact"
	case history.PeakTreeSum:
		return "ΣVmHWM, upper bound"
	case history.PeakCgroup:
		return "cgroup peak"
	}
	return ""
}

// stepClock maps an instant to the step a run had reached: the highest
// step of its points read at or before it.
type stepClock struct {
	t    []int64 // unix ms, increasing
	step []int64 // the highest step read by t[i]
}

func newStepClock(pts []history.Point) stepClock {
	sorted := append([]history.Point(nil), pts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].T < sorted[j].T })
	var c stepClock
	for _, p := range sorted {
		top := p.Step
		if n := len(c.step); n > 0 {
			top = max(top, c.step[n-1])
		}
		c.t, c.step = append(c.t, p.T), append(c.step, top)
	}
	return c
}

// at is the step reached at t (unix ms); 0 before the first point.
func (c stepClock) at(t int64) float64 {
	i := sort.Search(len(c.t), func(i int) bool { return c.t[i] > t })
	if i == 0 {
		return 0
	}
	return float64(c.step[i-1])
}

func maxY(pts []plots.XY) float64 {
	m := math.Inf(-1)
	for _, p := range pts {
		m = math.Max(m, p.Y)
	}
	return m
}

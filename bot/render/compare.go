package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/trainer"
)

// RunSummary is one run of a comparison.
type RunSummary struct {
	Run      *trainer.Run
	Duration time.Duration
	Steps    int64
	// StepsPerSec is measured between the first and the last point of the
	// compared metric; 0 when unknown.
	StepsPerSec float64
	// HasMetric says the run logged the compared metric; Final is its
	// last value (NaN when that was NaN), Best its lowest finite one.
	HasMetric   bool
	Final, Best float64
	// PeakGPU and PeakHost are bytes, -1 when unknown.
	PeakGPU, PeakHost int64
	// Differs lists the parameters whose value is not the same in every
	// run: "batch_size=32".
	Differs []string
}

// finished says the run ran to its end (exit status 0): only then is
// Duration its whole time.
func (s RunSummary) finished() bool { return s.Run.Outcome == trainer.OutcomeFinished }

// whole is the whole time of the run: its Duration when finished, else
// the time so far plus what the steps it has left take at StepsPerSec
// (the ETA); 0 when unknown (no total steps or no speed).
func (s RunSummary) whole() time.Duration {
	r := s.Run
	switch {
	case s.finished():
		return s.Duration
	case r.Total > r.Steps && r.Steps > 0 && s.StepsPerSec > 0:
		return s.Duration + time.Duration(float64(r.Total-r.Steps)/s.StepsPerSec*float64(time.Second))
	}
	return 0
}

// secPerStep is the time a step took, 0 when unknown.
func (s RunSummary) secPerStep() float64 {
	if s.StepsPerSec <= 0 {
		return 0
	}
	return 1 / s.StepsPerSec
}

// Comparison is what `对比` and `trainbot compare` report.
type Comparison struct {
	Metric string
	Runs   []RunSummary
}

// Compare compares runs: their metric curves overlaid (chat.Image, empty when no
// run has a finite value of it) and a table as text, with ratios against the
// first run.
func (c *Charts) Compare(ctx context.Context, runs []*trainer.Run, o LossOptions) (chat.Image, string, error) {
	cmp, series, err := c.comparison(ctx, runs, o.Metric, o.XTime, false)
	if err != nil {
		return chat.Image{}, "", err
	}
	img, err := c.compareChart(cmp, runs, series, o)
	if err != nil {
		return chat.Image{}, "", err
	}
	text := cmp.Text(c.Lang)
	if img.PNG == nil {
		text += c.Lang.T(i18n.CmpNoChart, cmp.Metric)
	}
	return img, text, nil
}

// compareChart draws the overlay of a comparison's metric; an image
// without PNG when no run has a finite value of it.
func (c *Charts) compareChart(cmp Comparison, runs []*trainer.Run, series []plots.Series, o LossOptions) (chat.Image, error) {
	ids := make([]string, len(runs))
	nums := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = fmt.Sprintf("#%d", r.ID)
		nums[i] = fmt.Sprint(r.ID)
	}
	chart := plots.LossChart{
		KindZH: "对比", KindEN: "Comparison", Lang: c.Lang,
		Title:     c.Lang.T(i18n.CmpChartTitle, cmp.Metric, strings.Join(ids, " vs ")),
		YLabel:    cmp.Metric,
		XTime:     o.XTime,
		Smoothing: c.smoothing(),
		Series:    series,
		YBytes:    byteMetric(cmp.Metric, series),
	}
	png, err := c.painter().Loss(chart)
	if errors.Is(err, plots.ErrNoData) {
		return chat.Image{}, nil
	}
	if err != nil {
		return chat.Image{}, fmt.Errorf("draw comparison: %w", err)
	}
	file := "compare-" + strings.Join(nums, "-") + ".png"
	cmd := c.command("compare", strings.Join(nums, " ")+" --metric "+cmp.Metric)
	if o.XTime {
		cmd += " --x time"
	}
	caption := c.Lang.T(i18n.CmpChartCaption, cmp.Metric, strings.Join(ids, c.Lang.T(i18n.DetailListSep)))
	var same []string
	for _, s := range series {
		if a, b, ok := strings.Cut(strings.SplitN(s.Name, " (", 2)[0], " = "); ok {
			same = append(same, a+" = "+b)
		}
	}
	if len(same) > 0 {
		caption += c.Lang.T(i18n.CmpChartIdentical, strings.Join(same, c.Lang.T(i18n.DetailListSep)))
	}
	img := chat.Image{
		Name:    file,
		PNG:     png,
		Caption: caption,
		Command: cmd + " -o " + file,
	}
	return img, nil
}

// comparison reads what Compare shows. With anyMetric, runs that share no
// metric still give a table (the memory overlay needs none).
func (c *Charts) comparison(ctx context.Context, runs []*trainer.Run, metric string, xTime, anyMetric bool) (Comparison, []plots.Series, error) {
	if len(runs) < 2 {
		return Comparison{}, nil, errors.New("compare: want two or more runs")
	}
	if err := c.flush(ctx); err != nil {
		return Comparison{}, nil, err
	}
	names := make([][]string, len(runs))
	for i, r := range runs {
		n, err := c.Data.MetricNames(ctx, r.ID)
		if err != nil {
			return Comparison{}, nil, fmt.Errorf("read metrics of run %d: %w", r.ID, err)
		}
		names[i] = n
	}
	m, err := commonMetric(c.Lang, runs, names, metric)
	if err != nil && !(anyMetric && metric == "" && errors.Is(err, ErrNoMetric)) {
		return Comparison{}, nil, err
	}
	cmp := Comparison{Metric: m}
	differs := differingParams(runs)
	jobsDiffer := false
	for _, r := range runs[1:] {
		jobsDiffer = jobsDiffer || r.Job != runs[0].Job
	}
	var series []plots.Series
	var all [][]history.Point
	now := c.now()
	for i, r := range runs {
		s := RunSummary{Run: r, Duration: r.Duration(now), Steps: r.Steps, Final: math.NaN(), Best: math.NaN(),
			PeakGPU: -1, PeakHost: -1, Differs: differs[i]}
		var pts []history.Point
		if m != "" {
			if pts, err = c.Data.Series(ctx, r.ID, m); err != nil {
				return Comparison{}, nil, fmt.Errorf("read %s of run %d: %w", m, r.ID, err)
			}
		}
		all = append(all, pts)
		if len(pts) > 0 {
			s.HasMetric = true
			s.Final = pts[len(pts)-1].Value
			for _, p := range pts {
				if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) && (math.IsNaN(s.Best) || p.Value < s.Best) {
					s.Best = p.Value
				}
			}
			s.StepsPerSec = stepsPerSec(pts)
		}
		if s.StepsPerSec == 0 && r.Steps > 0 && s.Duration > 0 {
			s.StepsPerSec = float64(r.Steps) / s.Duration.Seconds()
		}
		mem, err := c.Data.RunMemorySeries(ctx, r.ID)
		if err != nil {
			return Comparison{}, nil, fmt.Errorf("read memory of run %d: %w", r.ID, err)
		}
		s.PeakGPU = peakOf(mem, func(m history.RunMemory) *int64 { return m.GPUBytes })
		s.PeakHost = peakOf(mem, func(m history.RunMemory) *int64 { return m.HostBytes })
		if r.PeakGPUMem != nil {
			s.PeakGPU = max(s.PeakGPU, *r.PeakGPUMem)
		}
		if r.PeakHostMem != nil {
			s.PeakHost = max(s.PeakHost, *r.PeakHostMem)
		}
		cmp.Runs = append(cmp.Runs, s)

		series = append(series, plots.Series{Name: compareLabel(runs, i, jobsDiffer, differs[i]), Points: toXY(pts, r.StartedAt, xTime)})
	}
	for i, j := range sameAs(all) {
		if j >= 0 {
			series[i].Name = sameLabel(runs, i, j, jobsDiffer, differs[i])
			series[i].Dashed = true
		}
	}
	return cmp, series, nil
}

// compareLabel names run i in a comparison's legend: "#12", with its job
// when the jobs differ, and the parameters that differ.
func compareLabel(runs []*trainer.Run, i int, jobsDiffer bool, differs []string) string {
	label := fmt.Sprintf("#%d", runs[i].ID)
	if jobsDiffer {
		label += " " + runs[i].Job
	}
	switch {
	case runs[i].Note != "":
		// The note says what the run was: the column head.
		label += " " + Clip(runs[i].Note, 40)
	case len(differs) > 0:
		label += " " + Clip(strings.Join(differs, " "), 40)
	}
	return label
}

// sameLabel names run i whose curve equals run j's point for point:
// "#13 = #12 (ckpt=1)".
func sameLabel(runs []*trainer.Run, i, j int, jobsDiffer bool, differs []string) string {
	rest := strings.TrimPrefix(compareLabel(runs, i, jobsDiffer, differs), fmt.Sprintf("#%d", runs[i].ID))
	label := fmt.Sprintf("#%d = #%d", runs[i].ID, runs[j].ID)
	if rest = strings.TrimSpace(rest); rest != "" {
		label += " (" + rest + ")"
	}
	return label
}

// sameAs returns, for each series, the first earlier one it equals point
// for point (same steps, same values; NaN equals NaN), or -1.
func sameAs(all [][]history.Point) []int {
	out := make([]int, len(all))
	for i := range all {
		out[i] = -1
		for j := 0; j < i && out[i] < 0; j++ {
			if out[j] < 0 && equalPoints(all[i], all[j]) {
				out[i] = j
			}
		}
	}
	return out
}

func equalPoints(a, b []history.Point) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k := range a {
		va, vb := a[k].Value, b[k].Value
		if a[k].Step != b[k].Step || (va != vb && !(math.IsNaN(va) && math.IsNaN(vb))) {
			return false
		}
	}
	return true
}

// commonMetric picks the metric to compare: the named one, else "loss",
// else "train_loss", else the first loss every run logged, else the first
// metric every run logged, else the first run's first loss.
func commonMetric(l i18n.Lang, runs []*trainer.Run, names [][]string, metric string) (string, error) {
	in := func(list []string, n string) bool {
		for _, x := range list {
			if strings.EqualFold(x, n) {
				return true
			}
		}
		return false
	}
	everyone := func(n string) bool {
		for _, l := range names {
			if !in(l, n) {
				return false
			}
		}
		return true
	}
	anyone := func(n string) (string, bool) {
		for _, l := range names {
			for _, x := range l {
				if strings.EqualFold(x, n) {
					return x, true
				}
			}
		}
		return "", false
	}
	if metric != "" {
		if n, ok := anyone(metric); ok {
			return n, nil
		}
		return "", userErrorf(ErrNoMetric, "%s", l.T(i18n.CmpNoSuch, metric))
	}
	for _, n := range []string{"loss", "train_loss"} {
		if everyone(n) {
			return n, nil
		}
	}
	for _, l := range names {
		for _, n := range l {
			if trainer.IsLossName(n) && everyone(n) {
				return n, nil
			}
		}
	}
	for _, n := range names[0] {
		if everyone(n) {
			return n, nil
		}
	}
	for i, ns := range names {
		if len(ns) > 0 {
			pick, _ := pickLosses(l, runs[i], ns, "")
			return pick[0], nil
		}
	}
	return "", userErrorf(ErrNoMetric, "%s", l.T(i18n.CmpNoMetricYet))
}

// differingParams returns, per run, "name=value" for each parameter whose
// value is not the same in every run.
func differingParams(runs []*trainer.Run) [][]string {
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r.Params {
			keys[k] = true
		}
	}
	out := make([][]string, len(runs))
	for _, k := range sortedKeys(keys) {
		same := true
		first, ok0 := runs[0].Params[k]
		for _, r := range runs[1:] {
			v, ok := r.Params[k]
			if v != first || ok != ok0 {
				same = false
			}
		}
		if same {
			continue
		}
		for i, r := range runs {
			v, ok := r.Params[k]
			if !ok {
				v = "–"
			}
			out[i] = append(out[i], k+"="+v)
		}
	}
	return out
}

// stepsPerSec is the training speed between the first and the last point.
func stepsPerSec(pts []history.Point) float64 {
	first, last := pts[0], pts[0]
	for _, p := range pts {
		if p.T < first.T || (p.T == first.T && p.Step < first.Step) {
			first = p
		}
		if p.T > last.T || (p.T == last.T && p.Step > last.Step) {
			last = p
		}
	}
	dt := float64(last.T-first.T) / 1000
	if dt <= 0 || last.Step <= first.Step {
		return 0
	}
	return float64(last.Step-first.Step) / dt
}

// Text is the comparison as a chat message: a block per run, ratios
// against the first, and a one-line verdict per other run; in l.
func (c Comparison) Text(l i18n.Lang) string {
	var b strings.Builder
	base := c.Runs[0]
	b.WriteString(l.T(i18n.CmpHead, c.Metric, base.Run.ID))
	if len(base.Differs) == 0 {
		b.WriteString(l.T(i18n.CmpSame))
	}
	var notDone []string
	for _, s := range c.Runs {
		if !s.finished() {
			notDone = append(notDone, fmt.Sprintf("#%d", s.Run.ID))
		}
	}
	if len(notDone) > 0 {
		b.WriteString(l.T(i18n.CmpNotDoneNote, strings.Join(notDone, l.T(i18n.ListSep))))
	}
	for i, s := range c.Runs {
		r := s.Run
		fmt.Fprintf(&b, "%s #%d %s · %s", OutcomeIcon(r.Outcome), r.ID, r.Job, OutcomeWord(l, r.Outcome))
		if !s.finished() {
			switch {
			case r.Steps > 0 && r.Total > 0:
				b.WriteString(l.T(i18n.CmpNotDoneOf, r.Steps, r.Total))
			case r.Steps > 0:
				b.WriteString(l.T(i18n.CmpNotDoneAt, r.Steps))
			default:
				b.WriteString(l.T(i18n.CmpNotDone))
			}
		}
		if r.Note != "" {
			b.WriteString(" · 📝 " + r.Note)
		}
		if len(s.Differs) > 0 {
			b.WriteString(" · " + strings.Join(s.Differs, " "))
		}
		b.WriteString("\n")
		cmp := func(v, ref float64) string {
			if i == 0 {
				return ""
			}
			return ratio(l, v, ref)
		}
		// A whole time is set against a whole (or projected) one only.
		var line []string
		if s.finished() {
			line = append(line, l.T(i18n.CmpTime, l.Duration(s.Duration))+cmp(wholeSecs(s), wholeSecs(base)))
		} else {
			line = append(line, l.T(i18n.CmpTimeSoFar, l.Duration(s.Duration)))
			if w := s.whole(); w > 0 {
				line = append(line, l.T(i18n.CmpProjected, l.Duration(w))+cmp(wholeSecs(s), wholeSecs(base)))
			}
		}
		if s.Steps > 0 {
			line = append(line, l.T(i18n.Steps, s.Steps))
		}
		if s.StepsPerSec > 0 {
			line = append(line, l.T(i18n.StepsPerSec, trimFloat(roundSig(s.StepsPerSec, 3)))+cmp(s.StepsPerSec, base.StepsPerSec),
				l.T(i18n.CmpPerStep, trimFloat(roundSig(s.secPerStep(), 3))))
		}
		b.WriteString("  " + strings.Join(line, " · ") + "\n")
		final := i18n.CmpFinal
		if !s.finished() {
			final = i18n.CmpLatest // the value so far, not where it ended
		}
		if s.HasMetric {
			b.WriteString(l.T(final, c.Metric, FormatMetric(c.Metric, s.Final), cmp(s.Final, base.Final), FormatMetric(c.Metric, s.Best), cmp(s.Best, base.Best)))
		} else {
			b.WriteString(l.T(i18n.CmpNoMetric, c.Metric))
		}
		var mem []string
		if s.PeakGPU >= 0 {
			mem = append(mem, l.T(i18n.CmpGPU, FormatBytes(s.PeakGPU))+cmp(known(s.PeakGPU), known(base.PeakGPU)))
		}
		if s.PeakHost >= 0 {
			mem = append(mem, l.T(i18n.CmpHost, FormatBytes(s.PeakHost))+cmp(known(s.PeakHost), known(base.PeakHost)))
		}
		if len(mem) > 0 {
			b.WriteString(l.T(i18n.CmpPeak, strings.Join(mem, " · ")))
		}
	}
	for _, s := range c.Runs[1:] {
		var v []string
		switch {
		case s.PeakGPU >= 0 && base.PeakGPU > 0:
			v = append(v, l.T(i18n.CmpVsGPU, percent(l, known(s.PeakGPU), known(base.PeakGPU))))
		case s.PeakHost >= 0 && base.PeakHost > 0:
			v = append(v, l.T(i18n.CmpVsHost, percent(l, known(s.PeakHost), known(base.PeakHost))))
		}
		both := s.finished() && base.finished()
		if both && base.Duration > 0 {
			v = append(v, l.T(i18n.CmpVsTime, percent(l, s.Duration.Seconds(), base.Duration.Seconds())))
		}
		if p := percent(l, s.secPerStep(), base.secPerStep()); p != "" && (!both || s.Steps != base.Steps) {
			v = append(v, l.T(i18n.CmpVsPerStep, p))
		}
		if p := percent(l, wholeSecs(s), wholeSecs(base)); p != "" && !both {
			v = append(v, l.T(i18n.CmpVsProjected, p))
		}
		if p := percent(l, s.Final, base.Final); s.HasMetric && base.HasMetric && p != "" {
			final := i18n.CmpVsFinal
			if !both {
				final = i18n.CmpVsLatest
			}
			v = append(v, l.T(final, c.Metric, p))
		}
		if len(v) > 0 {
			b.WriteString(l.T(i18n.CmpVs, s.Run.ID, base.Run.ID, strings.Join(v, l.T(i18n.ListSep))))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// wholeSecs is a run's whole time in seconds (finished or projected), NaN
// when unknown.
func wholeSecs(s RunSummary) float64 {
	w := s.whole()
	if w <= 0 {
		return math.NaN()
	}
	return w.Seconds()
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ratio is " (+24 %)" ("（+24%）" in Chinese) or "" when there is no
// reference.
func ratio(l i18n.Lang, v, ref float64) string {
	p := percent(l, v, ref)
	switch {
	case p == "":
		return ""
	case l == i18n.Zh:
		return "（" + p + "）"
	}
	return " (" + p + ")"
}

// known is a byte count, or NaN for -1 (unknown).
func known(n int64) float64 {
	if n < 0 {
		return math.NaN()
	}
	return float64(n)
}

// percent is the change from ref to v: "+24 %", "−58 %", "±0 %" (in
// Chinese without the space: "+24%"); "" when either is unknown or ref
// is 0.
func percent(l i18n.Lang, v, ref float64) string {
	if !finite(v) || !finite(ref) || ref == 0 {
		return ""
	}
	sign := l.Pick("%", " %")
	d := (v - ref) / math.Abs(ref) * 100
	switch {
	case math.Abs(d) < 0.5:
		return "±0" + sign
	case d < 0:
		return fmt.Sprintf("−%.0f", -d) + sign
	}
	return fmt.Sprintf("+%.0f", d) + sign
}

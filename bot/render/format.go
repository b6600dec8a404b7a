package render

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// StatusText describes an active run: job, id, step/epoch, latest metrics,
// speed, elapsed and ETA.
func StatusText(l i18n.Lang, st trainer.Status) string {
	var b strings.Builder
	r := st.Run
	b.WriteString(l.T(i18n.StatusHead, r.ID, r.Job, stateText(l, st), l.Duration(st.Elapsed)))
	pr := st.Progress
	switch {
	case pr.Step == 0:
		b.WriteString(l.T(i18n.StatusNoMetric))
	case pr.TotalSteps > 0:
		fmt.Fprintf(&b, "%s %s%s", ProgressBar(float64(pr.Step)/float64(pr.TotalSteps), 10), l.T(i18n.StepOf, pr.Step, pr.TotalSteps), l.Percent("%.1f", 100*float64(pr.Step)/float64(pr.TotalSteps)))
	default:
		b.WriteString(l.T(i18n.Step, pr.Step))
	}
	if !math.IsNaN(pr.Epoch) {
		if pr.TotalEpochs > 0 {
			b.WriteString(" · " + l.T(i18n.EpochOf, trimFloat(pr.Epoch), pr.TotalEpochs))
		} else {
			b.WriteString(" · " + l.T(i18n.Epoch, trimFloat(pr.Epoch)))
		}
	}
	b.WriteString("\n")
	if len(st.Last) > 0 {
		b.WriteString(metricsText(st.Last, 6) + "\n")
	}
	var speed []string
	if st.StepsPerSec > 0 {
		speed = append(speed, l.T(i18n.StepsPerSec, trimFloat(roundSig(st.StepsPerSec, 3))))
	}
	if st.ETA > 0 {
		speed = append(speed, l.T(i18n.ETA, l.Duration(st.ETA)))
	}
	if r.PeakGPUMem != nil {
		speed = append(speed, l.T(i18n.PeakGPUMem, FormatBytes(*r.PeakGPUMem)))
	}
	if r.PeakHostMem != nil {
		speed = append(speed, l.T(i18n.PeakHostMem, FormatBytes(*r.PeakHostMem)))
	}
	if len(speed) > 0 {
		b.WriteString(strings.Join(speed, " · ") + "\n")
	}
	if len(r.GPUs) > 0 {
		b.WriteString(strings.TrimPrefix(l.T(i18n.GPULine, GPUsText(r.GPUs)), "\n") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// StatusBrief is a one-line summary of an active run in l: in English
// trainer.Status.Brief's "step 400/1500, loss 0.4123, running for 1m20s";
// in Chinese "第 400/1500 步，loss 0.4123，已运行 1 分 20 秒".
func StatusBrief(l i18n.Lang, s trainer.Status) string {
	if l != i18n.Zh || s.Waiting != "" || s.Unsupervised != nil {
		return s.Brief()
	}
	var parts []string
	switch {
	case s.Progress.Step > 0 && s.Progress.TotalSteps > 0:
		parts = append(parts, l.T(i18n.StepOf, s.Progress.Step, s.Progress.TotalSteps))
	case s.Progress.Step > 0:
		parts = append(parts, l.T(i18n.Step, s.Progress.Step))
	default:
		parts = append(parts, l.T(i18n.BriefNoStep))
	}
	if m, ok := s.Loss(); ok {
		parts = append(parts, m.Name+" "+FormatValue(m.Value))
	}
	parts = append(parts, l.T(i18n.BriefElapsed, l.Duration(s.Elapsed)))
	return strings.Join(parts, l.T(i18n.ListSep))
}

// stateText is "running", "stopping", "running on node01 (Slurm job 42)" or
// "queued in Slurm (job 42, reason: Resources, partition gpu)".
func stateText(l i18n.Lang, st trainer.Status) string {
	r := st.Run
	running := l.T(i18n.StateRunning)
	state := running
	switch {
	case st.Waiting != "":
		state = st.Waiting
	case r.Host != "":
		state = l.T(i18n.StateHost, r.Host)
	case r.SlurmJobID != "" && r.Node != "":
		state = l.T(i18n.StateSlurmNode, r.Node, r.SlurmJobID)
	case r.SlurmJobID != "":
		state = l.T(i18n.StateSlurm, r.SlurmJobID)
	}
	switch {
	case st.Stopping && state == running:
		state = l.T(i18n.StateStopping)
	case st.Stopping:
		state = l.T(i18n.StateStoppingX, state)
	}
	return state
}

// OutcomeWord is an outcome in l: "finished" in English, "已完成" in
// Chinese; an outcome the catalog does not know is shown as it is.
func OutcomeWord(l i18n.Lang, o trainer.Outcome) string {
	m, ok := outcomeWords[o]
	if !ok {
		return string(o)
	}
	return l.T(m)
}

// RunOutcomeWord is a run's outcome in l, as OutcomeWord, except that an
// out-of-memory end says which memory ran out when the run's end facts
// tell: 显存不足 for a GPU's, 内存不足 for the host's.
func RunOutcomeWord(l i18n.Lang, r *trainer.Run) string {
	if r.Outcome == trainer.OutcomeOOM {
		var o *trainer.OOM
		if r.End != nil {
			o = r.End.OOM
		}
		return l.T(oomMsg(o, i18n.OutcomeOOM, i18n.OutcomeOOMGPU, i18n.OutcomeOOMHost))
	}
	return OutcomeWord(l, r.Outcome)
}

// oomMsg picks the message for an out-of-memory error by the memory it
// ran out of: unknown (o nil), a GPU's, or the host's.
func oomMsg(o *trainer.OOM, unknown, gpuMem, host i18n.Msg) i18n.Msg {
	if o == nil {
		return unknown
	}
	switch o.Kind {
	case "cuda", "tensorflow", "jax", "cublas", "cudnn":
		return gpuMem
	}
	return host
}

var outcomeWords = map[trainer.Outcome]i18n.Msg{
	trainer.OutcomeRunning: i18n.OutcomeRunning, trainer.OutcomeFinished: i18n.OutcomeFinished, trainer.OutcomeStopped: i18n.OutcomeStopped,
	trainer.OutcomeFailed: i18n.OutcomeFailed, trainer.OutcomeOOM: i18n.OutcomeOOM, trainer.OutcomeNaN: i18n.OutcomeNaN,
	trainer.OutcomeStalled: i18n.OutcomeStalled, trainer.OutcomeInterrupted: i18n.OutcomeInterrupted, trainer.OutcomeEnded: i18n.OutcomeEnded,
	trainer.OutcomePreempted: i18n.OutcomePreempted, trainer.OutcomeNodeFailure: i18n.OutcomeNodeFailure, trainer.OutcomeTimeout: i18n.OutcomeTimeout,
	trainer.OutcomeHostReboot: i18n.OutcomeHostReboot,
}

// ParamErrorText words a refused parameter in l; in English and zh+en it
// is the error's own text.
func ParamErrorText(l i18n.Lang, e *trainer.ParamError) string {
	if l != i18n.Zh {
		return e.Error()
	}
	var m i18n.Msg
	switch e.Problem {
	case trainer.ParamUnknown:
		if e.Limit == "" {
			return l.T(i18n.ParamUnknown0, e.Param, e.Value, e.Job)
		}
		return l.T(i18n.ParamUnknown, e.Param, e.Value, e.Job, e.Limit)
	case trainer.ParamRequired:
		return l.T(i18n.ParamRequired, e.Param, specOf(l, e))
	case trainer.ParamBelowMin:
		return l.T(i18n.ParamBelowMin, e.Param, e.Value, e.Limit, specOf(l, e))
	case trainer.ParamAboveMax:
		return l.T(i18n.ParamAboveMax, e.Param, e.Value, e.Limit, specOf(l, e))
	case trainer.ParamNotChoice:
		return l.T(i18n.ParamNotChoice, e.Param, e.Value, e.Limit, specOf(l, e))
	case trainer.ParamNotInt:
		m = i18n.ParamNotInt
	case trainer.ParamIntRange:
		m = i18n.ParamIntRange
	case trainer.ParamNotNumber:
		m = i18n.ParamNotNumber
	case trainer.ParamFloatRange:
		m = i18n.ParamFltRange
	case trainer.ParamNotBool:
		m = i18n.ParamNotBool
	case trainer.ParamNUL:
		m = i18n.ParamNUL
	case trainer.ParamNoGPU:
		m = i18n.ParamGPUs
	default:
		return e.Error()
	}
	return l.T(m, e.Param, e.Value, specOf(l, e))
}

// specOf is the description of a refused parameter's declaration in l.
func specOf(l i18n.Lang, e *trainer.ParamError) string {
	if e.Declared.Type == "" {
		return e.Spec
	}
	return ParamSpecText(l, e.Declared)
}

// ParamSpecText describes a parameter's declaration in l: in English
// trainer.ParamSpec.Describe's "int 1..4096, default 64"; in Chinese
// "整数 1..4096，默认 64", with integer bounds as integers.
func ParamSpecText(l i18n.Lang, p trainer.ParamSpec) string {
	if l != i18n.Zh {
		return p.Describe()
	}
	num := func(v float64) string {
		if p.Type == trainer.ParamInt && v == math.Trunc(v) && math.Abs(v) < 1e18 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	var b strings.Builder
	switch p.Type {
	case trainer.ParamInt:
		b.WriteString(l.T(i18n.ParamTypeInt))
	case trainer.ParamFloat:
		b.WriteString(l.T(i18n.ParamTypeFloat))
	case trainer.ParamBool:
		b.WriteString(l.T(i18n.ParamTypeBool))
	case trainer.ParamString:
		b.WriteString(l.T(i18n.ParamTypeString))
	default:
		b.WriteString(string(p.Type))
	}
	switch {
	case p.Min != nil && p.Max != nil:
		b.WriteString(" " + num(*p.Min) + ".." + num(*p.Max))
	case p.Min != nil:
		b.WriteString(" ≥ " + num(*p.Min))
	case p.Max != nil:
		b.WriteString(" ≤ " + num(*p.Max))
	}
	if len(p.Choices) > 0 {
		b.WriteString(l.T(i18n.ParamChoices, strings.Join(p.Choices, "|")))
	}
	if p.HasDefault {
		b.WriteString(l.T(i18n.ParamDefault, p.Default))
	} else {
		b.WriteString(l.T(i18n.ParamNoDefault))
	}
	return b.String()
}

// metricsText prints up to n metrics, losses first: "loss 0.4123 · acc 0.83".
func metricsText(ms []trainer.Metric, n int) string {
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b trainer.Metric) int {
		la, lb := trainer.IsLossName(a.Name), trainer.IsLossName(b.Name)
		switch {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return 0
	})
	if len(sorted) > n {
		sorted = sorted[:n]
	}
	parts := make([]string, len(sorted))
	for i, m := range sorted {
		parts[i] = m.Name + " " + FormatMetric(m.Name, m.Value)
	}
	return strings.Join(parts, " · ")
}

func mapMetrics(last map[string]float64) []trainer.Metric {
	names := make([]string, 0, len(last))
	for n := range last {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]trainer.Metric, len(names))
	for i, n := range names {
		out[i] = trainer.Metric{Name: n, Value: last[n]}
	}
	return out
}

// ProgressBar draws a text bar of width cells: "▓▓▓▓░░░░░░".
func ProgressBar(frac float64, width int) string {
	if math.IsNaN(frac) || frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	full := int(math.Round(frac * float64(width)))
	return strings.Repeat("▓", full) + strings.Repeat("░", width-full)
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func roundSig(v float64, sig int) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, float64(sig)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// OutcomeIcon is a one-character badge for an outcome.
func OutcomeIcon(o trainer.Outcome) string {
	switch o {
	case trainer.OutcomeFinished:
		return "✅"
	case trainer.OutcomeStopped:
		return "⏹"
	case trainer.OutcomeOOM:
		return "💥"
	case trainer.OutcomeNaN:
		return "⚠️"
	case trainer.OutcomeStalled:
		return "⏸"
	case trainer.OutcomeRunning:
		return "▶️"
	case trainer.OutcomeInterrupted:
		return "❔"
	case trainer.OutcomePreempted, trainer.OutcomeNodeFailure, trainer.OutcomeTimeout, trainer.OutcomeHostReboot:
		return "🔌"
	case trainer.OutcomeEnded:
		return "⏏️"
	}
	return "❌"
}

// EndedText describes a run from the history.
func EndedText(l i18n.Lang, r *trainer.Run, last map[string]float64) string {
	var b strings.Builder
	b.WriteString(l.T(i18n.EndedHead, OutcomeIcon(r.Outcome), r.ID, r.Job, RunOutcomeWord(l, r), l.Duration(r.Duration(time.Now()))))
	if r.Note != "" {
		b.WriteString("\n📝 " + r.Note)
	}
	if r.Steps > 0 {
		if r.Total > 0 {
			b.WriteString(" · " + l.T(i18n.StepOf, r.Steps, r.Total))
		} else {
			b.WriteString(" · " + l.T(i18n.Steps, r.Steps))
		}
	}
	if len(r.Params) > 0 {
		b.WriteString(l.T(i18n.ParamsLine, ParamsText(r.Params)))
	}
	if len(last) > 0 {
		b.WriteString("\n" + metricsText(mapMetrics(last), 6))
	}
	if r.Detail != "" && r.Outcome != trainer.OutcomeRunning {
		b.WriteString("\n" + EndDetail(l, r))
	}
	return b.String()
}

// RunLine is one line of the history: "✅ #12 demo finished 30s 1500 steps loss 0.0172".
//
// The start is shown in now's time zone: "12-01 09:30" (with the year when
// it is not now's).
func RunLine(l i18n.Lang, r *trainer.Run, last map[string]float64, now time.Time) string {
	s := fmt.Sprintf("%s #%d %s %s %s · %s", OutcomeIcon(r.Outcome), r.ID, r.Job, RunOutcomeWord(l, r), l.Duration(r.Duration(now)), StartedText(r.StartedAt, now))
	if r.Steps > 0 {
		s += " · " + l.T(i18n.Steps, r.Steps)
	}
	if m, ok := (trainer.Status{Last: mapMetrics(last)}).Loss(); ok {
		s += fmt.Sprintf(" · %s %s", m.Name, FormatMetric(m.Name, m.Value))
	}
	if r.PeakGPUMem != nil {
		s += l.T(i18n.RunLinePeakGPU, FormatBytes(*r.PeakGPUMem))
	} else if r.PeakHostMem != nil {
		s += l.T(i18n.RunLinePeakHost, FormatBytes(*r.PeakHostMem))
	}
	if r.RetryOf != 0 {
		s += l.T(i18n.RunLineRetry, r.RetryOf)
	}
	if r.ResumedFrom != 0 {
		s += l.T(i18n.RunLineResumed, r.ResumedFrom)
	}
	if len(r.GPUs) > 0 {
		s += " · " + strings.TrimPrefix(l.T(i18n.GPULine, trainer.GPUList(r.GPUs)), "\n")
	}
	if r.Host != "" {
		s += " · 🖥 " + r.Host
	}
	if r.Note != "" {
		s += " · 📝 " + r.Note
	}
	return s
}

// StartedText is when a run started, in now's time zone: "12-01 09:30", or
// "2025-12-01 09:30" in another year.
func StartedText(t, now time.Time) string {
	t = t.In(now.Location())
	if t.Year() != now.Year() {
		return t.Format("2006-01-02 15:04")
	}
	return t.Format("01-02 15:04")
}

// JobsText lists the jobs and their parameters.
func JobsText(l i18n.Lang, jobs []*trainer.Job) string {
	if len(jobs) == 0 {
		return l.T(i18n.NoJobs)
	}
	var b strings.Builder
	b.WriteString(l.T(i18n.JobsHead))
	for _, j := range jobs {
		fmt.Fprintf(&b, "• %s", j.Name)
		if j.Description != "" {
			b.WriteString(" — " + j.Description)
		}
		b.WriteString("\n")
		for _, name := range j.ParamNames() {
			spec := j.Params[name]
			fmt.Fprintf(&b, "    %s: %s", name, ParamSpecText(l, spec))
			if spec.Help != "" {
				b.WriteString(" — " + spec.Help)
			}
			b.WriteString("\n")
		}
	}
	if len(jobs) == 1 {
		b.WriteString(l.T(i18n.JobsStartOne))
	} else {
		b.WriteString(l.T(i18n.JobsStartMany, jobs[0].Name))
	}
	return b.String()
}

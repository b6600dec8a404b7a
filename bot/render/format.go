package render

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// StatusText describes an active run: job, id, step/epoch, latest metrics,
// speed, elapsed and ETA.
func StatusText(st trainer.Status) string {
	var b strings.Builder
	r := st.Run
	fmt.Fprintf(&b, "run #%d · %s · %s for %s\n", r.ID, r.Job, stateText(st), FormatDuration(st.Elapsed))
	pr := st.Progress
	switch {
	case pr.Step == 0:
		b.WriteString("no metric yet")
	case pr.TotalSteps > 0:
		fmt.Fprintf(&b, "%s step %d/%d (%.1f%%)", ProgressBar(float64(pr.Step)/float64(pr.TotalSteps), 10), pr.Step, pr.TotalSteps, 100*float64(pr.Step)/float64(pr.TotalSteps))
	default:
		fmt.Fprintf(&b, "step %d", pr.Step)
	}
	if !math.IsNaN(pr.Epoch) {
		if pr.TotalEpochs > 0 {
			fmt.Fprintf(&b, " · epoch %s/%d", trimFloat(pr.Epoch), pr.TotalEpochs)
		} else {
			fmt.Fprintf(&b, " · epoch %s", trimFloat(pr.Epoch))
		}
	}
	b.WriteString("\n")
	if len(st.Last) > 0 {
		b.WriteString(metricsText(st.Last, 6) + "\n")
	}
	var speed []string
	if st.StepsPerSec > 0 {
		speed = append(speed, fmt.Sprintf("%s steps/s", trimFloat(roundSig(st.StepsPerSec, 3))))
	}
	if st.ETA > 0 {
		speed = append(speed, "ETA "+FormatDuration(st.ETA))
	}
	if r.PeakGPUMem != nil {
		speed = append(speed, "peak GPU mem "+FormatBytes(*r.PeakGPUMem))
	}
	if r.PeakHostMem != nil {
		speed = append(speed, "peak host mem "+FormatBytes(*r.PeakHostMem))
	}
	if len(speed) > 0 {
		b.WriteString(strings.Join(speed, " · ") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// stateText is "running", "stopping", "running on node01 (Slurm job 42)" or
// "queued in Slurm (job 42, reason: Resources, partition gpu)".
func stateText(st trainer.Status) string {
	r := st.Run
	state := "running"
	switch {
	case st.Waiting != "":
		state = st.Waiting
	case r.SlurmJobID != "" && r.Node != "":
		state = fmt.Sprintf("running on %s (Slurm job %s)", r.Node, r.SlurmJobID)
	case r.SlurmJobID != "":
		state = fmt.Sprintf("running in Slurm (job %s)", r.SlurmJobID)
	}
	switch {
	case st.Stopping && state == "running":
		state = "stopping"
	case st.Stopping:
		state = "stopping (" + state + ")"
	}
	return state
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
		parts[i] = m.Name + " " + FormatValue(m.Value)
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
	case trainer.OutcomeEnded:
		return "⏏️"
	}
	return "❌"
}

// EndedText describes a run from the history.
func EndedText(r *trainer.Run, last map[string]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s run #%d · %s · %s after %s", OutcomeIcon(r.Outcome), r.ID, r.Job, r.Outcome, FormatDuration(r.Duration(time.Now())))
	if r.Note != "" {
		b.WriteString("\n📝 " + r.Note)
	}
	if r.Steps > 0 {
		if r.Total > 0 {
			fmt.Fprintf(&b, " · step %d/%d", r.Steps, r.Total)
		} else {
			fmt.Fprintf(&b, " · %d steps", r.Steps)
		}
	}
	if len(r.Params) > 0 {
		b.WriteString("\nparams " + ParamsText(r.Params))
	}
	if len(last) > 0 {
		b.WriteString("\n" + metricsText(mapMetrics(last), 6))
	}
	if r.Detail != "" && r.Outcome != trainer.OutcomeRunning {
		b.WriteString("\n" + r.Detail)
	}
	return b.String()
}

// RunLine is one line of the history: "✅ #12 demo finished 30s 1500 steps loss 0.0172".
//
// The start is shown in now's time zone: "12-01 09:30" (with the year when
// it is not now's).
func RunLine(r *trainer.Run, last map[string]float64, now time.Time) string {
	s := fmt.Sprintf("%s #%d %s %s %s · %s", OutcomeIcon(r.Outcome), r.ID, r.Job, r.Outcome, FormatDuration(r.Duration(now)), StartedText(r.StartedAt, now))
	if r.Steps > 0 {
		s += fmt.Sprintf(" · %d steps", r.Steps)
	}
	if m, ok := (trainer.Status{Last: mapMetrics(last)}).Loss(); ok {
		s += fmt.Sprintf(" · %s %s", m.Name, FormatValue(m.Value))
	}
	if r.PeakGPUMem != nil {
		s += " · peak GPU " + FormatBytes(*r.PeakGPUMem)
	} else if r.PeakHostMem != nil {
		s += " · peak host " + FormatBytes(*r.PeakHostMem)
	}
	if r.RetryOf != 0 {
		s += fmt.Sprintf(" · retry of #%d", r.RetryOf)
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
func JobsText(jobs []*trainer.Job) string {
	if len(jobs) == 0 {
		return "No jobs are configured: add a [[jobs]] section to the config file."
	}
	var b strings.Builder
	b.WriteString("Jobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&b, "• %s", j.Name)
		if j.Description != "" {
			b.WriteString(" — " + j.Description)
		}
		b.WriteString("\n")
		for _, name := range j.ParamNames() {
			spec := j.Params[name]
			fmt.Fprintf(&b, "    %s: %s", name, spec.Describe())
			if spec.Help != "" {
				b.WriteString(" — " + spec.Help)
			}
			b.WriteString("\n")
		}
	}
	if len(jobs) == 1 {
		fmt.Fprintf(&b, "Start it with: 开始 [name=value …]")
	} else {
		fmt.Fprintf(&b, "Start one with: 开始 %s [name=value …]", jobs[0].Name)
	}
	return b.String()
}

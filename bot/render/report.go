package render

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// MetricGoal says whether lower (-1) or higher (+1) values of a metric are
// better, or neither (0): losses and errors go down, accuracies go up.
func MetricGoal(name string) int {
	if trainer.IsLossName(name) {
		return -1
	}
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		switch w {
		case "ppl", "perplexity", "error", "err", "wer", "cer", "mae", "mse", "rmse", "fid", "nll":
			return -1
		case "f1", "auc", "auroc", "precision", "recall", "map", "bleu", "iou", "miou", "dice", "top1", "top5", "reward", "score":
			return 1
		}
		if strings.HasPrefix(w, "acc") || strings.HasPrefix(w, "rouge") || strings.HasPrefix(w, "map5") {
			return 1
		}
	}
	return 0
}

// BestText is "best val_loss 0.0498 (step 1200) · val_acc 0.9912 (step
// 1300)": the best value of up to n metrics with a goal, losses first.
func BestText(l i18n.Lang, ext map[string]history.Extremes, n int) string {
	var names []string
	for name := range ext {
		if MetricGoal(name) != 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if ga, gb := MetricGoal(a), MetricGoal(b); ga != gb {
			return ga - gb // losses (-1) first
		}
		return strings.Compare(a, b)
	})
	if len(names) > n {
		names = names[:n]
	}
	parts := make([]string, len(names))
	for i, name := range names {
		x := ext[name]
		v, step := x.Min, x.MinStep
		if MetricGoal(name) > 0 {
			v, step = x.Max, x.MaxStep
		}
		parts[i] = l.T(i18n.BestAt, name, FormatMetric(name, v), step)
	}
	if len(parts) == 0 {
		return ""
	}
	return l.T(i18n.Best, strings.Join(parts, " · "))
}

// EndReport describes how a run ended: outcome, duration, steps, final
// metrics, best (BestText, "" for none), peak memory, the detail, and what
// on_oom did; advise adds what to try after running out of memory, when
// the report is the first to say it.
func EndReport(l i18n.Lang, e trainer.Event, best string, advise bool) string {
	r := e.Run
	var b strings.Builder
	verb := OutcomeWord(l, r.Outcome)
	switch r.Outcome {
	case trainer.OutcomeOOM:
		o := e.OOM
		if r.End != nil && r.End.OOM != nil {
			o = r.End.OOM
		}
		verb = l.T(oomMsg(o, i18n.EndVerbOOM, i18n.EndVerbOOMGPU, i18n.EndVerbOOMHost))
	case trainer.OutcomeNaN:
		verb = l.T(i18n.EndVerbNaN)
	case trainer.OutcomeStopped:
		verb = l.T(i18n.EndVerbStopped)
		if r.StoppedBy != "" {
			verb = l.T(i18n.EndVerbStopBy, r.StoppedBy)
		}
	}
	b.WriteString(l.T(i18n.EndHead, OutcomeIcon(r.Outcome), r.ID, r.Job, verb, l.Duration(r.Duration(e.At))))
	if r.Steps > 0 {
		if r.Total > 0 {
			b.WriteString(l.T(i18n.EndStepOf, r.Steps, r.Total))
		} else {
			b.WriteString(l.T(i18n.EndSteps, r.Steps))
		}
	}
	if e.Status != nil && len(e.Status.Last) > 0 {
		b.WriteString("\n" + metricsText(e.Status.Last, 6))
	}
	if best != "" {
		b.WriteString("\n" + best)
	}
	var mem []string
	if r.PeakGPUMem != nil {
		mem = append(mem, l.T(i18n.PeakGPUMemory, FormatBytes(*r.PeakGPUMem)))
	}
	if r.PeakHostMem != nil {
		mem = append(mem, l.T(i18n.PeakHostMemory, FormatBytes(*r.PeakHostMem)))
	}
	if len(mem) > 0 {
		b.WriteString("\n" + strings.Join(mem, " · "))
	}
	if r.Outcome != trainer.OutcomeFinished && r.Outcome != trainer.OutcomeStopped && r.Detail != "" {
		b.WriteString("\n" + EndDetail(l, r))
	}
	if line, _ := RetryText(l, e); line != "" {
		b.WriteString("\n" + line)
	}
	if line := ResumeText(l, e); line != "" {
		b.WriteString("\n" + line)
	}
	if advise && r.Outcome == trainer.OutcomeOOM {
		if adv := OOMAdvice(l, e.OOM, r, e.Job, e.Fit); len(adv) > 0 {
			b.WriteString(l.T(i18n.WhatToTry, strings.Join(adv, "\n• ")))
		}
	}
	return b.String()
}

// ResumeText is the line about on_failure in the report of an ended run:
// the resume that follows (from which checkpoint, when), why none does, or
// which resume of which run this one was.
func ResumeText(l i18n.Lang, e trainer.Event) string {
	r, rs := e.Run, e.Resume
	if rs == nil {
		return ""
	}
	after := l.Duration(rs.After)
	var line string
	switch {
	case rs.Next && rs.Checkpoint != "":
		line = l.T(i18n.ResumeNext, rs.Class, filepath.Base(rs.Checkpoint), after, rs.Attempt+1, rs.Limit)
	case rs.Next:
		line = l.T(i18n.ResumeOver, rs.Class, after, rs.Attempt+1, rs.Limit)
	case rs.Refused != "":
		line = l.T(i18n.ResumeRefused, rs.Refused)
	}
	if rs.Attempt > 0 && r.ResumedFrom != 0 {
		of := l.T(i18n.ResumeOf, rs.Attempt, rs.Limit, r.ResumedFrom)
		if line == "" {
			return of
		}
		return of + "\n" + line
	}
	return line
}

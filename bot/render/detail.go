package render

import (
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// EndDetail is how a run ended, in l: the recorded detail (the
// supervisor's English) for English and zh+en, and for Chinese the end's
// facts worded in Chinese; a run without facts (its owner decided, or it
// was recorded before them) shows its detail as recorded. The program's
// stderr, an OOM's summary and the end's notes stay as they were written.
func EndDetail(l i18n.Lang, r *trainer.Run) string {
	f := r.End
	if l != i18n.Zh || f == nil {
		return r.Detail
	}
	stderr := func(d string) string {
		if tail := strings.Join(f.StderrTail, "\n"); tail != "" {
			d += l.T(i18n.DetailStderr) + tail
		}
		return d
	}
	nan := func() string {
		n := f.NaN
		return l.T(i18n.NaNStreak, n.Metric, fmt.Sprint(n.Value), n.Count, n.Step)
	}
	recovered := ""
	if f.NaN != nil && f.Why != trainer.WhyNaN && f.Why != trainer.WhyStoppedNaN {
		recovered = l.T(i18n.DetailSep) + nan() + l.T(i18n.DetailRecovered)
	}
	exit := func() int {
		if f.ExitCode == nil {
			return -1
		}
		return *f.ExitCode
	}
	var d string
	switch f.Why {
	case trainer.WhyNoStart:
		d = l.T(i18n.DetailNoStart, f.StartError)
	case trainer.WhyStoppedNaN:
		if f.NaN == nil {
			return r.Detail
		}
		d = nan() + l.T(i18n.DetailStoppedNaN)
	case trainer.WhyStopped:
		d = l.T(i18n.DetailStoppedBy, f.StoppedBy)
		switch f.StopHow {
		case trainer.StopKilledNow:
			d += l.T(i18n.DetailKilledNow)
		case trainer.StopKilledGrace:
			d += l.T(i18n.DetailKilledGrace)
		case trainer.StopSignal:
			d += l.T(i18n.DetailEndedBy, trainer.SignalName(f.Signal))
		default:
			d += l.T(i18n.DetailExitIn, exit())
		}
	case trainer.WhyStrayKill:
		d = stderr(l.T(i18n.DetailStrayKill))
	case trainer.WhyNaN:
		d = nan()
	case trainer.WhySignal:
		d = stderr(l.T(i18n.DetailKilledBy, trainer.SignalName(f.Signal)) + recovered)
	case trainer.WhyExit:
		d = l.T(i18n.DetailExit, fmt.Sprint(exit())) + recovered
		if exit() != 0 {
			d = stderr(d)
		}
	default: // WhyOOM, WhyOOMKill: the OOM's own summary, as recorded
		return r.Detail
	}
	if len(f.Notes) > 0 {
		d += l.T(i18n.DetailSep) + strings.Join(f.Notes, "; ")
	}
	return d
}

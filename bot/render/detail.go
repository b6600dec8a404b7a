package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// EndDetail is how a run ended, in l: the recorded detail (the
// supervisor's English) for English and zh+en, and for Chinese the end's
// facts worded in Chinese; a run without facts (recorded before them)
// shows its detail as recorded. The program's stderr, an error line of a
// watched log, what Slurm's commands answered, a start's error, what the
// run's supervisor said of dropped output and the notes of runs recorded
// before notes were facts stay as they were written.
func EndDetail(l i18n.Lang, r *trainer.Run) string {
	if l != i18n.Zh || r.End == nil {
		return r.Detail
	}
	if d, ok := endWords(l, r, r.End); ok {
		return d
	}
	return r.Detail
}

// endWords words an end's facts in l, with l's messages: in English they
// are the supervisor's own words (trainer.EndFacts.English), which the
// tests hold. ok is false for facts of a kind this trainbot does not know
// (a newer one recorded them).
func endWords(l i18n.Lang, r *trainer.Run, f *trainer.EndFacts) (d string, ok bool) {
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
	// The signal's name (the English adds what it means: "SIGSEGV
	// (segmentation fault)").
	signal := trainer.SignalWords
	if l == i18n.Zh {
		signal = trainer.SignalName
	}
	exit := func() int {
		if f.ExitCode == nil {
			return -1
		}
		return *f.ExitCode
	}
	peak := func(d string) string {
		if f.Peak != "" {
			if p := peakWords(l, r); p != "" {
				d += l.T(i18n.DetailSep) + p
			}
		}
		return d
	}
	switch f.Why {
	case trainer.WhyNoStart:
		why := f.StartError
		if f.RunDirTaken != "" {
			why = l.T(i18n.DetailRunDirTaken, f.RunDirTaken)
		}
		d = l.T(i18n.DetailNoStart, why)
	case trainer.WhyStoppedNaN:
		if f.NaN == nil { // asked by a trainbot before a restart: this one saw no streak
			d = l.T(i18n.DetailStoppedForNaN, f.StoppedBy)
			break
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
			d += l.T(i18n.DetailEndedBy, signal(f.Signal))
		case trainer.StopSlurmCancel:
			d += l.T(i18n.DetailSlurmCancelled)
		case trainer.StopSignalled:
			d += l.T(i18n.DetailSignalled, f.PID)
		default:
			d += l.T(i18n.DetailExitIn, exit())
		}
	case trainer.WhyOOM:
		d = peak(OOMSummary(l, f.OOM))
		if f.ThenStoppedBy != "" {
			d += l.T(i18n.DetailThenStopped, f.ThenStoppedBy)
		}
	case trainer.WhyOOMKill:
		if f.OOMKills > 0 && f.OOM != nil {
			d = OOMSummary(l, f.OOM) + l.T(i18n.DetailOOMKills, f.OOMKills)
		} else {
			d = l.T(i18n.DetailOOMKillLikely)
		}
		d = peak(d)
	case trainer.WhyStrayKill:
		d = stderr(l.T(i18n.DetailStrayKill))
	case trainer.WhyNaN:
		d = nan()
	case trainer.WhySignal:
		d = stderr(l.T(i18n.DetailKilledBy, signal(f.Signal)) + recovered)
	case trainer.WhyExit:
		d = l.T(i18n.DetailExit, fmt.Sprint(exit())) + recovered
		if exit() != 0 {
			d = stderr(d)
		}
	case trainer.WhySlurm:
		d = slurmWords(l, f)
	case trainer.WhyHostReboot:
		if f.Reboot == nil {
			return "", false
		}
		d = l.T(i18n.DetailHostReboot, shortID(f.Reboot.BootIDAtStart), shortID(f.Reboot.BootIDNow))
		if !f.Reboot.BootedAt.IsZero() {
			d += l.T(i18n.DetailBootedAt, f.Reboot.BootedAt.Local().Format("2006-01-02 15:04:05"))
		}
	case trainer.WhyInterrupted:
		if d, ok = interruptedWords(l, f); !ok {
			return "", false
		}
	case trainer.WhyUnwatched:
		d = l.T(i18n.DetailUnwatched, f.StoppedBy)
		if f.GoesOn {
			d += l.T(i18n.DetailGoesOn, f.PID)
		}
	case trainer.WhyWatchExit:
		switch {
		case f.OOM != nil:
			d = l.T(i18n.DetailWatchOOM, f.PID, OOMSummary(l, f.OOM))
		case f.ErrorLine != "":
			d = l.T(i18n.DetailWatchError, f.PID, f.ErrorLine)
		default:
			d = l.T(i18n.DetailWatchExit, f.PID)
		}
	default:
		return "", false
	}
	if notes := append(noteWords(l, &f.EndNotes), f.Notes...); len(notes) > 0 {
		d += l.T(i18n.DetailSep) + strings.Join(notes, l.T(i18n.DetailSep))
	}
	return d, true
}

// noteWords are an end's remarks in l; what the run's supervisor said of
// dropped output stays as it said it.
func noteWords(l i18n.Lang, n *trainer.EndNotes) []string {
	var out []string
	if d := n.Dropped; d != nil {
		reason := d.Reason
		if reason == "" {
			reason = l.T(i18n.DetailSlowDisk)
		}
		out = append(out, l.T(i18n.DetailDropped, FormatBytes(d.Bytes), reason))
	}
	if c := n.LogCut; c != nil {
		out = append(out, l.T(i18n.DetailLogCut, FormatBytes(c.MaxLogBytes), FormatBytes(c.To-c.From), FormatBytes(c.From)))
	}
	if n.Survivors > 0 {
		out = append(out, l.T(i18n.DetailSurvivors, n.Survivors))
	}
	for _, u := range n.UnseenRules {
		what := i18n.DetailNeverPrinted
		switch u.Metric {
		case trainer.MetricStepsPerSec:
			what = i18n.DetailNotMeasured
		case trainer.MetricGPUUtil:
			what = i18n.DetailNoNVML
		}
		out = append(out, l.T(i18n.DetailUnseenRule, u.Rule, u.Metric, l.T(what)))
	}
	if n.MetricNamesMax > 0 {
		where := i18n.DetailLogHasThem
		if n.LogCut != nil {
			where = i18n.DetailLogHasUncut
		}
		out = append(out, l.T(i18n.DetailMetricNames, n.MetricNamesMax, l.T(where)))
	}
	return out
}

// StartFailure is why a run could not start, in l: from its facts where
// they tell more than the error (its directory was taken), else the
// error as it is.
func StartFailure(l i18n.Lang, e *trainer.StartError) string {
	if f := e.Run.End; f != nil && f.RunDirTaken != "" {
		return l.T(i18n.DetailRunDirTaken, f.RunDirTaken)
	}
	return e.Err.Error()
}

// slurmWords is what Slurm's state says of a job's end, in l.
func slurmWords(l i18n.Lang, f *trainer.EndFacts) string {
	s := f.Slurm
	if s == nil {
		s = &trainer.SlurmEnd{}
	}
	on := ""
	if s.Node != "" {
		on = l.T(i18n.DetailSlurmOn, s.Node)
	}
	switch s.State {
	case "CANCELLED":
		return l.T(i18n.DetailSlurmOutside)
	case "FAILED":
		if f.Signal != 0 {
			return l.T(i18n.DetailSlurmSignal, f.Signal, on)
		}
		code := -1
		if f.ExitCode != nil {
			code = *f.ExitCode
		}
		return l.T(i18n.DetailSlurmExit, code, on)
	case "NODE_FAIL":
		return l.T(i18n.DetailSlurmNodeFail, on)
	case "TIMEOUT":
		limit := s.TimeLimit
		if limit == "" {
			limit = "?"
		}
		return l.T(i18n.DetailSlurmTimeout, limit)
	case "OUT_OF_MEMORY":
		return l.T(i18n.DetailSlurmOOM, on)
	case "PREEMPTED":
		return l.T(i18n.DetailSlurmPreempted, on)
	}
	return l.T(i18n.DetailSlurmState, s.State) // PREEMPTED, BOOT_FAIL, DEADLINE
}

// interruptedWords is why an interrupted run's end is not known, in l.
func interruptedWords(l i18n.Lang, f *trainer.EndFacts) (string, bool) {
	switch f.Interrupted {
	case trainer.InterruptSupervisorGone:
		d := l.T(i18n.DetailSupervisorGone, f.SupervisorPID)
		if o := f.Orphans; o != nil {
			d += l.T(i18n.DetailOrphansLived, o.PGID, endTime(l, o.Until))
			if o.StoppedBy != "" {
				d += l.T(i18n.DetailOrphansStopped, o.StoppedBy, trainer.SignalText(o.Signal))
			}
		}
		return d, true
	case trainer.InterruptTrainbotGone:
		d := l.T(i18n.DetailTrainbotGone, f.SupervisorPID)
		if f.LogWritten != nil {
			d += l.T(i18n.DetailLogWritten, endTime(l, *f.LogWritten))
		}
		if f.AlivePGID > 0 {
			d += l.T(i18n.DetailStillAlive, f.AlivePGID)
		}
		return d, true
	case trainer.InterruptSlurmForgot:
		var id, why string
		if s := f.Slurm; s != nil {
			id = s.JobID
			if s.Error != "" {
				why = l.T(i18n.DetailParen, s.Error)
			}
		}
		return l.T(i18n.DetailSlurmForgot, id, why), true
	case trainer.InterruptWatchEnded:
		return l.T(i18n.DetailWatchEnded), true
	}
	return "", false
}

// endTime is a time of an end's facts: RFC 3339 in the supervisor's
// English, date and time in Chinese, in the zone it was recorded in.
func endTime(l i18n.Lang, t time.Time) string {
	return t.Format(l.Pick("2006-01-02 15:04:05", time.RFC3339))
}

// peakWords is the peak memory of a run in l: "peak GPU memory 14.2 GiB,
// peak host memory 3.1 GiB (VmHWM of its process, exact)" (trainer's
// words at the end).
func peakWords(l i18n.Lang, r *trainer.Run) string {
	var parts []string
	if r.PeakGPUMem != nil {
		parts = append(parts, l.T(i18n.PeakGPUMemory, FormatBytes(*r.PeakGPUMem)))
	}
	if r.PeakHostMem != nil {
		s := l.T(i18n.PeakHostMemory, FormatBytes(*r.PeakHostMem))
		if r.PeakHostHow != history.PeakSampled {
			s += l.T(i18n.DetailParen, PeakHowText(l, r.PeakHostHow))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, l.T(i18n.DetailListSep))
}

// PeakHowText says how a peak of host memory was measured, in l
// (trainer.PeakHostNote's words in English).
func PeakHowText(l i18n.Lang, how string) string {
	switch how {
	case history.PeakMain:
		return l.T(i18n.PeakHowMain)
	case history.PeakTreeSum:
		return l.T(i18n.PeakHowTreeSum)
	case history.PeakCgroup:
		return l.T(i18n.PeakHowCgroup)
	}
	return l.T(i18n.PeakHowSampled)
}

// shortID is the first 8 characters of a boot id.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

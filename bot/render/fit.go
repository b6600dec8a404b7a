package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// FitData is what a memory fit reads from the history: the job's runs, and
// their memory samples for the capacity of the GPUs they used.
type FitData interface {
	trainer.JobHistory
	// RunMemorySeries returns a run's memory samples in time order.
	RunMemorySeries(ctx context.Context, runID int64) ([]history.RunMemory, error)
}

// FitOptions choose what 适配 and `trainbot fit` fit.
type FitOptions struct {
	// Job is the job's configuration (its parameters' ranges); nil for a
	// job that is no longer configured.
	Job *trainer.Job
	// Name is the job's name.
	Name string
	// Param is the parameter; "" for the job's batch parameter.
	Param string
	// Limit is the memory to stay under in bytes; 0 for the device's: the
	// NVML total of the GPUs the job's runs used, or HostAvailable for a
	// job whose runs used no GPU.
	Limit int64
	// HostAvailable returns the host's available memory (MemAvailable).
	HostAvailable func() int64
}

// Limit sources, as FitText names them.
const (
	limitGiven = "given"
	limitGPU   = "NVML total of the GPU the job used"
	limitHost  = "host MemAvailable now"
)

// FitProblemText says why a fit has no answer in l: trainer's English
// (Problem) unless l is Chinese and the reason is one it words.
func FitProblemText(l i18n.Lang, f *trainer.MemoryFit) string {
	if l != i18n.Zh {
		return f.Problem
	}
	switch f.Why {
	case trainer.FitNoParam:
		return l.T(i18n.FitWhyNoParam)
	case trainer.FitTooFew:
		return l.T(i18n.FitWhyTooFew, f.Job, f.Param, f.Distinct)
	case trainer.FitPoorLine:
		return l.T(i18n.FitWhyPoor, f.R2, trainer.MinFitR2, f.Param)
	case trainer.FitNoGrowth:
		return l.T(i18n.FitWhyNoGrowth, f.Param)
	case trainer.FitNoLimit:
		return l.T(i18n.FitWhyNoLimit)
	case trainer.FitTooFar:
		return l.T(i18n.FitWhyTooFar, f.Param, trimFloat(f.Least), trimFloat(trainer.MaxExtrapolation), trimFloat(f.Largest))
	case trainer.FitNothingFit:
		return l.T(i18n.FitWhyNothing, f.Param, trimFloat(f.Least), FormatBytes(f.Predict(f.Least)),
			FormatBytes(int64((1-trainer.FitMargin)*float64(f.Limit))), FormatBytes(f.Limit))
	}
	return f.Problem
}

// limitSourceText words where a fit's limit came from in l (the CLI
// prints the source as it is).
func limitSourceText(l i18n.Lang, source string) string {
	m, ok := map[string]i18n.Msg{limitGiven: i18n.FitLimitGiven, limitGPU: i18n.FitLimitGPU, limitHost: i18n.FitLimitHost}[source]
	if !ok || l != i18n.Zh {
		return source
	}
	return l.T(m)
}

// MemoryFit fits the peak memory of a job's runs against a parameter and
// finds the largest value that fits (trainer.FitMemory) under the limit o
// gives or, without one, the device's. It also says where the limit came
// from.
func MemoryFit(ctx context.Context, data FitData, o FitOptions) (trainer.MemoryFit, string, error) {
	runs, err := data.JobRuns(ctx, o.Name)
	if err != nil {
		return trainer.MemoryFit{}, "", fmt.Errorf("read the runs of %s: %w", o.Name, err)
	}
	param := o.Param
	if param == "" {
		param = trainer.BatchParam(o.Job)
	}
	if param == "" && o.Job == nil {
		param = batchParamOfRuns(runs)
	}
	f := trainer.FitMemory(runs, o.Job, o.Name, param, nil, 0)
	limit, source := o.Limit, limitGiven
	switch {
	case limit > 0:
	case f.GPU:
		source = limitGPU
		for _, id := range f.Runs {
			mem, err := data.RunMemorySeries(ctx, id)
			if err != nil {
				return trainer.MemoryFit{}, "", fmt.Errorf("read memory of run %d: %w", id, err)
			}
			for _, m := range mem {
				if m.GPUTotal != nil {
					limit = max(limit, *m.GPUTotal)
				}
			}
		}
	case o.HostAvailable != nil:
		limit, source = o.HostAvailable(), limitHost
	}
	return trainer.FitMemory(runs, o.Job, o.Name, param, nil, limit), source, nil
}

// batchParamOfRuns is the first of batch_size, bs, batch that a run has.
func batchParamOfRuns(runs []*trainer.Run) string {
	for _, c := range []string{"batch_size", "bs", "batch"} {
		for _, r := range runs {
			if _, ok := r.Params[c]; ok {
				return c
			}
		}
	}
	return ""
}

// FitText is the answer of 适配 and `trainbot fit`: the line, how good it
// is, the runs it went through, and the largest value that fits or why
// there is none.
func FitText(l i18n.Lang, f trainer.MemoryFit, limitSource string) string {
	var b strings.Builder
	what := l.T(i18n.FitHost)
	if f.GPU {
		what = l.T(i18n.FitGPU)
	}
	b.WriteString(l.T(i18n.FitHead, f.Job, what, orDash(f.Param)))
	if len(f.Same) > 0 {
		var same []string
		for _, k := range sortedKeys(f.Same) {
			same = append(same, k+"="+f.Same[k])
		}
		b.WriteString(l.T(i18n.FitSame, strings.Join(same, " ")))
	}
	b.WriteString("\n")
	for i, id := range f.Runs {
		b.WriteString(l.T(i18n.FitRun, id, f.Param, trimFloat(f.Values[i]), FormatBytes(f.Peaks[i])))
	}
	if len(f.OOMRuns) > 0 {
		ids := make([]string, len(f.OOMRuns))
		for i, id := range f.OOMRuns {
			ids[i] = fmt.Sprintf("#%d", id)
		}
		b.WriteString(l.T(i18n.FitOOM, strings.Join(ids, " "), f.Param, trimFloat(f.OOMAt)))
	}
	if len(f.Runs) >= 2 && f.R2 > 0 {
		b.WriteString(l.T(i18n.FitLine, FormatBytes(int64(f.A)), FormatBytes(int64(f.B)), f.Param, f.R2, len(f.Runs)))
	}
	if f.Limit > 0 {
		b.WriteString(l.T(i18n.FitLimit, FormatBytes(f.Limit), limitSourceText(l, limitSource), trainer.FitMargin*100,
			FormatBytes(int64((1-trainer.FitMargin)*float64(f.Limit)))))
	}
	if f.OK() {
		b.WriteString(fitReach(l, &f))
		b.WriteString("✅ " + FitAdvice(l, &f))
	} else {
		b.WriteString(l.T(i18n.FitNoAnswer, FitProblemText(l, &f)))
	}
	return b.String()
}

// FitAdvice is what a memory fit advises, in l: in English
// trainer.MemoryFit.Advice, word for word; "" when it has no answer.
func FitAdvice(l i18n.Lang, f *trainer.MemoryFit) string {
	if l != i18n.Zh || !f.OK() {
		return f.Advice()
	}
	ids := make([]string, len(f.Runs))
	for i, id := range f.Runs {
		ids[i] = fmt.Sprintf("#%d", id)
	}
	return l.T(i18n.FitAdvice, f.Param, f.MaxFit, trainer.ShortBytes(f.Predict(float64(f.MaxFit))), trainer.ShortBytes(f.Limit), strings.Join(ids, " "))
}

// fitReach says how far past the values tried the answer goes and what
// held it below what the line alone says.
func fitReach(l i18n.Lang, f *trainer.MemoryFit) string {
	var b strings.Builder
	largest := trimFloat(f.Largest)
	if x := f.Extrapolation(); x > 1 {
		b.WriteString(l.T(i18n.FitExtrap, trimFloat(roundSig(x, 3)), f.Param, largest, trimFloat(trainer.MaxExtrapolation)))
	} else {
		b.WriteString(l.T(i18n.FitWithin, f.Param, largest))
	}
	switch f.CappedBy {
	case trainer.FitCapExtrapolation:
		b.WriteString(l.T(i18n.FitCapExtrap, f.Param, f.LineFit, trimFloat(trainer.MaxExtrapolation)))
	case trainer.FitCapMax:
		b.WriteString(l.T(i18n.FitCapMax, f.Param, f.LineFit, trimFloat(*f.Max)))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

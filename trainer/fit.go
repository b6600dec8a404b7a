package trainer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/internal/units"
)

// Which batch size fits: a least-squares line through the peak memory of a
// job's past runs against one numeric parameter, and the largest value
// whose predicted peak stays under the device's memory with a margin. The
// chat's 适配, `trainbot fit`, the OOM advice and on_oom all use FitMemory,
// so they never disagree.

// Fit thresholds.
const (
	// MinFitR2 is the least R² of a fit worth an answer.
	MinFitR2 = 0.9
	// FitMargin is the share of the device's memory kept free: a value
	// fits when its predicted peak is at most (1 − FitMargin) of the limit.
	FitMargin = 0.10
	// MaxExtrapolation is how far past the largest value tried a fit
	// answers: at most this many times it. Peaks measured at 64…1024 say
	// little about 200 000 (activations stop being the part that grows,
	// allocators round, a kernel picks another algorithm): one doubling
	// past the data is what a line can vouch for.
	MaxExtrapolation = 2.0
)

// FitCap is what held a fit's answer below what the line alone puts
// under the limit.
type FitCap string

// The caps, as FitText and `trainbot fit --json` name them.
const (
	FitCapNone          FitCap = ""
	FitCapMax           FitCap = "max"           // the parameter's declared max
	FitCapExtrapolation FitCap = "extrapolation" // MaxExtrapolation × the largest value tried
	FitCapOOM           FitCap = "oom"           // below a value that ran out of memory
)

// MemoryFit is peak memory = A + B·value over a job's runs.
type MemoryFit struct {
	Job, Param string
	// GPU says the peaks are GPU memory (NVML); else host memory.
	GPU bool
	// A is the intercept in bytes, B the bytes per unit of Param.
	A, B float64
	R2   float64
	// Same are the other parameters, the same in every run of the fit
	// ("ckpt" → "0"): runs with other values measure something else.
	Same map[string]string
	// Runs are the runs the line goes through (finished runs with a peak
	// and a numeric Param), oldest first; Values and Peaks theirs.
	Runs   []int64
	Values []float64
	Peaks  []int64
	// OOMAt is the smallest value of Param at which a run ran out of
	// memory (0: none): nothing at or above it is said to fit.
	OOMAt float64
	// OOMRuns are those runs.
	OOMRuns []int64
	// Limit is the memory the peak must stay under (bytes; 0 unknown):
	// the device's total, or the host's available memory.
	Limit int64
	// MaxFit is the largest value of Param whose predicted peak is at
	// most (1 − FitMargin)·Limit, and at most the parameter's Max,
	// MaxExtrapolation × Largest and below OOMAt; 0 when there is none or
	// no answer.
	MaxFit int64
	// Largest is the largest value of Param among Runs; LineFit the
	// largest value the line alone puts under the limit; CappedBy what
	// held MaxFit below LineFit (FitCapNone: nothing).
	Largest  float64
	LineFit  int64
	CappedBy FitCap
	// Max is the parameter's declared max: the job's, else as recorded
	// with the newest run of the fit (so it holds without the config);
	// nil when neither says.
	Max *float64
	// Problem says why there is no answer ("" when there is one): too few
	// runs, a poor fit, no limit.
	Problem string
	// Why is Problem as a fact, for texts in other languages ("" with no
	// problem); Distinct is how many values the runs tried (FitTooFew).
	Why      FitWhy
	Distinct int
	// Least is the least value the parameter allows (FitTooFar,
	// FitNothingFit).
	Least float64
}

// FitWhy is why a fit has no answer.
type FitWhy string

// The reasons a fit has no answer.
const (
	FitNoParam    FitWhy = "no_param"     // the job has no batch parameter
	FitTooFew     FitWhy = "too_few"      // fewer than 2 values tried
	FitPoorLine   FitWhy = "poor_fit"     // R² below MinFitR2
	FitNoGrowth   FitWhy = "no_growth"    // the peak does not grow with the parameter
	FitNoLimit    FitWhy = "no_limit"     // the memory limit is not known
	FitNothingFit FitWhy = "nothing_fits" // even the smallest value is predicted not to fit
	FitTooFar     FitWhy = "too_far"      // the least value allowed is past MaxExtrapolation
)

// OK reports whether the fit answers: a line good enough, a limit, and a
// value that fits.
func (f *MemoryFit) OK() bool { return f != nil && f.Problem == "" && f.MaxFit > 0 }

// Extrapolation is how many times the largest value tried MaxFit is
// (1.5: half again past the data; at most 1 within it); 0 without an
// answer.
func (f *MemoryFit) Extrapolation() float64 {
	if !f.OK() || f.Largest <= 0 {
		return 0
	}
	return float64(f.MaxFit) / f.Largest
}

// Predict is the predicted peak, in bytes, at a value of the parameter.
func (f *MemoryFit) Predict(v float64) int64 { return int64(math.Round(f.A + f.B*v)) }

// BatchParam is the parameter a memory fit and the OOM advice are about by
// default: the one on_oom halves, else an int parameter named batch_size,
// bs or batch; "" when the job has none.
func BatchParam(job *Job) string {
	if job == nil {
		return ""
	}
	var cands []string
	if job.OnOOM != nil {
		cands = append(cands, job.OnOOM.Halve)
	}
	for _, c := range append(cands, "batch_size", "bs", "batch") {
		if spec, ok := job.Params[c]; ok && spec.Type == ParamInt {
			return c
		}
	}
	return ""
}

// FitMemory fits peak memory against param over a job's runs (any order;
// those of other jobs are left out). Only runs whose other parameters are
// the same count: those of like (the run an out-of-memory advice is
// about), or, when like is nil, the set of other parameters with the most
// values of param (the newest on a tie). Finished runs with a peak and a
// numeric value of param make the line; runs that ran out of memory cap
// the answer below their value (their peak is where they crashed, not what
// they needed, so it would bend the line); runs that failed, were stopped
// or are still running are left out. GPU peaks are used when a run of the
// job has one, else host peaks. limit is the memory to stay under (0:
// unknown, then MaxFit is 0 and Problem says so); job may be nil (then the
// parameter's min and max are not known).
func FitMemory(runs []*Run, job *Job, jobName, param string, like *Run, limit int64) MemoryFit {
	f := MemoryFit{Job: jobName, Param: param, Limit: limit}
	if param == "" {
		f.Problem, f.Why = "the job has no batch parameter (batch_size, bs or batch): name the parameter to fit", FitNoParam
		return f
	}
	var all []*Run
	for _, r := range runs {
		if r.Job == jobName {
			all = append(all, r)
		}
	}
	key := func(r *Run) string { return otherParams(r.Params, param) }
	want := ""
	if like != nil {
		want = key(like)
	} else {
		values := map[string]map[string]bool{}
		newest := map[string]int64{}
		for _, r := range all {
			k := key(r)
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			if r.Outcome == OutcomeFinished {
				values[k][r.Params[param]] = true
			}
			newest[k] = max(newest[k], r.ID)
		}
		best := -1
		for k, v := range values {
			if len(v) > best || (len(v) == best && newest[k] > newest[want]) {
				want, best = k, len(v)
			}
		}
	}
	var mine []*Run
	for _, r := range all {
		if key(r) == want {
			mine = append(mine, r)
		}
	}
	if len(mine) > 0 {
		f.Same = map[string]string{}
		for k, v := range mine[0].Params {
			if k != param {
				f.Same[k] = v
			}
		}
	}
	slices.SortFunc(mine, func(a, b *Run) int { return int(a.ID - b.ID) })
	for _, r := range mine {
		if r.PeakGPUMem != nil && *r.PeakGPUMem > 0 {
			f.GPU = true
		}
	}
	distinct := map[float64]bool{}
	for _, r := range mine {
		v, err := strconv.ParseFloat(r.Params[param], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		switch r.Outcome {
		case OutcomeOOM:
			if f.OOMAt == 0 || v < f.OOMAt {
				f.OOMAt = v
			}
			f.OOMRuns = append(f.OOMRuns, r.ID)
			continue
		case OutcomeFinished:
		default:
			continue
		}
		peak := r.PeakHostMem
		if f.GPU {
			peak = r.PeakGPUMem
		}
		if peak == nil || *peak <= 0 {
			continue
		}
		f.Runs = append(f.Runs, r.ID)
		f.Values = append(f.Values, v)
		f.Peaks = append(f.Peaks, *peak)
		f.Largest = max(f.Largest, v)
		distinct[v] = true
	}
	if len(distinct) < 2 {
		f.Problem = fmt.Sprintf("too few runs: a fit needs finished runs of %s at 2 or more values of %s with a recorded peak (and the same other parameters); there %s %d %s",
			jobName, param, isAre(len(distinct)), len(distinct), plural(len(distinct), "value", "values"))
		f.Why, f.Distinct = FitTooFew, len(distinct)
		return f
	}
	f.A, f.B, f.R2 = leastSquares(f.Values, f.Peaks)
	switch {
	case f.R2 < MinFitR2:
		f.Problem = fmt.Sprintf("poor fit: R² %.3f is below %.1f, so the peak does not follow a line in %s (other parameters differ, or the peaks are noisy)", f.R2, MinFitR2, param)
		f.Why = FitPoorLine
		return f
	case f.B <= 0:
		f.Problem = fmt.Sprintf("the peak does not grow with %s (%s per unit), so %s does not decide what fits", param, units.Bytes(int64(f.B)), param)
		f.Why = FitNoGrowth
		return f
	case limit <= 0:
		f.Problem, f.Why = "the memory limit is not known", FitNoLimit
		return f
	}
	budget := (1 - FitMargin) * float64(limit)
	best := math.Floor((budget - f.A) / f.B)
	f.LineFit = int64(math.Min(best, math.MaxInt32))
	bounds := paramRange(job, param, mine)
	f.Max = bounds.Max
	capAt := func(v float64, why FitCap) {
		if v < best {
			best, f.CappedBy = v, why
		}
	}
	capAt(math.Floor(MaxExtrapolation*f.Largest), FitCapExtrapolation)
	if bounds.Max != nil {
		capAt(math.Floor(*bounds.Max), FitCapMax)
	}
	if f.OOMAt > 0 {
		capAt(math.Ceil(f.OOMAt)-1, FitCapOOM)
	}
	low := 1.0
	if bounds.Min != nil {
		low = math.Max(low, math.Ceil(*bounds.Min))
	}
	if best < low && f.CappedBy == FitCapExtrapolation && float64(f.LineFit) >= low {
		f.Problem = fmt.Sprintf("too far from the runs: the least %s allowed, %s, is more than %g× the largest value tried (%s)",
			param, units.TrimZeros(strconv.FormatFloat(low, 'f', -1, 64)), MaxExtrapolation, units.TrimZeros(strconv.FormatFloat(f.Largest, 'f', -1, 64)))
		f.Why, f.Least = FitTooFar, low
		return f
	}
	if best < low || best > math.MaxInt32 {
		if best < low {
			f.Problem = fmt.Sprintf("nothing fits: %s=%s is predicted to need %s, more than %s (90%% of %s)",
				param, units.TrimZeros(strconv.FormatFloat(low, 'f', -1, 64)), units.Bytes(f.Predict(low)), units.Bytes(int64(budget)), units.Bytes(limit))
			f.Why, f.Least = FitNothingFit, low
			return f
		}
		best = math.MaxInt32
	}
	f.MaxFit = int64(best)
	return f
}

// paramRange is the declared min and max of param: the job's when it
// declares one, else as recorded with the newest of runs that has them.
func paramRange(job *Job, param string, runs []*Run) ParamRange {
	if job != nil {
		if spec, ok := job.Params[param]; ok {
			return ParamRange{Min: spec.Min, Max: spec.Max}
		}
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if b, ok := runs[i].ParamRanges[param]; ok {
			return b
		}
	}
	return ParamRange{}
}

// otherParams is a run's parameters but param, as one comparable string.
func otherParams(params map[string]string, param string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != param {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + params[k] + "\x00")
	}
	return b.String()
}

// leastSquares fits y = a + b·x and returns R².
func leastSquares(xs []float64, ys []int64) (a, b, r2 float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += float64(ys[i])
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, float64(ys[i])-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	b = sxy / sxx
	a = my - b*mx
	r2 = 1.0
	if syy > 0 {
		r2 = sxy * sxy / (sxx * syy)
	}
	return a, b, r2
}

// Advice is the OOM alert's line naming the value that fits:
// "batch_size=48 should fit: predicted 21.3 GiB of 24 GiB, from runs #3 #4 #7".
func (f *MemoryFit) Advice() string {
	if !f.OK() {
		return ""
	}
	ids := make([]string, len(f.Runs))
	for i, id := range f.Runs {
		ids[i] = fmt.Sprintf("#%d", id)
	}
	return fmt.Sprintf("%s=%d should fit: predicted %s of %s, from runs %s",
		f.Param, f.MaxFit, ShortBytes(f.Predict(float64(f.MaxFit))), ShortBytes(f.Limit), strings.Join(ids, " "))
}

// ShortBytes is units.Bytes with one decimal and no trailing zeros: "21.3 GiB", "24 GiB".
func ShortBytes(n int64) string {
	s := units.Bytes(n)
	num, unit, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return s
	}
	return units.TrimZeros(strconv.FormatFloat(v, 'f', 1, 64)) + " " + unit
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

package render

import (
	"slices"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// RetryHalfLabel is the label (in zh+en) of the button that starts a run
// again with half the batch.
var RetryHalfLabel = i18n.ZhEn.Button(i18n.BtnRetryHalf)

// RetryFitLabel is the label (in zh+en) of the button that starts a run
// again with the batch the memory fit of the job's runs says fits.
var RetryFitLabel = i18n.ZhEn.Button(i18n.BtnRetryFit)

// maxButtonData is the most bytes of data a button may carry (Telegram's
// callback_data limit).
const maxButtonData = 64

// OOMAlertText is the alert sent the moment a run's output says it ran out
// of memory: what it tried and what was free, the peak before the crash,
// and what to try.
func OOMAlertText(l i18n.Lang, e trainer.Event) string {
	r, a := e.Run, e.Alert
	var b strings.Builder
	what := a.Text
	if l == i18n.Zh && a.OOM != nil {
		what = OOMSummary(l, a.OOM)
	}
	hit := i18n.OOMHit
	if a.OOM != nil && (a.OOM.Kind == "host" || a.OOM.Kind == "oom-killer") {
		hit = i18n.OOMHitHost // 显存 is a GPU's; a host OOM is 内存
	}
	b.WriteString(l.T(hit, r.ID, r.Job, what))
	if p := peakBeforeCrash(l, r); p != "" {
		b.WriteString(l.T(i18n.PeakBeforeCrash, p))
	}
	if adv := OOMAdvice(l, a.OOM, r, e.Job, e.Fit); len(adv) > 0 {
		b.WriteString(l.T(i18n.WhatToTry, strings.Join(adv, "\n• ")))
	}
	return b.String()
}

// OOMSummary says what an out-of-memory error was, in l: "CUDA out of
// memory on GPU 0: tried to allocate 2.00 GiB (…); 1.25 GiB free of 79.15
// GiB" (in English, trainer.OOM.Summary's words).
func OOMSummary(l i18n.Lang, o *trainer.OOM) string {
	var b strings.Builder
	switch o.Kind {
	case "cuda":
		b.WriteString(l.T(i18n.OOMKindCUDA))
	case "host":
		b.WriteString(l.T(i18n.OOMKindHost))
	case "tensorflow":
		b.WriteString(l.T(i18n.OOMKindTF))
	case "jax":
		b.WriteString(l.T(i18n.OOMKindXLA))
	case "cublas", "cudnn":
		b.WriteString(l.T(i18n.OOMKindLib, o.Kind))
	case "oom-killer":
		b.WriteString(l.T(i18n.OOMKindKiller))
	default:
		b.WriteString(l.T(i18n.OOMKindOther))
	}
	if o.GPU >= 0 {
		b.WriteString(l.T(i18n.OOMOnGPU, o.GPU))
	}
	var parts []string
	if o.TriedBytes > 0 {
		parts = append(parts, l.T(i18n.OOMTried, FormatBytes(o.TriedBytes), o.TriedBytes))
	}
	switch {
	case o.FreeBytes >= 0 && o.TotalBytes > 0:
		parts = append(parts, l.T(i18n.OOMFreeOf, FormatBytes(o.FreeBytes), FormatBytes(o.TotalBytes)))
	case o.FreeBytes >= 0:
		parts = append(parts, l.T(i18n.OOMFree, FormatBytes(o.FreeBytes)))
	case o.TotalBytes > 0:
		parts = append(parts, l.T(i18n.OOMTotal, FormatBytes(o.TotalBytes)))
	}
	if o.Allocated > 0 {
		parts = append(parts, l.T(i18n.OOMAllocated, FormatBytes(o.Allocated)))
	}
	if o.Reserved > 0 {
		parts = append(parts, l.T(i18n.OOMReserved, FormatBytes(o.Reserved)))
	}
	if len(parts) > 0 {
		b.WriteString(l.Pick("：", ": ") + strings.Join(parts, l.T(i18n.ParamSep)))
	}
	if o.Frame != "" {
		b.WriteString(l.T(i18n.OOMAtFrame, o.Frame))
	}
	return b.String()
}

func peakBeforeCrash(l i18n.Lang, r *trainer.Run) string {
	var parts []string
	if r.PeakGPUMem != nil {
		parts = append(parts, l.T(i18n.PeakGPU, FormatBytes(*r.PeakGPUMem)))
	}
	if r.PeakHostMem != nil {
		parts = append(parts, l.T(i18n.PeakHost, FormatBytes(*r.PeakHostMem)))
	}
	return strings.Join(parts, " · ")
}

// fittedValue is the value of param the memory fit says fits, when it is
// about param and below the run's value (0 otherwise).
func fittedValue(fit *trainer.MemoryFit, param string, value int64) int64 {
	if fit.OK() && fit.Param == param && fit.MaxFit < value {
		return fit.MaxFit
	}
	return 0
}

// OOMAdvice lists concrete next steps after an out-of-memory error. o may
// be nil (killed by the OOM killer, or nothing parsed), job too. fit is
// the memory fit of the job's runs (nil if none): when it names a value of
// the batch parameter that fits, the advice says that value instead of
// half.
func OOMAdvice(l i18n.Lang, o *trainer.OOM, r *trainer.Run, job *trainer.Job, fit *trainer.MemoryFit) []string {
	var out []string
	kind := "cuda"
	if o != nil {
		kind = o.Kind
	}
	if o.HalvingCannotHelp() {
		// A request that half of would still not fit is no batch a little
		// too large: the batch advice (half, accumulation, precision)
		// cannot help, so none is given.
		at := ""
		if o.Frame != "" {
			at = l.T(i18n.AdviceAtFrame, o.Frame)
		}
		return []string{l.T(i18n.AdviceNoHalf, FormatBytes(o.TriedBytes), FormatBytes(o.TotalBytes), at)}
	}
	if o != nil && o.TriedBytes > 0 && o.TotalBytes > 0 && o.TriedBytes > o.TotalBytes && kind != "host" {
		out = append(out, l.T(i18n.AdviceTooLarge, FormatBytes(o.TriedBytes), FormatBytes(o.TotalBytes)))
	}
	param, value, half := batchParam(job, r)
	switch fv := fittedValue(fit, param, value); {
	case fv > 0:
		out = append(out, l.T(i18n.AdviceFit, FitAdvice(l, fit), startCommand(job, r, param, fv)))
		half = fv
	case half > 0:
		out = append(out, l.T(i18n.AdviceHalf, startCommand(job, r, param, half)))
	case param != "":
		out = append(out, l.T(i18n.AdviceParamNow, param, value))
	default:
		out = append(out, l.T(i18n.AdviceSmaller))
	}
	if half > 0 && value%half == 0 {
		out = append(out, l.T(i18n.AdviceAccumKeep, value/half, half, value))
	} else if half > 0 {
		out = append(out, l.T(i18n.AdviceAccumNear, half, value))
	} else {
		out = append(out, l.T(i18n.AdviceAccum))
	}
	if kind == "host" || kind == "oom-killer" {
		out = append(out, l.T(i18n.AdviceHost))
		return out
	}
	if p, v := precisionParam(job, r); p != "" {
		out = append(out, l.T(i18n.AdviceMixedP, p, v))
	} else {
		out = append(out, l.T(i18n.AdviceMixed))
	}
	out = append(out, l.T(i18n.AdviceCkpt))
	if o != nil && o.Fragmented() {
		if o.Reserved > 0 {
			out = append(out, l.T(i18n.AdviceFragRes, FormatBytes(o.Reserved)))
		} else {
			out = append(out, l.T(i18n.AdviceFrag))
		}
	}
	if kind == "jax" {
		out = append(out, l.T(i18n.AdviceJAX))
	}
	return out
}

// batchParam finds the job's batch parameter (on_oom's halve, else an int
// parameter named batch_size, bs or batch), its value in the run and half
// of it (0 when it cannot be halved).
func batchParam(job *trainer.Job, r *trainer.Run) (param string, value, half int64) {
	if job == nil || r == nil {
		return "", 0, 0
	}
	c := trainer.BatchParam(job)
	if c == "" {
		return "", 0, 0
	}
	v, err := strconv.ParseInt(r.Params[c], 10, 64)
	if err != nil {
		return "", 0, 0
	}
	h := v / 2
	if spec := job.Params[c]; h < 1 || (spec.Min != nil && float64(h) < *spec.Min) {
		h = 0
	}
	return c, v, h
}

// precisionParam finds a precision choice of the job that would use less
// memory than the run's: "precision", "bf16".
func precisionParam(job *trainer.Job, r *trainer.Run) (string, string) {
	if job == nil || r == nil {
		return "", ""
	}
	for _, name := range []string{"precision", "dtype", "amp_dtype", "mixed_precision"} {
		spec, ok := job.Params[name]
		if !ok {
			continue
		}
		cur := strings.ToLower(r.Params[name])
		if cur != "" && cur != "fp32" && cur != "float32" && cur != "32" && cur != "no" {
			return "", "" // already reduced
		}
		for _, want := range []string{"bf16", "bfloat16", "fp16", "float16", "16-mixed", "bf16-mixed"} {
			if slices.Contains(spec.Choices, want) {
				return name, want
			}
		}
	}
	return "", ""
}

// startCommand is the 开始 command that repeats run r with param=value:
// the job, the parameter, and every other parameter that differs from its
// default.
func startCommand(job *trainer.Job, r *trainer.Run, param string, value int64) string {
	parts := []string{"开始", job.Name, param + "=" + strconv.FormatInt(value, 10)}
	for _, name := range job.ParamNames() {
		if name == param {
			continue
		}
		v, ok := r.Params[name]
		spec := job.Params[name]
		if !ok || (spec.HasDefault && v == spec.Default) {
			continue
		}
		parts = append(parts, name+"="+v)
	}
	return strings.Join(parts, " ")
}

// OOMButtons is the [retry with half batch] button for a run that ran out
// of memory, when its job has a batch parameter that can be halved and
// the command fits in a button; [retry with the batch that fits] when the
// memory fit of the job's runs (fit, may be nil) names a smaller value,
// the one the advice names.
func OOMButtons(l i18n.Lang, job *trainer.Job, r *trainer.Run, fit *trainer.MemoryFit) [][]chat.Button {
	param, value, half := batchParam(job, r)
	label := l.Button(i18n.BtnRetryHalf)
	if fv := fittedValue(fit, param, value); fv > 0 {
		half, label = fv, l.Button(i18n.BtnRetryFit)
	}
	if half == 0 {
		return nil
	}
	data := startCommand(job, r, param, half)
	if len(data) > maxButtonData {
		return nil // the advice in the text has the command
	}
	return [][]chat.Button{{{Label: label, Data: data}}}
}

// RetryText is the line about on_oom in the report of an ended run, and
// whether a retry follows (then no [retry with half batch] button: on_oom
// is already doing it).
func RetryText(l i18n.Lang, e trainer.Event) (line string, retrying bool) {
	r, rt := e.Run, e.Retry
	if rt == nil {
		return "", false
	}
	switch {
	case r.Outcome == trainer.OutcomeOOM && rt.Next != "" && rt.Fit != nil:
		return l.T(i18n.RetryFit, rt.Param, rt.Next, rt.Attempt+1, rt.Limit, FitAdvice(l, rt.Fit)), true
	case r.Outcome == trainer.OutcomeOOM && rt.Next != "":
		return l.T(i18n.RetryNext, rt.Param, rt.Next, rt.Attempt+1, rt.Limit), true
	case r.Outcome == trainer.OutcomeOOM:
		return l.T(i18n.RetryRefused, rt.Refused), false
	case r.Outcome == trainer.OutcomeFinished && rt.Attempt > 0:
		return l.T(i18n.RetryFitted, rt.Param, rt.Value, rt.Attempt, r.RetryOf), false
	case rt.Attempt > 0:
		return l.T(i18n.RetryOf, rt.Attempt, rt.Limit, r.RetryOf, rt.Param, rt.Value), false
	}
	return "", false
}

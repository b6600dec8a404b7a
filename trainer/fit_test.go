package trainer

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// fitRun is a run of job "lm" at batch_size=bs with a host peak.
func fitRun(id int64, bs int, peak int64, outcome Outcome, extra ...string) *Run {
	p := map[string]string{"batch_size": strconv.Itoa(bs), "lr": "0.1"}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return &Run{ID: id, Job: "lm", Params: p, Outcome: outcome, PeakHostMem: &peak}
}

func TestFitMemory(t *testing.T) {
	const mib = 1 << 20
	min16 := 16.0
	job := &Job{Name: "lm", Params: map[string]ParamSpec{"batch_size": {Type: ParamInt, Min: &min16}}}
	line := func(bs int) int64 { return 200*mib + int64(bs)*2*mib }
	runs := []*Run{
		fitRun(7, 64, line(64), OutcomeFinished),
		fitRun(3, 16, line(16), OutcomeFinished),
		fitRun(4, 32, line(32)+mib/2, OutcomeFinished),
		fitRun(5, 32, 1, OutcomeFailed),                                     // failed for another reason: left out
		fitRun(6, 48, line(48)*3, OutcomeFinished, "ckpt", "1"),             // other parameters: left out
		{ID: 9, Job: "other", Params: map[string]string{"batch_size": "8"}}, // another job
	}
	f := FitMemory(runs, job, "lm", "batch_size", nil, 1<<30)
	if !f.OK() {
		t.Fatalf("no answer: %s", f.Problem)
	}
	if len(f.Runs) != 3 || f.Runs[0] != 3 || f.Runs[1] != 4 || f.Runs[2] != 7 {
		t.Fatalf("runs %v, want 3 4 7", f.Runs)
	}
	if math.Abs(f.B-2*mib) > 0.02*mib || math.Abs(f.A-200*mib) > 2*mib || f.R2 < 0.999 {
		t.Errorf("a %.0f b %.0f R² %.5f, want about 200 MiB + 2 MiB × batch_size", f.A, f.B, f.R2)
	}
	// 90 % of 1 GiB is 921.6 MiB: (921.6 − 200) / 2 = 360, but that is
	// more than twice the largest batch tried (64): the answer is 128.
	if f.LineFit < 358 || f.LineFit > 361 {
		t.Errorf("line fit %d, want about 360", f.LineFit)
	}
	if f.MaxFit != 128 || f.CappedBy != FitCapExtrapolation || f.Largest != 64 || f.Extrapolation() != 2 {
		t.Errorf("max fit %d capped by %q (largest %g, %g×), want 128 by extrapolation, 2× the largest 64", f.MaxFit, f.CappedBy, f.Largest, f.Extrapolation())
	}
	// With a limit the line reaches within the factor, it answers the line.
	if f := FitMemory(runs, job, "lm", "batch_size", nil, 400*mib); f.MaxFit != f.LineFit || f.CappedBy != FitCapNone || f.MaxFit < 79 || f.MaxFit > 81 {
		t.Errorf("limit 400 MiB: max fit %d (line %d, capped by %q), want about (360 − 200) / 2 = 80", f.MaxFit, f.LineFit, f.CappedBy)
	}
	if f.Same["lr"] != "0.1" || len(f.Same) != 1 {
		t.Errorf("same %v, want lr=0.1", f.Same)
	}
	want := "batch_size=" + strconv.FormatInt(f.MaxFit, 10) + " should fit: predicted "
	if adv := f.Advice(); !strings.HasPrefix(adv, want) || !strings.HasSuffix(adv, " of 1 GiB, from runs #3 #4 #7") {
		t.Errorf("advice %q", adv)
	}

	// A run out of memory at 100 caps the answer below it.
	oom := fitRun(10, 100, 900*mib, OutcomeOOM)
	if f := FitMemory(append(runs, oom), job, "lm", "batch_size", oom, 1<<30); f.MaxFit != 99 || len(f.OOMRuns) != 1 || f.CappedBy != FitCapOOM {
		t.Errorf("with an OOM at 100: max fit %d (oom runs %v, capped by %q), want 99 by the OOM", f.MaxFit, f.OOMRuns, f.CappedBy)
	}
	// Fitting like the checkpointing run: one value only.
	if f := FitMemory(runs, job, "lm", "batch_size", runs[4], 1<<30); f.OK() || !strings.HasPrefix(f.Problem, "too few runs") {
		t.Errorf("ckpt=1 runs: %+v, want too few runs", f)
	}
	for name, tc := range map[string]struct {
		runs    []*Run
		limit   int64
		problem string
	}{
		"one value":    {[]*Run{fitRun(1, 16, line(16), OutcomeFinished), fitRun(2, 16, line(16), OutcomeFinished)}, 1 << 30, "too few runs"},
		"noise":        {[]*Run{fitRun(1, 16, 300*mib, OutcomeFinished), fitRun(2, 32, 200*mib, OutcomeFinished), fitRun(3, 48, 320*mib, OutcomeFinished), fitRun(4, 64, 210*mib, OutcomeFinished)}, 1 << 30, "poor fit: R²"},
		"no growth":    {[]*Run{fitRun(1, 16, 300*mib, OutcomeFinished), fitRun(2, 32, 200*mib, OutcomeFinished)}, 1 << 30, "the peak does not grow"},
		"no limit":     {runs, 0, "the memory limit is not known"},
		"nothing fits": {runs, 240 * mib, "nothing fits: batch_size=16"},
	} {
		f := FitMemory(tc.runs, job, "lm", "batch_size", nil, tc.limit)
		if f.OK() || !strings.HasPrefix(f.Problem, tc.problem) {
			t.Errorf("%s: ok %v, problem %q, want %q…", name, f.OK(), f.Problem, tc.problem)
		}
	}
}

// The parameter's max holds without the job (a fit from the history
// alone, `trainbot fit --data DIR`): it is the one recorded with the
// newest run; the job's, when given, wins.
func TestFitMemoryKeepsTheStoredMax(t *testing.T) {
	const mib = 1 << 20
	line := func(bs int) int64 { return 100*mib + int64(bs)*mib/64 }
	old, newer := 4096.0, 1500.0
	var runs []*Run
	for i, bs := range []int{64, 256, 1024} {
		r := fitRun(int64(i+1), bs, line(bs), OutcomeFinished)
		r.ParamRanges = map[string]ParamRange{"batch_size": {Max: &old}}
		if i == 2 {
			r.ParamRanges = map[string]ParamRange{"batch_size": {Max: &newer}}
		}
		runs = append(runs, r)
	}
	// 90 % of 64 GiB: the line alone says about 3.7 million.
	f := FitMemory(runs, nil, "lm", "batch_size", nil, 64<<30)
	if f.MaxFit != 1500 || f.CappedBy != FitCapMax || f.Max == nil || *f.Max != 1500 || f.LineFit < 3_000_000 {
		t.Errorf("without the job: max fit %d capped by %q (max %v, line %d), want 1500 by the stored max", f.MaxFit, f.CappedBy, f.Max, f.LineFit)
	}
	for i := range runs {
		runs[i].ParamRanges = nil
	}
	if f := FitMemory(runs, nil, "lm", "batch_size", nil, 64<<30); f.MaxFit != 2048 || f.CappedBy != FitCapExtrapolation || f.Max != nil {
		t.Errorf("no max anywhere: max fit %d capped by %q, want 2048 (2× 1024)", f.MaxFit, f.CappedBy)
	}
	cfgMax := 512.0
	job := &Job{Name: "lm", Params: map[string]ParamSpec{"batch_size": {Type: ParamInt, Max: &cfgMax}}}
	if f := FitMemory(runs, job, "lm", "batch_size", nil, 64<<30); f.MaxFit != 512 || f.CappedBy != FitCapMax {
		t.Errorf("the job's max: max fit %d capped by %q, want 512", f.MaxFit, f.CappedBy)
	}
	// A min more than twice the largest value tried: no answer, and why.
	lo := 4000.0
	job.Params["batch_size"] = ParamSpec{Type: ParamInt, Min: &lo}
	if f := FitMemory(runs, job, "lm", "batch_size", nil, 64<<30); f.OK() || !strings.HasPrefix(f.Problem, "too far from the runs: the least batch_size allowed, 4000, is more than 2× the largest value tried (1024)") {
		t.Errorf("min beyond reach: ok %v, problem %q", f.OK(), f.Problem)
	}
}

func TestBatchParam(t *testing.T) {
	job := &Job{Params: map[string]ParamSpec{"bs": {Type: ParamInt}, "micro": {Type: ParamInt}, "batch_size": {Type: ParamFloat}}}
	if got := BatchParam(job); got != "bs" {
		t.Errorf("got %q, want bs (batch_size is a float)", got)
	}
	job.OnOOM = &OOMRetry{Retry: 1, Halve: "micro"}
	if got := BatchParam(job); got != "micro" {
		t.Errorf("got %q, want on_oom's micro", got)
	}
	if got := BatchParam(nil); got != "" {
		t.Errorf("nil job: %q", got)
	}
}

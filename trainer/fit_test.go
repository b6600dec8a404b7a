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
	// 90 % of 1 GiB is 921.6 MiB: (921.6 − 200) / 2 = 360.
	if f.MaxFit < 358 || f.MaxFit > 361 {
		t.Errorf("max fit %d, want about 360", f.MaxFit)
	}
	if f.Same["lr"] != "0.1" || len(f.Same) != 1 {
		t.Errorf("same %v, want lr=0.1", f.Same)
	}
	want := "batch_size=" + strconv.FormatInt(f.MaxFit, 10) + " should fit: predicted "
	if adv := f.Advice(); !strings.HasPrefix(adv, want) || !strings.HasSuffix(adv, " of 1 GiB, from runs #3 #4 #7") {
		t.Errorf("advice %q", adv)
	}

	// A run out of memory at 128 caps the answer below it.
	oom := fitRun(10, 128, 900*mib, OutcomeOOM)
	if f := FitMemory(append(runs, oom), job, "lm", "batch_size", oom, 1<<30); f.MaxFit != 127 || len(f.OOMRuns) != 1 {
		t.Errorf("with an OOM at 128: max fit %d (oom runs %v), want 127", f.MaxFit, f.OOMRuns)
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

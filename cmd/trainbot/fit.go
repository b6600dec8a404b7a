package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer"
)

// hostAvailable is the host's MemAvailable, the limit of a memory fit of a
// CPU job; 0 when /proc/meminfo cannot be read.
func hostAvailable() int64 {
	h, err := gpu.HostMemory()
	if err != nil {
		return 0
	}
	return int64(h.MemAvailable)
}

// fitJSON is `trainbot fit --json`. MaxFit is null when no value fits;
// LargestTried is the largest value of the runs of the line, LineMaxFit
// what the line alone puts under the limit, CappedBy what held MaxFit
// below it ("max", "extrapolation", "oom" or ""), Extrapolation MaxFit
// over LargestTried (0 without an answer) and ParamMax the parameter's
// max (the job's, else as stored with the runs; null when none).
type fitJSON struct {
	Job        string  `json:"job"`
	Param      string  `json:"param"`
	ABytes     float64 `json:"a_bytes"`
	BBytesPer  float64 `json:"b_bytes_per_unit"`
	R2         float64 `json:"r2"`
	Runs       []int64 `json:"runs"`
	LimitBytes int64   `json:"limit_bytes"`
	MaxFit     *int64  `json:"max_fit"`

	LargestTried  float64  `json:"largest_tried"`
	LineMaxFit    int64    `json:"line_max_fit"`
	CappedBy      string   `json:"capped_by"`
	Extrapolation float64  `json:"extrapolation"`
	ParamMax      *float64 `json:"param_max"`
}

func cmdFit(ctx context.Context, args []string, e env) int {
	fs := newFlags("fit", "JOB [--param NAME] [--limit BYTES] [--json]", e)
	var cf configFlags
	cf.register(fs, false)
	param := fs.String("param", "", "the numeric parameter to fit (default: the one on_oom halves, else batch_size, bs or batch)")
	limitFlag := fs.String("limit", "", "memory to stay under, e.g. 24GiB or 25769803776 (default: the NVML total of the job's GPU, or the host's MemAvailable)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, e, "fit takes one job name")
	}
	var limit int64
	if *limitFlag != "" {
		v, ok := parseSize(*limitFlag)
		if !ok || v < 1 {
			return usageError(fs, e, "--limit %q: want bytes, e.g. 24GiB, 800MB or 25769803776", *limitFlag)
		}
		limit = v
	}
	st, _, jobs, code := openHistoryJobs(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	var job *trainer.Job // nil for a job no longer configured: its runs still fit
	for _, j := range jobs {
		if j.Name == pos[0] {
			job = j
		}
	}
	f, source, err := render.MemoryFit(ctx, st, render.FitOptions{Job: job, Name: pos[0], Param: *param, Limit: limit, HostAvailable: hostAvailable})
	if err != nil {
		return errorf(e, "%v", err)
	}
	if *asJSON {
		out := fitJSON{Job: f.Job, Param: f.Param, ABytes: f.A, BBytesPer: f.B, R2: f.R2, Runs: f.Runs, LimitBytes: f.Limit,
			LargestTried: f.Largest, LineMaxFit: f.LineFit, CappedBy: string(f.CappedBy), Extrapolation: f.Extrapolation(), ParamMax: f.Max}
		if out.Runs == nil {
			out.Runs = []int64{}
		}
		if f.OK() {
			out.MaxFit = &f.MaxFit
		}
		b, err := json.Marshal(out)
		if err != nil {
			return errorf(e, "%v", err)
		}
		fmt.Fprintln(e.stdout, string(b))
		if !f.OK() {
			fmt.Fprintln(e.stderr, "trainbot fit: no answer: "+f.Problem)
		}
	} else {
		fmt.Fprintln(e.stdout, termsafe.String(render.FitText(i18n.ZhEn, f, source)))
	}
	if !f.OK() {
		return exitFail
	}
	return exitOK
}

// parseSize reads "24GiB", "800 MB", "2.5G" or a plain number of bytes.
func parseSize(s string) (int64, bool) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	for len(unit) > 0 && unit[0] == ' ' {
		unit = unit[1:]
	}
	if unit == "" {
		unit = "B"
	}
	v, ok := units.ParseBytes(num, unit)
	return int64(v), ok
}

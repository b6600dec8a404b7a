package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// runJSON is a run in `trainbot runs --json`. Field names are a contract.
type runJSON struct {
	ID               int64               `json:"id"`
	Job              string              `json:"job"`
	State            string              `json:"state"`
	Outcome          string              `json:"outcome"`
	Detail           string              `json:"detail"`
	End              *trainer.EndFacts   `json:"end,omitempty"` // how it ended, as facts (why, exit_code, signal, stderr_tail, nan, oom, stopped_by…); absent while it runs and for runs recorded before facts
	ExitCode         *int                `json:"exit_code"`
	StartedAt        time.Time           `json:"started_at"`
	EndedAt          *time.Time          `json:"ended_at"`
	DurationS        float64             `json:"duration_s"`
	Params           map[string]any      `json:"params"` // numbers and booleans per the parameters' declared types
	Steps            int64               `json:"steps"`
	TotalSteps       int64               `json:"total_steps"`
	Last             map[string]*float64 `json:"last"` // null for NaN/Inf
	PeakGPUMemBytes  *int64              `json:"peak_gpu_mem_bytes"`
	PeakHostMemBytes *int64              `json:"peak_host_mem_bytes"`
	PeakHostHow      string              `json:"peak_host_how"` // "" sampled, "main", "tree-sum", "cgroup"
	StartedBy        string              `json:"started_by"`
	StoppedBy        string              `json:"stopped_by"`
	PID              int                 `json:"pid"`
	Command          []string            `json:"command"`
	LogPath          string              `json:"log_path"`
	RetryOf          *int64              `json:"retry_of"`           // the run this one retried after out-of-memory (on_oom); null if none
	Runner           string              `json:"runner"`             // "local": a trainbot shim on this host owns the run's processes; "slurm": a Slurm batch job; "ssh": a trainbot shim on another host (host)
	SupervisorPID    int                 `json:"supervisor_pid"`     // that shim's pid (0 for Slurm runs)
	SlurmJobID       *string             `json:"slurm_job_id"`       // the Slurm job; null for local runs
	Node             string              `json:"node"`               // where a Slurm run runs (Slurm's NodeList); "" for local runs and before it starts
	ResumedFrom      *int64              `json:"resumed_from"`       // the run this one resumed from its checkpoint (on_failure); null if none
	Host             string              `json:"host"`               // the [[hosts]] name of the host an "ssh" run runs on; "" on this host
	RemoteDir        string              `json:"remote_dir"`         // its directory there; "" on this host
	Note             string              `json:"note"`               // what the user wrote about the run ("" for none)
	GPUs             []trainer.RunGPU    `json:"gpus"`               // the GPUs it was given (index, uuid, name); [] when it asked for none
	Attached         *bool               `json:"attached,omitempty"` // runs show, a running run: a trainbot observes it now
}

func toJSON(r *trainer.Run, last map[string]float64, now time.Time) runJSON {
	j := runJSON{
		Host: r.Host, RemoteDir: r.RemoteDir,
		ID: r.ID, Job: r.Job, State: string(r.State), Outcome: string(r.Outcome), Detail: r.Detail, End: r.End,
		ExitCode: r.ExitCode, StartedAt: r.StartedAt.UTC(), DurationS: math.Round(r.Duration(now).Seconds()*1000) / 1000,
		Params: r.TypedParams(), Steps: r.Steps, TotalSteps: r.Total, Last: map[string]*float64{},
		PeakGPUMemBytes: r.PeakGPUMem, PeakHostMemBytes: r.PeakHostMem, PeakHostHow: r.PeakHostHow, GPUs: r.GPUs,
		StartedBy: r.StartedBy, StoppedBy: r.StoppedBy, PID: r.PID, Command: r.Command, LogPath: r.LogPath,
		Runner: def(r.Runner, trainer.RunnerLocal), SupervisorPID: r.Supervisor, Node: r.Node, Note: r.Note,
	}
	if j.GPUs == nil {
		j.GPUs = []trainer.RunGPU{}
	}
	if r.SlurmJobID != "" {
		id := r.SlurmJobID
		j.SlurmJobID = &id
	}
	if r.RetryOf != 0 {
		id := r.RetryOf
		j.RetryOf = &id
	}
	if r.ResumedFrom != 0 {
		id := r.ResumedFrom
		j.ResumedFrom = &id
	}
	if !r.EndedAt.IsZero() {
		t := r.EndedAt.UTC()
		j.EndedAt = &t
	}
	for k, v := range last {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			j.Last[k] = nil
			continue
		}
		v := v
		j.Last[k] = &v
	}
	return j
}

func cmdRuns(ctx context.Context, args []string, e env) int {
	fs := newFlags("runs", "[--json] [--limit N] [--job NAME] [--param NAME=VALUE]… | runs show ID [--json]", e)
	var cf configFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "at most this many runs, newest first (0: all)")
	job := fs.String("job", "", "only runs of this job")
	var params paramFilter
	fs.Var(&params, "param", "only runs started with this parameter value, e.g. --param batch_size=256 (numbers compare as numbers: 1e-3 = 0.001); repeat for several")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *limit < 0 {
		return usageError(fs, e, "--limit %d: want 0 or more", *limit)
	}
	var showID int64
	switch {
	case len(pos) == 0:
	case pos[0] == "show" && len(pos) == 2:
		id, ok := runIDArg(pos[1])
		if !ok {
			return usageError(fs, e, "runs show: %q is not a run id", pos[1])
		}
		showID = id
	case pos[0] == "show":
		return usageError(fs, e, "runs show takes one run id")
	default:
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	st, cfg, code := openHistory(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	dataDir := cfg.DataDir
	now := time.Now().In(cfg.Location())
	if showID != 0 {
		r, code := loadRun(ctx, e, st, dataDir, showID)
		if r == nil {
			return code
		}
		last, err := st.LastValues(ctx, r.ID)
		if err != nil {
			return errorf(e, "%v", err)
		}
		holder, attached := trainer.Observer(trainer.RunDir(dataDir, r.ID))
		if *asJSON {
			j := toJSON(r, last, now)
			if r.State == trainer.StateRunning {
				j.Attached = &attached
			}
			return printJSON(e, j)
		}
		fmt.Fprintln(e.stdout, termsafe.String(render.EndedText(i18n.ZhEn, r, last)))
		fmt.Fprintf(e.stdout, "started %s by %s\ncommand %s\nlog %s\n", r.StartedAt.Format(time.RFC3339), termsafe.Field(def(r.StartedBy, "?")),
			termsafe.Field(strings.Join(r.Command, " ")), termsafe.Field(r.LogPath))
		if r.Supervisor > 0 && r.Runner != "" {
			fmt.Fprintf(e.stdout, "runner %s · supervisor pid %d\n", r.Runner, r.Supervisor)
		}
		if r.Host != "" {
			fmt.Fprintf(e.stdout, "on host %s · its directory there %s\n", termsafe.Field(r.Host), termsafe.Field(r.RemoteDir))
		}
		if r.SlurmJobID != "" {
			fmt.Fprintf(e.stdout, "runner slurm · Slurm job %s · node %s\n", termsafe.Field(r.SlurmJobID), termsafe.Field(def(r.Node, "(not started)")))
		}
		if r.State == trainer.StateRunning {
			if attached {
				fmt.Fprintf(e.stdout, "trainbot is attached to this run (%s)\n", termsafe.Field(holder))
			} else {
				fmt.Fprintln(e.stdout, "no trainbot is attached to this run now: the next one started on this data directory re-attaches")
			}
		}
		return exitOK
	}
	filter := history.RunFilter{Job: *job, Limit: *limit}
	if len(params) > 0 {
		filter.Limit = 0 // the limit counts the runs that match
	}
	runs, err := st.Runs(ctx, filter)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if len(params) > 0 {
		runs = slices.DeleteFunc(runs, func(r *trainer.Run) bool { return !params.match(r.Params) })
		if *limit > 0 && len(runs) > *limit {
			runs = runs[:*limit]
		}
	}
	out := make([]runJSON, 0, len(runs))
	for _, r := range runs {
		last, err := st.LastValues(ctx, r.ID)
		if err != nil {
			return errorf(e, "%v", err)
		}
		if *asJSON {
			out = append(out, toJSON(r, last, now))
		} else {
			fmt.Fprintln(e.stdout, termsafe.Field(render.RunLine(i18n.ZhEn, r, last, now)+paramsText(r.Params)))
		}
	}
	if *asJSON {
		return printJSON(e, out)
	}
	if len(runs) == 0 && len(params) > 0 {
		fmt.Fprintf(e.stdout, "no run in %s was started with %s\n", dataDir, params.String())
	} else if len(runs) == 0 {
		fmt.Fprintf(e.stdout, "no runs yet in %s\n", dataDir)
	}
	return exitOK
}

// paramsText is a run's parameters for its line: " · batch_size=64 lr=0.01".
func paramsText(ps map[string]string) string {
	if len(ps) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(ps))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + ps[k]
	}
	return " · " + strings.Join(parts, " ")
}

// paramFilter is runs' --param NAME=VALUE, repeated: a run matches when
// it was started with every one of them.
type paramFilter []struct{ name, value string }

func (f *paramFilter) String() string {
	parts := make([]string, len(*f))
	for i, p := range *f {
		parts[i] = p.name + "=" + p.value
	}
	return strings.Join(parts, " ")
}

func (f *paramFilter) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q: want NAME=VALUE, e.g. batch_size=256", s)
	}
	*f = append(*f, struct{ name, value string }{strings.TrimSpace(name), strings.TrimSpace(value)})
	return nil
}

// match reports whether params has each value; numbers are compared as
// numbers, so --param lr=0.001 finds a run started with lr=1e-3.
func (f paramFilter) match(params map[string]string) bool {
	for _, p := range f {
		v, ok := params[p.name]
		if !ok {
			return false
		}
		if v == p.value {
			continue
		}
		a, errA := strconv.ParseFloat(v, 64)
		b, errB := strconv.ParseFloat(p.value, 64)
		if errA != nil || errB != nil || a != b {
			return false
		}
	}
	return true
}

func def(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func printJSON(e env, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a command's "&&" stays "&&"
	if err := enc.Encode(v); err != nil {
		return errorf(e, "encode json: %v", err)
	}
	return exitOK
}

// openHistory loads the config of cf and opens its data directory's store.
func openHistory(e env, cf configFlags) (st *store.Store, cfg *config.Config, code int) {
	st, cfg, _, code = openHistoryJobs(e, cf)
	return st, cfg, code
}

// openHistoryJobs is openHistory with the config's jobs.
func openHistoryJobs(e env, cf configFlags) (st *store.Store, cfg *config.Config, jobs []*trainer.Job, code int) {
	cfg, bc, code := cf.load(e)
	if cfg == nil {
		return nil, nil, nil, code
	}
	st, code = openStore(e, cfg.DataDir)
	return st, cfg, bc.jobs, code
}

func openStore(e env, dir string) (*store.Store, int) {
	if _, err := os.Stat(dir); err != nil {
		return nil, errorf(e, "no data directory %s (no run yet?): %v", dir, err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		return nil, errorf(e, "%v", err)
	}
	return st, exitOK
}

func cmdPlot(ctx context.Context, args []string, e env) int {
	fs := newFlags("plot", "ID [--metric NAME] [--x step|time] [--kind loss|memory|util] [-o FILE.png]", e)
	var cf configFlags
	cf.register(fs, false)
	metric := fs.String("metric", "", "metric to draw (default: every loss)")
	x := fs.String("x", "step", "X axis of the loss chart: step or time (since the run started)")
	kind := fs.String("kind", render.KindLoss, "chart: loss, memory (GPU and host memory of the run) or util (GPU utilisation and temperature)")
	out := fs.String("o", "", "output PNG file (default run-ID-KIND.png)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	id, code, ok := oneRunID(fs, e, pos)
	if !ok {
		return code
	}
	xTime, err := xFlag(*x)
	if err != nil {
		return usageError(fs, e, "%v", err)
	}
	switch *kind {
	case render.KindLoss, render.KindMemory, render.KindUtil:
	default:
		return usageError(fs, e, "--kind %q: want loss, memory or util", *kind)
	}
	if *metric != "" && *kind != render.KindLoss {
		return usageError(fs, e, "--metric goes with --kind loss")
	}
	charts, st, dataDir, code := openCharts(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	r, code := loadRun(ctx, e, st, dataDir, id)
	if r == nil {
		return code
	}
	var img chat.Image
	switch *kind {
	case render.KindMemory:
		img, err = charts.Memory(ctx, r)
	case render.KindUtil:
		img, err = charts.Device(ctx, r)
	default:
		img, err = charts.Loss(ctx, r, render.LossOptions{Metric: *metric, XTime: xTime})
	}
	if err != nil {
		return errorf(e, "%v", err)
	}
	path := *out
	if path == "" {
		path = img.Name
	}
	if err := os.WriteFile(path, img.PNG, 0o644); err != nil {
		return errorf(e, "write chart: %v", err)
	}
	fmt.Fprintf(e.stdout, "%s (%s)\n", path, img.Caption)
	return exitOK
}

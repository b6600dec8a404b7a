package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web"
)

// Bounds of the arguments.
const (
	defaultRuns   = 20
	maxRuns       = 500
	defaultLines  = 50
	maxLines      = 2000
	defaultPoints = 1000
	maxPoints     = 20000
)

func (t *tools) add(s *mcp.Server) {
	addTool(t, s, "list_jobs", "The configured jobs with their parameters (type, default, range, choices, help): what start_run accepts.", true, t.listJobs)
	addTool(t, s, "list_runs", "Recent runs, newest first: id, job, params, state, outcome, steps, start and end. Filters: job, state (running or ended), limit (default 20).", true, t.listRuns)
	addTool(t, s, "run_status", "A run's status, the facts 状态 (/status) shows in the chat: step, total, epoch, latest metrics, speed, ETA, elapsed, outcome. run 0 or absent: the active run.", true, t.runStatus)
	addTool(t, s, "run_points", "A metric's points of a run (default loss), between from and to steps, downsampled to at most max_points (default 1000) keeping each column's lowest and highest value, as the run pages do.", true, t.runPoints)
	addTool(t, s, "run_log", "The last n lines (default 50) of a run's output, control characters escaped. run 0 or absent: the active run.", true, t.runLog)
	addTool(t, s, "compare_runs", "Runs side by side (2 to 8 ids): params, outcome, steps, duration, peak GPU and host memory, and a metric's (default loss) last, lowest and highest value with their steps.", true, t.compareRuns)
	if t.o.Fit != nil {
		addTool(t, s, "fit_batch", "Which value of a job's batch parameter (or param) is predicted to fit in memory, from its past runs' peak memory (适配): a line fit of memory against the parameter; limit in bytes (default the GPU's total).", true, t.fitBatch)
	}
	if t.o.GPU != nil {
		addTool(t, s, "gpu_status", "The GPUs: memory, utilisation and which processes (and runs) hold them, as `trainbot gpu --json`.", true, t.gpuStatus)
	}
	if t.o.AllowControl {
		addTool(t, s, "start_run", "Start a run of a job with parameters (a JSON object of strings, validated against the job's declared parameters); the same locks as 开始: a busy job is refused with what is running. Returns the run id.", false, t.startRun)
		addTool(t, s, "stop_run", "Stop a run (run 0 or absent: the active one): it is sent the job's stop signal so that it can save a checkpoint.", false, t.stopRun)
		addTool(t, s, "queue_run", "Queue a start of a job with parameters for when its lock is free (排队); returns the queue entry and its position.", false, t.queueRun)
	}
}

// num is a float for JSON: nil for NaN and ±Inf, which JSON cannot carry.
func num(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// jobOut is one job of list_jobs.
type jobOut struct {
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Lock        string              `json:"lock,omitempty"`
	Params      map[string]paramOut `json:"params,omitempty"`
}

type paramOut struct {
	Type     string   `json:"type"`
	Default  *string  `json:"default,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	Help     string   `json:"help,omitempty"`
	Required bool     `json:"required,omitempty"`
}

type noArgs struct{}

func (t *tools) listJobs(_ context.Context, _ noArgs) (any, error) {
	jobs := []jobOut{}
	for _, j := range t.o.Trainer.Jobs() {
		o := jobOut{Name: j.Name, Description: j.Description, Lock: j.Lock}
		for name, p := range j.Params {
			if o.Params == nil {
				o.Params = map[string]paramOut{}
			}
			po := paramOut{Type: string(p.Type), Min: p.Min, Max: p.Max, Choices: p.Choices, Help: p.Help, Required: !p.HasDefault}
			if p.HasDefault {
				d := p.Default
				po.Default = &d
			}
			o.Params[name] = po
		}
		jobs = append(jobs, o)
	}
	return map[string]any{"jobs": jobs}, nil
}

// runOut is a run as list_runs and run_status give it.
type runOut struct {
	ID        int64             `json:"id"`
	Job       string            `json:"job"`
	Params    map[string]string `json:"params,omitempty"`
	State     string            `json:"state"`
	Outcome   string            `json:"outcome"`
	Detail    string            `json:"detail,omitempty"`
	Step      int64             `json:"step"`
	Total     int64             `json:"total,omitempty"`
	ExitCode  *int              `json:"exit_code,omitempty"`
	StartedAt string            `json:"started_at"`
	EndedAt   string            `json:"ended_at,omitempty"`
	StartedBy string            `json:"started_by,omitempty"`
	StoppedBy string            `json:"stopped_by,omitempty"`
	Note      string            `json:"note,omitempty"`
	PID       int               `json:"pid,omitempty"`
	Log       string            `json:"log,omitempty"`
}

func runJSON(r *trainer.Run) runOut {
	return runOut{ID: r.ID, Job: r.Job, Params: r.Params, State: string(r.State), Outcome: string(r.Outcome), Detail: r.Detail,
		Step: r.Steps, Total: r.Total, ExitCode: r.ExitCode, StartedAt: when(r.StartedAt), EndedAt: when(r.EndedAt),
		StartedBy: r.StartedBy, StoppedBy: r.StoppedBy, Note: r.Note, PID: r.PID, Log: r.LogPath}
}

type listRunsIn struct {
	Job   string `json:"job,omitempty" jsonschema:"only this job's runs"`
	State string `json:"state,omitempty" jsonschema:"running or ended; absent: both"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many runs (default 20, at most 500)"`
}

func (t *tools) listRuns(ctx context.Context, in listRunsIn) (any, error) {
	if in.State != "" && in.State != string(trainer.StateRunning) && in.State != string(trainer.StateEnded) {
		return nil, fmt.Errorf("state must be %q or %q, not %q", trainer.StateRunning, trainer.StateEnded, in.State)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = defaultRuns
	}
	limit = min(limit, maxRuns)
	// The store filters by job and limit; the state is filtered here, so
	// more are read when it is given.
	read := limit
	if in.State != "" {
		read = 0
	}
	runs, err := t.o.History.Runs(ctx, history.RunFilter{Job: in.Job, Limit: read})
	if err != nil {
		return nil, fmt.Errorf("could not read the runs: %w", err)
	}
	out := []runOut{}
	for _, r := range runs {
		if in.State != "" && string(r.State) != in.State {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, runJSON(r))
	}
	return map[string]any{"runs": out}, nil
}

type runIn struct {
	Run int64 `json:"run,omitempty" jsonschema:"the run id; 0 or absent: the active run"`
}

// active resolves run 0 to the only active run, with the chat's words
// when there is none or more than one.
func (t *tools) active(id int64) (int64, error) {
	if id != 0 {
		return id, nil
	}
	act := t.o.Trainer.Active()
	switch len(act) {
	case 0:
		return 0, errors.New(t.l.T(i18n.NothingToStop))
	case 1:
		return act[0].Run.ID, nil
	}
	var ids []string
	for _, st := range act {
		ids = append(ids, fmt.Sprintf("#%d (%s)", st.Run.ID, st.Run.Job))
	}
	return 0, fmt.Errorf("more than one run is active (%s): name the run", strings.Join(ids, ", "))
}

type statusOut struct {
	runOut
	Active      bool                `json:"active"`
	Epoch       *float64            `json:"epoch,omitempty"`
	TotalEpochs int64               `json:"total_epochs,omitempty"`
	Metrics     map[string]*float64 `json:"metrics,omitempty"`
	StepsPerSec *float64            `json:"steps_per_sec,omitempty"`
	ElapsedSec  float64             `json:"elapsed_s"`
	ETASec      float64             `json:"eta_s,omitempty"`
	Stopping    bool                `json:"stopping,omitempty"`
	Waiting     string              `json:"waiting,omitempty"`
	Brief       string              `json:"brief,omitempty"`
}

func (t *tools) runStatus(ctx context.Context, in runIn) (any, error) {
	id, err := t.active(in.Run)
	if err != nil {
		return nil, err
	}
	touched(ctx, id)
	if st, err := t.o.Trainer.Status(id); err == nil {
		o := statusOut{runOut: runJSON(st.Run), Active: true, Epoch: num(st.Progress.Epoch), TotalEpochs: st.Progress.TotalEpochs,
			ElapsedSec: st.Elapsed.Seconds(), ETASec: st.ETA.Seconds(), Stopping: st.Stopping, Waiting: st.Waiting, Brief: st.Brief()}
		if st.Run.State == trainer.StateEnded {
			// Its end is known but not yet in the database: until it is,
			// the run is ending (list_runs, compare_runs and the charts
			// read the database, and must agree with what this says).
			o.State, o.Outcome, o.Stopping = string(trainer.StateRunning), string(trainer.OutcomeRunning), true
		}
		o.Step, o.Total = max(o.Step, st.Progress.Step), max(o.Total, st.Progress.TotalSteps)
		if st.StepsPerSec > 0 {
			o.StepsPerSec = num(st.StepsPerSec)
		}
		for _, m := range st.Last {
			if o.Metrics == nil {
				o.Metrics = map[string]*float64{}
			}
			o.Metrics[m.Name] = num(m.Value)
		}
		return o, nil
	}
	run, err := t.o.History.Run(ctx, id)
	if err != nil {
		return nil, errors.New(t.l.T(i18n.NoSuchRun, id))
	}
	o := statusOut{runOut: runJSON(run)}
	if !run.EndedAt.IsZero() {
		o.ElapsedSec = run.EndedAt.Sub(run.StartedAt).Seconds()
	}
	return o, nil
}

type pointsIn struct {
	Run       int64  `json:"run" jsonschema:"the run id"`
	Metric    string `json:"metric,omitempty" jsonschema:"the metric (default loss; the run's metrics are listed when it has none of that name)"`
	From      *int64 `json:"from,omitempty" jsonschema:"the first step"`
	To        *int64 `json:"to,omitempty" jsonschema:"the last step"`
	MaxPoints int    `json:"max_points,omitempty" jsonschema:"at most about this many points (default 1000, at most 20000)"`
}

func (t *tools) runPoints(ctx context.Context, in pointsIn) (any, error) {
	if in.Run <= 0 {
		return nil, errors.New("run is required: a run id (list_runs lists them)")
	}
	touched(ctx, in.Run)
	metric := cmpOr(in.Metric, "loss")
	names, err := t.o.History.MetricNames(ctx, in.Run)
	if err != nil {
		return nil, fmt.Errorf("could not read run #%d's metrics: %w", in.Run, err)
	}
	if len(names) == 0 {
		if _, err := t.o.History.Run(ctx, in.Run); err != nil {
			return nil, errors.New(t.l.T(i18n.NoSuchRun, in.Run))
		}
	}
	if !slices.Contains(names, metric) {
		if len(names) == 0 {
			return map[string]any{"run": in.Run, "metric": metric, "x": []int64{}, "y": []float64{}, "points": 0, "metrics": []string{}}, nil
		}
		return nil, fmt.Errorf("run #%d has no metric %q; it has: %s", in.Run, metric, strings.Join(names, ", "))
	}
	pts, err := t.o.History.Series(ctx, in.Run, metric)
	if err != nil {
		return nil, fmt.Errorf("could not read run #%d's %s: %w", in.Run, metric, err)
	}
	maxPts := in.MaxPoints
	if maxPts <= 0 {
		maxPts = defaultPoints
	}
	maxPts = min(maxPts, maxPoints)
	xs, ys := make([]int64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		xs[i], ys[i] = p.Step, p.Value
	}
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if len(xs) > 0 {
		from, to = xs[0], xs[len(xs)-1]
	}
	if in.From != nil {
		from = *in.From
	}
	if in.To != nil {
		to = *in.To
	}
	// Two points per column: half as many columns as points asked for.
	s := web.Downsample(xs, ys, from, to, max(1, maxPts/2))
	if s.X == nil {
		s.X, s.Y = []int64{}, []float64{}
	}
	return map[string]any{"run": in.Run, "metric": metric, "x": s.X, "y": s.Y, "skipped": s.Skipped, "points": len(pts), "metrics": names}, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type logIn struct {
	Run   int64 `json:"run,omitempty" jsonschema:"the run id; 0 or absent: the active run"`
	Lines int   `json:"lines,omitempty" jsonschema:"how many of the last lines (default 50, at most 2000)"`
}

func (t *tools) runLog(ctx context.Context, in logIn) (any, error) {
	id, err := t.active(in.Run)
	if err != nil {
		return nil, err
	}
	touched(ctx, id)
	n := in.Lines
	if n <= 0 {
		n = defaultLines
	}
	n = min(n, maxLines)
	lines, err := t.o.Trainer.Tail(id, n)
	if err != nil {
		if _, herr := t.o.History.Run(ctx, id); herr != nil {
			return nil, errors.New(t.l.T(i18n.NoSuchRun, id))
		}
		return nil, fmt.Errorf("could not read run #%d's output: %w", id, err)
	}
	for i, l := range lines {
		lines[i] = termsafe.String(l)
	}
	if lines == nil {
		lines = []string{}
	}
	return map[string]any{"run": id, "lines": lines}, nil
}

func (t *tools) gpuStatus(ctx context.Context, _ noArgs) (any, error) {
	return t.o.GPU(ctx), nil
}

type startIn struct {
	Job    string            `json:"job,omitempty" jsonschema:"the job (list_jobs); may be absent when there is only one"`
	Params map[string]string `json:"params,omitempty" jsonschema:"parameter values by name, as strings: {\"lr\": \"0.001\"}"`
	Note   string            `json:"note,omitempty" jsonschema:"a note kept with the run"`
}

// who is how the runs record the starter. The requests have no Origin:
// there is no chat to tell of the run's events (an "mcp" chat would be
// a destination no transport delivers to, kept in the outbox for ever).
func (t *tools) who() string {
	return fmt.Sprintf("%s (mcp %d)", cmpOr(t.o.User.Name, "local"), t.o.User.ID)
}

// job is the job a start names: the only one when none is named.
func (t *tools) job(name string) (string, error) {
	jobs := t.o.Trainer.Jobs()
	if name == "" {
		if len(jobs) == 1 {
			return jobs[0].Name, nil
		}
		names := make([]string, len(jobs))
		for i, j := range jobs {
			names[i] = j.Name
		}
		return "", fmt.Errorf("job is required: one of %s", strings.Join(names, ", "))
	}
	return name, nil
}

func (t *tools) startRun(ctx context.Context, in startIn) (any, error) {
	job, err := t.job(in.Job)
	if err != nil {
		return nil, err
	}
	run, err := t.o.Trainer.Start(ctx, trainer.StartRequest{Job: job, Params: in.Params, By: t.who(), Note: in.Note})
	if err != nil {
		return nil, t.startError(ctx, err)
	}
	touched(ctx, run.ID)
	return map[string]any{"run": run.ID, "job": run.Job, "params": run.Params, "pid": run.PID, "log": run.LogPath,
		"text": t.l.T(i18n.RunStarted, run.ID, run.Job)}, nil
}

// startError words a refused start as the chat does (router.train), with
// the tools named where the chat names its commands.
func (t *tools) startError(ctx context.Context, err error) error {
	l := t.l
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	hint := " Call stop_run to stop it first, or queue_run to start this when it ends."
	switch {
	case errors.As(err, &busy):
		switch {
		case busy.GPUs != nil:
			text := render.GPURefusal(l, busy.GPUs, nil)
			if text == "" {
				text = l.T(i18n.BusyOther, busy.GPUs.Error())
			}
			return errors.New(text + " Call queue_run to start this when the GPUs are free.")
		case busy.Active != nil:
			touched(ctx, busy.Active.Run.ID)
			return errors.New(l.T(i18n.BusyRun, busy.Active.Run.ID, busy.Active.Run.Job, busy.Active.Brief()) + hint)
		}
		return errors.New(l.T(i18n.BusyOther, busy.Other) + hint)
	case errors.As(err, &startErr):
		touched(ctx, startErr.Run.ID)
		return errors.New(l.T(i18n.CouldNotRun, startErr.Run.ID, render.StartFailure(l, startErr)))
	case errors.Is(err, trainer.ErrBadParam):
		return errors.New(l.T(i18n.NotStartedP, paramErrors(l, err)))
	case errors.Is(err, trainer.ErrUnknownJob), errors.Is(err, trainer.ErrNoHost):
		return errors.New(l.T(i18n.NotStartedE, err.Error()))
	case errors.Is(err, trainer.ErrClosed):
		return errors.New(l.T(i18n.ShuttingDown))
	case errors.Is(err, trainer.ErrNoGPUs):
		if text := render.GPURefusal(l, err, nil); text != "" {
			return errors.New(text)
		}
		return errors.New(l.T(i18n.GPUNone, err.Error()))
	}
	return errors.New(l.T(i18n.NotStartedRaw, err.Error()))
}

// paramErrors words the parameter errors joined in err (as the chat).
func paramErrors(l i18n.Lang, err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var parts []string
	for _, e := range errs {
		if pe := (*trainer.ParamError)(nil); errors.As(e, &pe) {
			parts = append(parts, render.ParamErrorText(l, pe))
		} else {
			parts = append(parts, e.Error())
		}
	}
	return strings.Join(parts, l.T(i18n.ParamSep))
}

func (t *tools) stopRun(ctx context.Context, in runIn) (any, error) {
	id, err := t.active(in.Run)
	if err != nil {
		return nil, err
	}
	touched(ctx, id)
	if _, err := t.o.Trainer.Status(id); err != nil {
		if run, herr := t.o.History.Run(ctx, id); herr == nil {
			return nil, errors.New(t.l.T(i18n.AlreadyEnded, id, render.OutcomeWord(t.l, run.Outcome)))
		}
		return nil, errors.New(t.l.T(i18n.NoSuchRun, id))
	}
	run, err := t.o.Trainer.Stop(id, t.who())
	if err != nil {
		return nil, errors.New(t.l.T(i18n.EndedBefore, id))
	}
	sig := "SIGINT"
	for _, j := range t.o.Trainer.Jobs() {
		if j.Name == run.Job && j.Signals.Stop != 0 {
			sig = trainer.SignalName(int(j.Signals.Stop))
		}
	}
	return map[string]any{"run": run.ID, "stopping": true, "text": t.l.T(i18n.Stopping, run.ID, run.Job, sig)}, nil
}

func (t *tools) queueRun(ctx context.Context, in startIn) (any, error) {
	job, err := t.job(in.Job)
	if err != nil {
		return nil, err
	}
	e, pos, err := t.o.Trainer.Enqueue(ctx, trainer.StartRequest{Job: job, Params: in.Params, By: t.who(), Note: in.Note},
		fmt.Sprintf("%s:%d", Transport, t.o.User.ID))
	switch {
	case errors.Is(err, trainer.ErrBadParam):
		return nil, errors.New(t.l.T(i18n.NotQueuedP, paramErrors(t.l, err)))
	case err != nil:
		return nil, errors.New(t.l.T(i18n.NotQueuedErr, err.Error()))
	}
	return map[string]any{"queued": e.ID, "job": e.Job, "params": e.Params, "position": pos}, nil
}

type compareIn struct {
	Runs   []int64 `json:"runs" jsonschema:"the run ids, 2 to 8"`
	Metric string  `json:"metric,omitempty" jsonschema:"the metric (default loss)"`
}

type compareOut struct {
	runOut
	DurationSec float64  `json:"duration_s"`
	PeakGPUMem  *int64   `json:"peak_gpu_mem_bytes,omitempty"`
	PeakHostMem *int64   `json:"peak_host_mem_bytes,omitempty"`
	Last        *float64 `json:"last,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	MinStep     *int64   `json:"min_step,omitempty"`
	Max         *float64 `json:"max,omitempty"`
	MaxStep     *int64   `json:"max_step,omitempty"`
}

func (t *tools) compareRuns(ctx context.Context, in compareIn) (any, error) {
	if len(in.Runs) < 2 || len(in.Runs) > 8 {
		return nil, fmt.Errorf("runs: want 2 to 8 run ids, got %d", len(in.Runs))
	}
	metric := cmpOr(in.Metric, "loss")
	out := []compareOut{}
	for _, id := range in.Runs {
		run, err := t.o.History.Run(ctx, id)
		if err != nil {
			return nil, errors.New(t.l.T(i18n.NoSuchRun, id))
		}
		o := compareOut{runOut: runJSON(run), PeakGPUMem: run.PeakGPUMem, PeakHostMem: run.PeakHostMem}
		end := run.EndedAt
		if end.IsZero() {
			end = time.Now()
		}
		o.DurationSec = end.Sub(run.StartedAt).Seconds()
		if last, err := t.o.History.LastValues(ctx, id); err == nil {
			if v, ok := last[metric]; ok {
				o.Last = num(v)
			}
		}
		if ext, err := t.o.History.MetricExtremes(ctx, id); err == nil {
			if e, ok := ext[metric]; ok {
				o.Min, o.Max, o.MinStep, o.MaxStep = num(e.Min), num(e.Max), &e.MinStep, &e.MaxStep
			}
		}
		out = append(out, o)
	}
	return map[string]any{"metric": metric, "runs": out}, nil
}

type fitIn struct {
	Job   string `json:"job" jsonschema:"the job"`
	Param string `json:"param,omitempty" jsonschema:"the numeric parameter (default: the one on_oom halves, else batch_size, bs or batch)"`
	Limit int64  `json:"limit,omitempty" jsonschema:"memory to stay under in bytes (default: the GPU's total, or the host's available memory)"`
}

func (t *tools) fitBatch(ctx context.Context, in fitIn) (any, error) {
	if in.Job == "" {
		return nil, errors.New("job is required (list_jobs lists them)")
	}
	var job *trainer.Job // nil for a job no longer configured: its runs still fit
	for _, j := range t.o.Trainer.Jobs() {
		if j.Name == in.Job {
			job = j
		}
	}
	f, source, err := t.o.Fit(ctx, render.FitOptions{Job: job, Name: in.Job, Param: in.Param, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	text := render.FitText(t.l, f, source)
	if !f.OK() {
		return nil, errors.New(text)
	}
	runs := f.Runs
	if runs == nil {
		runs = []int64{}
	}
	return map[string]any{"job": f.Job, "param": f.Param, "max_fit": f.MaxFit, "limit_bytes": f.Limit, "a_bytes": f.A,
		"b_bytes_per_unit": f.B, "r2": num(f.R2), "runs": runs, "text": text}, nil
}

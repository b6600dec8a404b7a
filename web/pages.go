package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer"
)

//go:embed assets
var assetsFS embed.FS

//go:embed templates/*.html
var templatesFS embed.FS

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"json": func(v any) (template.JS, error) {
		b, err := json.Marshal(v)
		return template.JS(b), err
	},
}).ParseFS(templatesFS, "templates/*.html"))

// History is what the run pages read of the history (*store.Store is
// one): runs, metric points, memory and GPU samples.
type History interface {
	// Run returns one run, or history.ErrNotFound.
	Run(ctx context.Context, id int64) (*trainer.Run, error)
	// Runs returns runs, newest first.
	Runs(ctx context.Context, f history.RunFilter) ([]*trainer.Run, error)
	// LastValues returns the latest value of each metric of a run.
	LastValues(ctx context.Context, runID int64) (map[string]float64, error)
	// MetricNames returns the names of the metrics a run logged, losses first.
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	// StepValues returns the steps and values of one metric of a run whose
	// steps lie in [from, to], in step order.
	StepValues(ctx context.Context, runID int64, name string, from, to int64) (steps []int64, values []float64, err error)
	// RunMemorySeries returns a run's memory samples in time order.
	RunMemorySeries(ctx context.Context, runID int64) ([]history.RunMemory, error)
	// DevicesBetween returns, in order, the devices sampled between two instants.
	DevicesBetween(ctx context.Context, from, to time.Time) ([]int, error)
	// DeviceSeries returns one device's samples between two instants, in time order.
	DeviceSeries(ctx context.Context, device int, from, to time.Time) ([]history.DeviceSample, error)
}

// Pages are the read-only run pages: what they read and how they check
// the tokens. Every field but Live, Now and Tail is required.
type Pages struct {
	// Store is the history: runs, metric points, memory and GPU samples.
	Store History
	// Status returns an active run's live status (trainer.Supervisor.Status);
	// an error means the run is not active here.
	Status func(runID int64) (trainer.Status, error)
	// Tail returns up to n of the last output lines of a run (nil: none
	// shown).
	Tail func(r *trainer.Run, n int) ([]string, error)
	// Signer checks the tokens (LoadKey).
	Signer *Signer
	// Live is how often the live updates of a running run are sent
	// (default 2 s).
	Live time.Duration
	// Now is the clock the tokens are checked against (nil: time.Now).
	Now func() time.Time
	// CLI are the flags the trainbot link command the 401 page suggests
	// needs to read this bot's config ("--config FILE"; "" when the
	// command's own lookup finds it).
	CLI string

	sums summaries
}

// Limits of the API.
const (
	maxWidth     = 4096 // pixels a chart may ask for
	defaultWidth = 600
	logLines     = 40
	listLimit    = 200
	apiTimeout   = 10 * time.Second
	maxCompare   = 8
)

// register adds the pages to mux.
func (p *Pages) register(mux *http.ServeMux, s *Server) {
	if p.Live <= 0 {
		p.Live = 2 * time.Second
	}
	assets, _ := fs.Sub(assetsFS, "assets")
	files := http.FileServerFS(assets)
	// The assets are the same for everyone and hold no data: no token.
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})))
	mux.HandleFunc("GET /{$}", p.guard(0, p.list))
	mux.HandleFunc("GET /runs/{id}", p.guard(-1, p.run))
	mux.HandleFunc("GET /compare", p.guard(0, p.compare))
	mux.HandleFunc("GET /api/runs/{id}/points", p.guard(-1, p.points))
	mux.HandleFunc("GET /api/runs/{id}/samples", p.guard(-1, p.samples))
	mux.HandleFunc("GET /api/runs/{id}/events", p.guard(-1, func(w http.ResponseWriter, r *http.Request) { p.events(w, r, s.stop) }))
}

// guard checks the request's token (the t parameter) before h: for run
// -1 against the run of the path, for 0 against the list. A missing,
// forged, expired or other page's token gets 401 and a page that says how
// to get a fresh link.
func (p *Pages) guard(run int64, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer") // the token stays here
		w.Header().Set("X-Robots-Tag", "noindex")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "+frameAncestors)
		want := run
		if run < 0 {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil || id <= 0 {
				http.NotFound(w, r)
				return
			}
			want = id
		}
		now := time.Now()
		if p.Now != nil {
			now = p.Now()
		}
		scope, err := p.Signer.Verify(r.URL.Query().Get("t"), now)
		if err == nil && !scope.Allows(want) {
			err = ErrOtherScope
		}
		if err == nil && r.URL.Path == "/compare" && scope != ScopeList {
			err = ErrOtherScope // a comparison needs the list's token
		}
		if err != nil {
			p.unauthorized(w, r, want, err)
			return
		}
		h(w, r)
	}
}

func (p *Pages) unauthorized(w http.ResponseWriter, r *http.Request, run int64, err error) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	link := "trainbot link"
	if p.CLI != "" {
		link += " " + p.CLI
	}
	p.render(w, "denied.html", map[string]any{"Reason": err.Error(), "Run": run, "Link": link})
}

func (p *Pages) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplates.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "<p>page error: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

func httpError(w http.ResponseWriter, err error) {
	if errors.Is(err, history.ErrNotFound) {
		http.Error(w, "no such run", http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// runRow is one run in the list.
type runRow struct {
	ID                        int64
	Job, State, Started, Took string
	Loss, LossName            string
	PeakGPU, PeakHost         string
	GPUs                      string // the indices of the GPUs it was given: "0, 3"
	Running                   bool
	Steps                     int64
	Note                      string
	Host                      string // the host it runs on, "" for this host
}

func (p *Pages) list(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	runs, err := p.Store.Runs(ctx, history.RunFilter{Limit: listLimit})
	if err != nil {
		httpError(w, err)
		return
	}
	rows := make([]runRow, 0, len(runs))
	for _, run := range runs {
		row := runRow{ID: run.ID, Job: run.Job, State: stateText(run), Started: run.StartedAt.Format("2006-01-02 15:04"),
			Took: units.Duration(duration(run)), Running: run.State == trainer.StateRunning, Steps: run.Steps, Note: run.Note, Host: run.Host}
		if run.PeakGPUMem != nil {
			row.PeakGPU = units.Bytes(*run.PeakGPUMem)
		}
		if run.PeakHostMem != nil {
			row.PeakHost = units.Bytes(*run.PeakHostMem)
		}
		if len(run.GPUs) > 0 {
			row.GPUs = strings.ReplaceAll(trainer.GPUList(run.GPUs), ",", ", ")
		}
		if last, err := p.Store.LastValues(ctx, run.ID); err == nil {
			if name, ok := mainLoss(last); ok {
				row.LossName, row.Loss = name, units.Metric(name, last[name])
			}
		}
		rows = append(rows, row)
	}
	p.render(w, "list.html", map[string]any{"Runs": rows, "Token": r.URL.Query().Get("t")})
}

// mainLoss picks the loss the list shows: "loss", else the first name
// that is a loss.
func mainLoss(last map[string]float64) (string, bool) {
	for _, n := range []string{"loss", "train_loss", "train/loss"} {
		if _, ok := last[n]; ok {
			return n, true
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range last {
			if trainer.IsLossName(n) && !yield(n) {
				return
			}
		}
	})
	if len(names) == 0 {
		return "", false
	}
	return names[0], true
}

func duration(r *trainer.Run) time.Duration {
	if r.EndedAt.IsZero() {
		return time.Since(r.StartedAt).Round(time.Second)
	}
	return r.EndedAt.Sub(r.StartedAt).Round(time.Second)
}

func stateText(r *trainer.Run) string {
	if r.State == trainer.StateRunning {
		return "running"
	}
	return string(r.Outcome)
}

// pageRun is what the run page's script gets.
type pageRun struct {
	ID      int64             `json:"id"`
	Job     string            `json:"job"`
	Token   string            `json:"token"`
	Running bool              `json:"running"`
	State   string            `json:"state"`
	Steps   int64             `json:"steps"`
	Total   int64             `json:"total"`
	Losses  []string          `json:"losses"`
	Metrics []string          `json:"metrics"`
	Params  map[string]string `json:"params"`
	Start   int64             `json:"start"` // Unix ms
	End     int64             `json:"end"`   // Unix ms; 0 while running
	// Changes are the run's live changes (调参), drawn on the loss chart
	// as markers at their step.
	Changes []pageChange `json:"changes"`
}

// pageChange is one live change as the page draws it.
type pageChange struct {
	Step  int64  `json:"step"`
	Label string `json:"label"`
}

// changeHistory is a History that keeps the runs' live changes (the
// store does).
type changeHistory interface {
	RunChanges(ctx context.Context, runID int64) ([]trainer.LiveChange, error)
}

func (p *Pages) run(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	run, err := p.runOf(ctx, r)
	if err != nil {
		httpError(w, err)
		return
	}
	names, err := p.Store.MetricNames(ctx, run.ID)
	if err != nil {
		httpError(w, err)
		return
	}
	pr := pageRun{ID: run.ID, Job: run.Job, Token: r.URL.Query().Get("t"), Running: run.State == trainer.StateRunning,
		State: stateText(run), Steps: run.Steps, Total: run.Total, Metrics: names, Params: run.Params,
		Start: run.StartedAt.UnixMilli()}
	if !run.EndedAt.IsZero() {
		pr.End = run.EndedAt.UnixMilli()
	}
	for _, n := range names {
		if trainer.IsLossName(n) {
			pr.Losses = append(pr.Losses, n)
		}
	}
	pr.Changes = []pageChange{}
	if ch, ok := p.Store.(changeHistory); ok {
		changes, _ := ch.RunChanges(ctx, run.ID) // without them the chart is drawn without markers
		for _, c := range changes {
			pr.Changes = append(pr.Changes, pageChange{Step: c.Step, Label: c.Label()})
		}
	}
	var lines []string
	if p.Tail != nil {
		lines, _ = p.Tail(run, logLines)
	}
	params := slices.Sorted(func(yield func(string) bool) {
		for k := range run.Params {
			if !yield(k) {
				return
			}
		}
	})
	p.render(w, "run.html", map[string]any{"Run": run, "Page": pr, "State": pr.State, "Log": strings.Join(lines, "\n"),
		"ParamNames": params, "Took": units.Duration(duration(run)), "Token": pr.Token})
}

func (p *Pages) runOf(ctx context.Context, r *http.Request) (*trainer.Run, error) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return p.Store.Run(ctx, id)
}

func (p *Pages) compare(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	var runs []pageRun
	seen := map[string]bool{}
	var metrics []string
	for _, f := range strings.FieldsFunc(r.URL.Query().Get("runs"), func(c rune) bool { return c == ',' || c == ' ' }) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || len(runs) == maxCompare {
			continue
		}
		run, err := p.Store.Run(ctx, id)
		if err != nil {
			continue
		}
		names, _ := p.Store.MetricNames(ctx, id)
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				metrics = append(metrics, n)
			}
		}
		runs = append(runs, pageRun{ID: run.ID, Job: run.Job, State: stateText(run), Steps: run.Steps, Metrics: names})
	}
	slices.SortStableFunc(metrics, func(a, b string) int {
		la, lb := trainer.IsLossName(a), trainer.IsLossName(b)
		switch {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return strings.Compare(a, b)
	})
	tok := r.URL.Query().Get("t")
	p.render(w, "compare.html", map[string]any{"Runs": runs, "Token": tok,
		"Page": map[string]any{"token": tok, "runs": runs, "metrics": metrics}})
}

// apiRun starts an /api/runs/ID call: a context bounded by apiTimeout
// (cancel it), the run, and the chart's width (?width=, in pixels); ok is
// false when the run could not be read, which is answered.
func (p *Pages) apiRun(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, *trainer.Run, int, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	run, err := p.runOf(ctx, r)
	if err != nil {
		httpError(w, err)
		return ctx, cancel, nil, 0, false
	}
	return ctx, cancel, run, intParam(r.URL.Query().Get("width"), defaultWidth, 1, maxWidth), true
}

// pointsReply is /api/runs/ID/points.
type pointsReply struct {
	Metric string `json:"metric"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Width  int    `json:"width"`
	Series
}

// points answers ?metric=NAME&from=STEP&to=STEP&width=PX with the metric's
// points in [from, to] (all when absent) reduced to at most two per pixel.
func (p *Pages) points(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, run, width, ok := p.apiRun(w, r)
	defer cancel()
	if !ok {
		return
	}
	q := r.URL.Query()
	from, hasFrom := int64Param(q.Get("from"))
	to, hasTo := int64Param(q.Get("to"))
	metric := q.Get("metric")
	out := pointsReply{Metric: metric, Width: width, Series: Series{X: []int64{}, Y: []float64{}}}
	sum, err := p.summary(ctx, run, metric)
	if err != nil {
		httpError(w, err)
		return
	}
	if sum.empty {
		writeJSON(w, out)
		return
	}
	if !hasFrom {
		from = sum.from
	}
	if !hasTo {
		to = sum.to
	}
	out.From, out.To = from, to
	switch {
	case to < from:
	case sum.covers(from, to, width):
		out.Series = Downsample(sum.pts.X, sum.pts.Y, from, to, width)
		if !hasFrom && !hasTo {
			out.Skipped = sum.pts.Skipped
		}
	default: // a narrow zoom: its few points from the store
		steps, values, err := p.stepValues(ctx, run, metric, from, to)
		if err != nil {
			httpError(w, err)
			return
		}
		out.Series = Downsample(steps, values, from, to, width)
	}
	writeJSON(w, out)
}

// samplesReply is /api/runs/ID/samples: the run's memory and the GPUs'
// utilisation over its lifetime, x in Unix milliseconds.
type samplesReply struct {
	From int64        `json:"from"`
	To   int64        `json:"to"`
	GPU  Series       `json:"gpu"`  // bytes held by the run's processes
	Host Series       `json:"host"` // resident host memory
	Util []deviceUtil `json:"util"`
}

type deviceUtil struct {
	Device int    `json:"device"`
	Name   string `json:"name"`
	Series
}

func (p *Pages) samples(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, run, width, ok := p.apiRun(w, r)
	defer cancel()
	if !ok {
		return
	}
	q := r.URL.Query()
	end := run.EndedAt
	if end.IsZero() {
		end = time.Now()
	}
	from, to := run.StartedAt.UnixMilli(), end.UnixMilli()
	if v, ok := int64Param(q.Get("from")); ok {
		from = v
	}
	if v, ok := int64Param(q.Get("to")); ok {
		to = v
	}
	mem, err := p.Store.RunMemorySeries(ctx, run.ID)
	if err != nil {
		httpError(w, err)
		return
	}
	xs := make([]int64, len(mem))
	gpu, host := make([]float64, len(mem)), make([]float64, len(mem))
	for i, m := range mem {
		xs[i] = m.T.UnixMilli()
		gpu[i], host[i] = optional(m.GPUBytes), optional(m.HostBytes)
	}
	out := samplesReply{From: from, To: to, GPU: Downsample(xs, gpu, from, to, width), Host: Downsample(xs, host, from, to, width)}
	out.GPU.Skipped, out.Host.Skipped = 0, 0 // no sample is not a NaN
	devs, err := p.Store.DevicesBetween(ctx, time.UnixMilli(from), time.UnixMilli(to))
	if err != nil {
		httpError(w, err)
		return
	}
	for _, d := range devs {
		ds, err := p.Store.DeviceSeries(ctx, d, time.UnixMilli(from), time.UnixMilli(to))
		if err != nil {
			httpError(w, err)
			return
		}
		xs, ys := make([]int64, 0, len(ds)), make([]float64, 0, len(ds))
		name := ""
		for _, s := range ds {
			name = s.Name
			if s.Util < 0 {
				continue
			}
			xs, ys = append(xs, s.T.UnixMilli()), append(ys, float64(s.Util))
		}
		out.Util = append(out.Util, deviceUtil{Device: d, Name: name, Series: Downsample(xs, ys, from, to, width)})
	}
	writeJSON(w, out)
}

func optional(v *int64) float64 {
	if v == nil {
		return math.NaN()
	}
	return float64(*v)
}

// liveEvent is one Server-Sent Event of a run page.
type liveEvent struct {
	State       string             `json:"state"`
	Running     bool               `json:"running"`
	Step        int64              `json:"step"`
	Total       int64              `json:"total"`
	StepsPerSec float64            `json:"steps_per_sec"`
	Last        map[string]float64 `json:"last,omitempty"`
	Log         []string           `json:"log,omitempty"`
}

// events streams a liveEvent every Live while the run is active, then one
// last event with its outcome, and ends; it ends too when the client goes
// or the server closes (stop).
func (p *Pages) events(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	// The stream outlives the server's write timeout: each event gets
	// one of its own. (The read timeout ends with the request: net/http
	// clears it when it starts watching for the client to go.)
	rc := http.NewResponseController(w)
	tick := time.NewTicker(p.Live)
	defer tick.Stop()
	lastLog := ""
	for {
		ev, err := p.liveEvent(r.Context(), id)
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
			flusher.Flush()
			return
		}
		if l := strings.Join(ev.Log, "\n"); l == lastLog {
			ev.Log = nil // unchanged: not sent again
		} else {
			lastLog = l
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flusher.Flush()
		if !ev.Running {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-stop:
			return
		}
	}
}

func (p *Pages) liveEvent(ctx context.Context, id int64) (liveEvent, error) {
	if st, err := p.Status(id); err == nil {
		ev := liveEvent{State: "running", Running: true, Step: st.Progress.Step, Total: st.Progress.TotalSteps,
			StepsPerSec: st.StepsPerSec, Last: map[string]float64{}}
		for _, m := range st.Last {
			if !math.IsNaN(m.Value) && !math.IsInf(m.Value, 0) {
				ev.Last[m.Name] = m.Value
			}
		}
		if p.Tail != nil {
			ev.Log, _ = p.Tail(st.Run, logLines)
		}
		return ev, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	run, err := p.Store.Run(ctx, id)
	if err != nil {
		return liveEvent{}, err
	}
	ev := liveEvent{State: stateText(run), Running: false, Step: run.Steps, Total: run.Total}
	if p.Tail != nil {
		ev.Log, _ = p.Tail(run, logLines)
	}
	return ev, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write(b)
}

func intParam(s string, def, lo, hi int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return min(max(n, lo), hi)
}

func int64Param(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Package mcpserver is trainbot for coding agents: a Model Context
// Protocol server (github.com/modelcontextprotocol/go-sdk) whose tools read
// the same history as the chat (jobs, runs, status, points, log, GPUs) and,
// when the config allows control, start, stop and queue runs through the
// same supervisor, with the same validation, locks and queue as 开始. Every
// call is audited as messenger "mcp" by the local user; errors are tool
// errors with the chat's clear text. cmd/trainbot wires it (trainbot mcp).
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// Transport is the messenger name the audit records MCP calls under.
const Transport = "mcp"

// Trainer is what the tools need of the supervisor.
type Trainer interface {
	Jobs() []*trainer.Job
	Start(ctx context.Context, req trainer.StartRequest) (*trainer.Run, error)
	Stop(runID int64, by string) (*trainer.Run, error)
	Active() []trainer.Status
	Status(runID int64) (trainer.Status, error)
	Tail(runID int64, n int) ([]string, error)
	Enqueue(ctx context.Context, req trainer.StartRequest, userID string) (trainer.QueueEntry, int, error)
}

// History is what the tools need of the store.
type History interface {
	Run(ctx context.Context, id int64) (*trainer.Run, error)
	Runs(ctx context.Context, f history.RunFilter) ([]*trainer.Run, error)
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	Series(ctx context.Context, runID int64, name string) ([]history.Point, error)
	LastValues(ctx context.Context, runID int64) (map[string]float64, error)
	MetricExtremes(ctx context.Context, runID int64) (map[string]history.Extremes, error)
	Audit(ctx context.Context, e history.AuditEntry) (int64, error)
	AuditRun(ctx context.Context, id, runID int64) error
}

// User is who the calls are audited as: the local user (the process's).
type User struct {
	ID   int64
	Name string
}

// Options are what New needs.
type Options struct {
	Trainer Trainer
	History History
	// GPU is what `trainbot gpu --json` prints (gpu.ToJSON); nil: the
	// gpu_status tool is not offered.
	GPU func(ctx context.Context) any
	// Fit is render.MemoryFit over the store (the 适配 answer); nil: the
	// fit_batch tool is not offered.
	Fit func(ctx context.Context, o render.FitOptions) (trainer.MemoryFit, string, error)
	// Chart draws a run's chart as a PNG: kind "loss" or "memory" (the
	// 画图 images); nil: no chart resources.
	Chart func(ctx context.Context, run int64, kind string) ([]byte, error)
	// AllowControl is [mcp] allow_control: start_run, stop_run and
	// queue_run are offered only with it.
	AllowControl bool
	User         User
	Version      string
	Logger       *slog.Logger
}

// Control tools: offered only with allow_control.
var controlTools = []string{"start_run", "stop_run", "queue_run"}

// ControlDisabled is the refusal of a control tool without allow_control.
const ControlDisabled = "%s is not allowed: this trainbot's config does not let coding agents start or stop runs. To allow it, add\n\n[mcp]\nallow_control = true\n\nto the config and restart trainbot mcp."

// New makes the server with its tools.
func New(o Options) *mcp.Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &tools{o: o, l: i18n.En}
	s := mcp.NewServer(&mcp.Implementation{Name: "trainbot", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "trainbot supervises deep-learning training runs on this machine: list_jobs and list_runs to see what exists, run_status, run_points and run_log to watch a run" +
			map[bool]string{true: ", start_run, stop_run and queue_run to control runs (the same locks and queue as the chat).", false: " (starting and stopping is off: [mcp] allow_control)."}[o.AllowControl],
	})
	t.add(s)
	if o.Chart != nil {
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: ChartURITemplate, Name: "run chart", MIMEType: "image/png",
			Description: "A run's chart as 画图 draws it: kind loss (every loss metric, raw and smoothed) or memory (GPU and host memory)."}, t.chart)
	}
	s.AddReceivingMiddleware(t.audit)
	return s
}

// ChartURITemplate names the chart resources: trainbot://runs/12/loss.png.
const ChartURITemplate = "trainbot://runs/{run}/{kind}.png"

// chart reads a chart resource.
func (t *tools) chart(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, ok := strings.CutPrefix(uri, "trainbot://runs/")
	idText, file, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseInt(idText, 10, 64)
	kind, isPNG := strings.CutSuffix(file, ".png")
	if !ok || err != nil || id <= 0 || !isPNG || (kind != "loss" && kind != "memory") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	png, err := t.o.Chart(ctx, id, kind)
	if err != nil {
		return nil, fmt.Errorf("run #%d's %s chart: %w", id, kind, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "image/png", Blob: png}}}, nil
}

type tools struct {
	o Options
	l i18n.Lang
	// known are the tools offered.
	known []string
}

// runKey is where a tool puts the run it touched, for the audit.
type runKey struct{}

// touched records the run a call touched.
func touched(ctx context.Context, id int64) {
	if p, ok := ctx.Value(runKey{}).(*int64); ok && id != 0 {
		*p = id
	}
}

// audit records every tool call before it is carried out, refuses the
// control tools without allow_control (a tool error that says how to
// allow them), and adds the run a call touched once it is known.
func (t *tools) audit(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if read, ok := req.(*mcp.ReadResourceRequest); ok && method == "resources/read" && read.Params != nil {
			t.record(ctx, history.AuditEntry{Transport: Transport, User: t.o.User.ID, UserName: t.o.User.Name,
				Text: render.Clip("read_resource "+read.Params.URI, 200), Command: "read_resource", Allowed: true})
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		name := call.Params.Name
		entry := history.AuditEntry{Transport: Transport, User: t.o.User.ID, UserName: t.o.User.Name,
			Text: render.Clip(name+" "+string(call.Params.Arguments), 200), Command: name, Allowed: true}
		var args struct {
			Run int64 `json:"run"`
		}
		_ = json.Unmarshal(call.Params.Arguments, &args)
		entry.Run = args.Run
		if slices.Contains(controlTools, name) && !t.o.AllowControl {
			entry.Allowed, entry.Reason = false, "allow_control is off"
			t.record(ctx, entry)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(ControlDisabled, name)}}}, nil
		}
		if !slices.Contains(t.known, name) {
			entry.Allowed, entry.Reason = false, "unknown tool"
			t.record(ctx, entry)
			return next(ctx, method, req)
		}
		id := t.record(ctx, entry)
		var run int64
		res, err := next(context.WithValue(ctx, runKey{}, &run), method, req)
		if id != 0 && run != 0 && run != entry.Run {
			if err := t.o.History.AuditRun(context.WithoutCancel(ctx), id, run); err != nil {
				t.o.Logger.Warn("audit", "err", err)
			}
		}
		return res, err
	}
}

func (t *tools) record(ctx context.Context, e history.AuditEntry) int64 {
	id, err := t.o.History.Audit(context.WithoutCancel(ctx), e)
	if err != nil {
		t.o.Logger.Warn("audit", "err", err)
	}
	return id
}

// addTool adds one tool and remembers its name.
func addTool[In any](t *tools, s *mcp.Server, name, desc string, readOnly bool, h func(context.Context, In) (any, error)) {
	t.known = append(t.known, name)
	ann := &mcp.ToolAnnotations{ReadOnlyHint: readOnly}
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, Annotations: ann},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			out, err := h(ctx, in)
			if err != nil {
				return nil, nil, err
			}
			return nil, out, nil
		})
}

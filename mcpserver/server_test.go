package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

type fakeTrainer struct {
	active []trainer.Status
	tail   []string
}

func (f *fakeTrainer) Jobs() []*trainer.Job { return []*trainer.Job{{Name: "mnist"}} }
func (f *fakeTrainer) Start(context.Context, trainer.StartRequest) (*trainer.Run, error) {
	return nil, &trainer.BusyError{Active: &f.active[0]}
}
func (f *fakeTrainer) Stop(int64, string) (*trainer.Run, error) { return nil, errors.New("no") }
func (f *fakeTrainer) Active() []trainer.Status                 { return f.active }
func (f *fakeTrainer) Status(id int64) (trainer.Status, error) {
	for _, st := range f.active {
		if st.Run.ID == id {
			return st, nil
		}
	}
	return trainer.Status{}, errors.New("not active")
}
func (f *fakeTrainer) Tail(int64, int) ([]string, error) { return f.tail, nil }
func (f *fakeTrainer) Enqueue(context.Context, trainer.StartRequest, string) (trainer.QueueEntry, int, error) {
	return trainer.QueueEntry{}, 0, errors.New("no")
}

type fakeHistory struct {
	mu     sync.Mutex
	points []history.Point
	audit  []history.AuditEntry
}

func (h *fakeHistory) Run(_ context.Context, id int64) (*trainer.Run, error) {
	if id == 7 {
		return &trainer.Run{ID: 7, Job: "mnist"}, nil
	}
	return nil, errors.New("not found")
}
func (h *fakeHistory) Runs(context.Context, history.RunFilter) ([]*trainer.Run, error) {
	return nil, nil
}
func (h *fakeHistory) MetricNames(_ context.Context, id int64) ([]string, error) {
	if id == 7 {
		return []string{"loss"}, nil
	}
	return nil, nil
}
func (h *fakeHistory) Series(context.Context, int64, string) ([]history.Point, error) {
	return h.points, nil
}
func (h *fakeHistory) LastValues(context.Context, int64) (map[string]float64, error) {
	return map[string]float64{"loss": 0.25}, nil
}
func (h *fakeHistory) MetricExtremes(context.Context, int64) (map[string]history.Extremes, error) {
	return map[string]history.Extremes{"loss": {Min: 0.2, Max: 2, MinStep: 90, MaxStep: 1}}, nil
}
func (h *fakeHistory) Audit(_ context.Context, e history.AuditEntry) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audit = append(h.audit, e)
	return int64(len(h.audit)), nil
}
func (h *fakeHistory) AuditRun(_ context.Context, id, run int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audit[id-1].Run = run
	return nil
}

func connect(t *testing.T, o Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestTools(t *testing.T) {
	active := trainer.Status{Run: &trainer.Run{ID: 12, Job: "mnist", State: trainer.StateRunning},
		Progress: logparse.Progress{Step: 40, Epoch: math.NaN()}, Last: []trainer.Metric{{Name: "loss", Value: math.NaN()}}}
	h := &fakeHistory{}
	for i := range 10000 {
		h.points = append(h.points, history.Point{Step: int64(i), Value: float64(i % 97)})
	}
	tr := &fakeTrainer{active: []trainer.Status{active}, tail: []string{"ok", "evil \x1b[2J"}}
	cs := connect(t, Options{Trainer: tr, History: h, AllowControl: true, User: User{ID: 1000, Name: "ann"}})

	// NaN is null in JSON, not a failed call.
	text, isErr := callText(t, cs, "run_status", nil)
	var st struct {
		ID      int64
		Step    int64
		Metrics map[string]*float64
	}
	if isErr || json.Unmarshal([]byte(text), &st) != nil || st.ID != 12 || st.Step != 40 || st.Metrics["loss"] != nil {
		t.Errorf("run_status: %v %s", isErr, text)
	}
	if text, isErr := callText(t, cs, "run_status", map[string]any{"run": 99}); !isErr || text != "There is no run #99." {
		t.Errorf("run_status 99: %v %q", isErr, text)
	}
	text, _ = callText(t, cs, "run_points", map[string]any{"run": 7, "from": 1000, "to": 1999, "max_points": 100})
	var pts struct {
		X      []int64
		Points int
	}
	if err := json.Unmarshal([]byte(text), &pts); err != nil || len(pts.X) == 0 || len(pts.X) > 100 || pts.X[0] < 1000 || pts.X[len(pts.X)-1] > 1999 || pts.Points != 10000 {
		t.Errorf("run_points: %v, %d points from %v", err, len(pts.X), pts.X)
	}
	if text, isErr := callText(t, cs, "run_points", map[string]any{"run": 7, "metric": "acc"}); !isErr || !strings.Contains(text, "it has: loss") {
		t.Errorf("run_points acc: %v %q", isErr, text)
	}
	text, _ = callText(t, cs, "run_log", nil)
	if !strings.Contains(text, `evil \\x1b[2J`) {
		t.Errorf("run_log does not escape: %s", text)
	}
	if text, isErr := callText(t, cs, "start_run", map[string]any{"job": "mnist"}); !isErr || !strings.Contains(text, "run #12 (mnist) is already running") {
		t.Errorf("busy start: %v %q", isErr, text)
	}
	text, isErr = callText(t, cs, "compare_runs", map[string]any{"runs": []int64{7, 7}})
	var cmp struct {
		Runs []struct {
			ID        int64
			Last, Min *float64
			MinStep   *int64 `json:"min_step"`
		}
	}
	if isErr || json.Unmarshal([]byte(text), &cmp) != nil || len(cmp.Runs) != 2 || *cmp.Runs[0].Last != 0.25 || *cmp.Runs[1].Min != 0.2 || *cmp.Runs[1].MinStep != 90 {
		t.Errorf("compare_runs: %v %s", isErr, text)
	}
	if text, isErr := callText(t, cs, "compare_runs", map[string]any{"runs": []int64{7}}); !isErr || !strings.Contains(text, "2 to 8") {
		t.Errorf("compare_runs of one: %v %q", isErr, text)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.audit) != 8 {
		t.Fatalf("audit has %d entries, want 8: %+v", len(h.audit), h.audit)
	}
	for _, e := range h.audit {
		if e.Transport != "mcp" || e.User != 1000 || e.UserName != "ann" || !e.Allowed {
			t.Errorf("audit entry %+v", e)
		}
	}
	if e := h.audit[5]; e.Command != "start_run" || e.Run != 12 || !strings.Contains(e.Text, "mnist") {
		t.Errorf("busy start audited as %+v", e)
	}
}

func TestControlNeedsAllowControl(t *testing.T) {
	h := &fakeHistory{}
	cs := connect(t, Options{Trainer: &fakeTrainer{}, History: h})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "start_run" || tool.Name == "stop_run" || tool.Name == "queue_run" {
			t.Errorf("%s listed without allow_control", tool.Name)
		}
	}
	for _, name := range []string{"start_run", "stop_run", "queue_run"} {
		if text, isErr := callText(t, cs, name, map[string]any{"run": 3}); !isErr || !strings.Contains(text, "allow_control = true") {
			t.Errorf("%s: %v %q", name, isErr, text)
		}
	}
	if len(h.audit) != 3 || h.audit[0].Allowed || h.audit[1].Run != 3 || !strings.Contains(h.audit[0].Reason, "allow_control") {
		t.Errorf("audit %+v", h.audit)
	}
}

// A run whose end the trainer knows but the database does not yet have is
// still ending: run_status must not say "ended" while list_runs (which
// reads the database) would not list it as ended.
func TestRunStatusEndingUntilRecorded(t *testing.T) {
	ending := trainer.Status{Run: &trainer.Run{ID: 5, Job: "mnist", State: trainer.StateEnded, Outcome: trainer.OutcomeStopped}}
	cs := connect(t, Options{Trainer: &fakeTrainer{active: []trainer.Status{ending}}, History: &fakeHistory{}})
	text, isErr := callText(t, cs, "run_status", map[string]any{"run": 5})
	var st struct {
		State, Outcome string
		Active         bool
		Stopping       bool
	}
	if isErr || json.Unmarshal([]byte(text), &st) != nil || st.State != "running" || st.Outcome != "running" || !st.Active || !st.Stopping {
		t.Errorf("run_status of an ending run: %v %s", isErr, text)
	}
}

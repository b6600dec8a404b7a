package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{FlushEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// timed gives points the time at.
func timed(at time.Time, pts ...logparse.Point) []trainer.TimedPoint {
	out := make([]trainer.TimedPoint, len(pts))
	for i, p := range pts {
		out[i] = trainer.TimedPoint{Point: p, At: at}
	}
	return out
}

func TestRunRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	start := time.Now().Truncate(time.Millisecond)
	r := &trainer.Run{Job: "j", Params: map[string]string{"bs": "32"}, Command: []string{"python3", "t.py"},
		State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: start, StartedBy: "ann", Origin: "console:0", Supervisor: 42}
	id, err := s.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	r.ID = id
	code := 0
	peak := int64(1 << 30)
	r.State, r.Outcome, r.ExitCode, r.EndedAt, r.Steps, r.Total, r.PeakHostMem = trainer.StateEnded, trainer.OutcomeFinished, &code, start.Add(time.Minute), 100, 200, &peak
	if err := s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Job != "j" || got.Params["bs"] != "32" || got.Command[1] != "t.py" || got.Outcome != trainer.OutcomeFinished ||
		*got.ExitCode != 0 || !got.StartedAt.Equal(start) || got.EndedAt.Sub(start) != time.Minute || got.Steps != 100 ||
		got.Total != 200 || *got.PeakHostMem != peak || got.PeakGPUMem != nil || got.Origin != "console:0" || got.StartedBy != "ann" {
		t.Fatalf("round trip lost something: %+v", got)
	}
	if _, err := s.Run(ctx, 999); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("got %v, want history.ErrNotFound", err)
	}
	if err := s.UpdateRun(ctx, &trainer.Run{ID: 999}); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("got %v, want history.ErrNotFound", err)
	}
}

// An end's facts are stored and read back, whatever decided them (a NaN
// streak, which JSON numbers cannot hold, a Slurm state, an interrupted
// run's orphans); a row without them reads with none.
func TestEndFactsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	until := time.Now().Truncate(time.Second)
	for _, f := range []*trainer.EndFacts{
		{Why: trainer.WhyStoppedNaN, StoppedBy: "trainbot (NaN loss)", NaN: &trainer.NaNStreak{Metric: "loss", Value: math.Inf(1), Count: 3, Step: 9}},
		{Why: trainer.WhySlurm, Signal: 15, Slurm: &trainer.SlurmEnd{JobID: "3", State: "TIMEOUT", Reason: "TimeLimit", Node: "n1", TimeLimit: "00:01:00"}},
		{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptSupervisorGone, SupervisorPID: 7, Orphans: &trainer.Orphans{PGID: 8, Until: until, StoppedBy: "ann", Signal: 9},
			EndNotes: trainer.EndNotes{Survivors: 1, UnseenRules: []trainer.UnseenRule{{Rule: "val_acc below 0.5", Metric: "val_acc"}}}},
		nil,
	} {
		r := &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: until.Add(-time.Hour)}
		id, err := s.CreateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		r.ID, r.State, r.Outcome, r.EndedAt, r.End = id, trainer.StateEnded, trainer.OutcomeInterrupted, until, f
		if f != nil {
			r.Detail = f.English()
		}
		if err := s.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			if got.End != nil {
				t.Errorf("a run without facts read back with %+v", got.End)
			}
			continue
		}
		if got.End == nil || got.End.Why != f.Why || got.End.English() != r.Detail {
			t.Errorf("%s: read back %+v (%q), want %q", f.Why, got.End, got.Detail, r.Detail)
		}
	}
}

// Parameters are stored as JSON numbers and booleans per their declared
// types, and read back as the same text; rows of earlier versions (strings)
// read as they are.
func TestTypedParams(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	r := &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now(),
		Params:     map[string]string{"bs": "32", "lr": "3e-4", "half": ".5", "amp": "true", "opt": "adam", "tag": "007"},
		ParamTypes: map[string]trainer.ParamType{"bs": "int", "lr": "float", "half": "float", "amp": "bool", "opt": "string", "tag": "string"}}
	id, err := s.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := s.r.QueryRow(`SELECT params FROM runs WHERE id = ?`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if raw != `{"amp":true,"bs":32,"half":0.5,"lr":3e-4,"opt":"adam","tag":"007"}` {
		t.Errorf("stored params %s", raw)
	}
	got, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bs": "32", "lr": "3e-4", "half": "0.5", "amp": "true", "opt": "adam", "tag": "007"}
	if !maps.Equal(got.Params, want) || got.ParamTypes["bs"] != "int" || got.ParamTypes["lr"] != "float" || got.ParamTypes["amp"] != "bool" || got.ParamTypes["tag"] != "" {
		t.Errorf("got %v %v, want %v", got.Params, got.ParamTypes, want)
	}
	if _, err := s.w.Exec(`UPDATE runs SET params = '{"bs":"64"}' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	got, err = s.Run(ctx, id)
	if err != nil || got.Params["bs"] != "64" || got.ParamTypes != nil || got.TypedParams()["bs"] != "64" {
		t.Errorf("an earlier row: %v %v %v", got.Params, got.ParamTypes, err)
	}
}

func TestPointsBatchedAndNaNKept(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	id, _ := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	for i := 1; i <= 12000; i++ {
		v := 1 / float64(i)
		if i == 12000 {
			v = math.NaN()
		}
		s.AddPoints(id, timed(time.Now(), logparse.Point{Step: int64(i), Epoch: math.NaN(), Name: "loss", Value: v}, logparse.Point{Step: int64(i), Epoch: 1, Name: "acc", Value: 0.5}))
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := s.PointCount(ctx, id)
	if n != 24000 {
		t.Fatalf("got %d points, want 24000", n)
	}
	pts, err := s.Series(ctx, id, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 12000 || pts[0].Value != 1 || !math.IsNaN(pts[11999].Value) || !math.IsNaN(pts[0].Epoch) {
		t.Fatalf("series wrong: first %+v last %+v", pts[0], pts[len(pts)-1])
	}
	last, _ := s.LastValues(ctx, id)
	if !math.IsNaN(last["loss"]) || last["acc"] != 0.5 {
		t.Fatalf("last values %v", last)
	}
	names, _ := s.MetricNames(ctx, id)
	if len(names) != 2 || names[0] != "loss" {
		t.Fatalf("names %v, want loss first", names)
	}
	if none, _ := s.Series(ctx, id, "nope"); len(none) != 0 {
		t.Fatal("unknown metric has points")
	}
}

func TestPointsSurviveClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	s.AddPoints(id, timed(time.Now(), logparse.Point{Step: 1, Name: "loss", Value: 0.5}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir)
	if n, _ := s2.PointCount(ctx, id); n != 1 {
		t.Fatalf("got %d points after reopen, want 1", n)
	}
	if err := s.Flush(ctx); err == nil {
		t.Fatal("flush of a closed store succeeded")
	}
}

func TestMigrationIsVersioned(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Fatalf("got version %d %v, want %d", v, err, len(migrations))
	}
	s.Close()
	// A newer schema than this binary knows is refused.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBName))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(`PRAGMA user_version = 999`)
	db.Close()
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func TestRunsNewestFirstAndRunning(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	for i := 0; i < 3; i++ {
		st := trainer.StateEnded
		if i == 2 {
			st = trainer.StateRunning
		}
		job := "a"
		if i == 1 {
			job = "b"
		}
		s.CreateRun(ctx, &trainer.Run{Job: job, State: st, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	}
	runs, _ := s.Runs(ctx, history.RunFilter{})
	if len(runs) != 3 || runs[0].ID != 3 {
		t.Fatalf("got %d runs, first %d", len(runs), runs[0].ID)
	}
	runs, _ = s.Runs(ctx, history.RunFilter{Job: "a", Limit: 1})
	if len(runs) != 1 || runs[0].ID != 3 {
		t.Fatalf("job filter: %+v", runs)
	}
	running, _ := s.RunningRuns(ctx)
	if len(running) != 1 || running[0].ID != 3 {
		t.Fatalf("running: %+v", running)
	}
	latest, err := s.LatestRun(ctx, "b")
	if err != nil || latest.ID != 2 {
		t.Fatalf("latest b: %v %v", latest, err)
	}
}

func TestAuditSubscriptionsAndKV(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if _, err := s.Audit(ctx, history.AuditEntry{Transport: "telegram", Chat: -100, User: 7, UserName: "eve", Text: "停止 3", Command: "stop", Reason: "not allowed", Run: 3}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Audit(ctx, history.AuditEntry{Transport: "telegram", Chat: 5, User: 5, UserName: "ann", Text: "开始", Command: "train", Allowed: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AuditRun(ctx, id, 4); err != nil { // the run it started
		t.Fatal(err)
	}
	log, err := s.AuditLog(ctx, history.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].User != 5 || log[0].Run != 4 || !log[0].Allowed || log[0].ID != id {
		t.Fatalf("audit, newest first: %+v", log)
	}
	if e := log[1]; e.User != 7 || e.Chat != -100 || e.Allowed || e.Text != "停止 3" || e.Run != 3 || e.Reason != "not allowed" || e.UserName != "eve" {
		t.Fatalf("audit of the stranger: %+v", e)
	}
	eve := int64(7)
	if log, _ := s.AuditLog(ctx, history.AuditFilter{User: &eve}); len(log) != 1 || log[0].UserName != "eve" {
		t.Fatalf("audit of user 7: %+v", log)
	}
	if log, _ := s.AuditLog(ctx, history.AuditFilter{Limit: 1}); len(log) != 1 || log[0].UserName != "ann" {
		t.Fatalf("audit, limit 1: %+v", log)
	}
	s.SetSubscribed(ctx, "telegram", 5, true)
	s.SetSubscribed(ctx, "telegram", 5, false)
	s.SetSubscribed(ctx, "telegram", 6, true)
	subs, _ := s.Subscriptions(ctx)
	if len(subs) != 2 || subs[0].Subscribed || !subs[1].Subscribed {
		t.Fatalf("subs %+v", subs)
	}
	if _, ok, _ := s.Get(ctx, "offset"); ok {
		t.Fatal("empty kv has a value")
	}
	s.Set(ctx, "offset", "1")
	s.Set(ctx, "offset", "2")
	if v, ok, _ := s.Get(ctx, "offset"); !ok || v != "2" {
		t.Fatalf("kv got %q %v", v, ok)
	}
}

func TestMemorySamples(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	id, _ := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	h := int64(100)
	now := time.Now().Truncate(time.Millisecond)
	if err := s.AddRunMemory(ctx, []history.RunMemory{{RunID: id, T: now, HostBytes: &h}, {RunID: id, T: now.Add(time.Second), HostBytes: &h}}); err != nil {
		t.Fatal(err)
	}
	mem, _ := s.RunMemorySeries(ctx, id)
	if len(mem) != 2 || mem[0].GPUBytes != nil || *mem[1].HostBytes != 100 || !mem[0].T.Equal(now) {
		t.Fatalf("memory %+v", mem)
	}
	if err := s.AddDeviceSamples(ctx, []history.DeviceSample{{T: now, Device: 0, Name: "H100", MemUsed: 1, MemTotal: 2, Util: 50, TempC: 60}}); err != nil {
		t.Fatal(err)
	}
	dev, _ := s.DeviceSeries(ctx, 0, now.Add(-time.Second), now.Add(time.Second))
	if len(dev) != 1 || dev[0].Name != "H100" || dev[0].Util != 50 {
		t.Fatalf("device %+v", dev)
	}
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine's logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Points dropped because the queue is full (the disk is slow or stuck) are
// counted and said in the log, once when it starts and once when points
// are written again: they used to be dropped without a word.
func TestDroppedPointsAreLogged(t *testing.T) {
	var logs syncBuffer
	s, err := Open(t.TempDir(), Options{MaxPending: 10, FlushEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pts := make([]logparse.Point, 25)
	for i := range pts {
		pts[i] = logparse.Point{Name: "loss", Step: int64(i), Epoch: math.NaN(), Value: 1}
	}
	s.AddPoints(1, timed(time.Now(), pts...))
	s.AddPoints(1, timed(time.Now(), pts...))
	if got := s.DroppedPoints(); got != 40 {
		t.Fatalf("dropped %d points, want 40", got)
	}
	if got := strings.Count(logs.String(), "metric points dropped"); got != 1 {
		t.Errorf("the drop is logged %d times, want once:\n%s", got, logs.String())
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "dropped=40") {
		t.Errorf("the log does not say how many were dropped once points are written again:\n%s", logs.String())
	}
}

// Two trainbot processes that open a data directory of an older schema at
// the same moment (after an upgrade: serve starting while someone runs
// trainbot runs) both migrate it: the second used to fail with "duplicate
// column name: retry_of".
// schemaOf is a database's schema version and every object of its
// schema, as SQLite stores their definitions.
func schemaOf(t *testing.T, path string) (int, []string) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var objects []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return v, objects
}

// execMigrations applies the first n migrations to a new database at path
// by hand, as a trainbot of schema n left it.
func execMigrations(t *testing.T, path string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v, m := range migrations[:n] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			t.Fatal(err)
		}
	}
}

// Four trainbots opening a database one migration behind at once: each
// open succeeds, and the result is the schema every migration applied once
// makes (applied by hand here, not by migrate).
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	ref := filepath.Join(t.TempDir(), DBName)
	execMigrations(t, ref, len(migrations))
	wantV, want := schemaOf(t, ref)
	for i := 0; i < 10; i++ {
		dir := t.TempDir()
		execMigrations(t, filepath.Join(dir, DBName), len(migrations)-1)
		errs := make(chan error, 4)
		for j := 0; j < cap(errs); j++ {
			go func() {
				s, err := Open(dir, Options{})
				if err == nil {
					err = s.Close()
				}
				errs <- err
			}()
		}
		for j := 0; j < cap(errs); j++ {
			if err := <-errs; err != nil {
				t.Fatalf("open %d: %v", j, err)
			}
		}
		v, got := schemaOf(t, filepath.Join(dir, DBName))
		if v != wantV {
			t.Fatalf("schema version %d after the opens, want %d", v, wantV)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("schema after the opens:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A run keeps its parameters' declared min and max (for a memory fit
// without the config); a run with none stores NULL and reads nil.
func TestParamRangesKept(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	lo, hi := 1.0, 4096.0
	r := &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now(),
		Params: map[string]string{"bs": "32"}, ParamRanges: map[string]trainer.ParamRange{"bs": {Min: &lo, Max: &hi}, "lr": {Max: &lo}}}
	id, err := s.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := s.r.QueryRow(`SELECT param_ranges FROM runs WHERE id = ?`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if raw != `{"bs":{"min":1,"max":4096},"lr":{"max":1}}` {
		t.Errorf("stored ranges %s", raw)
	}
	got, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.ParamRanges["bs"]; b.Min == nil || *b.Min != 1 || b.Max == nil || *b.Max != 4096 || got.ParamRanges["lr"].Min != nil {
		t.Errorf("read back %+v", got.ParamRanges)
	}
	got.ParamRanges = nil
	if err := s.UpdateRun(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Run(ctx, id); err != nil || got.ParamRanges != nil {
		t.Errorf("after an update without ranges: %+v %v", got.ParamRanges, err)
	}
}

// Flush returns once the points queued before it are written, while a
// training goes on printing faster than the writer writes (it waited for
// an empty queue, which under a steady stream never came: a chart asked
// for on a loaded host never came either).
func TestFlushUnderAStreamThatOutrunsTheWriter(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour, MaxPending: 5000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := make([]logparse.Point, 500)
	for i := range before {
		before[i] = logparse.Point{Name: "loss", Step: int64(i), Epoch: math.NaN(), Value: 1}
	}
	s.AddPoints(1, timed(time.Now(), before...))
	stop := make(chan struct{})
	streamed := make(chan struct{})
	go func() { // bounded: until Flush returns, or 30 s
		defer close(streamed)
		deadline := time.Now().Add(30 * time.Second)
		for step := int64(len(before)); time.Now().Before(deadline); step += 50 {
			select {
			case <-stop:
				return
			default:
			}
			pts := make([]logparse.Point, 50)
			for i := range pts {
				pts[i] = logparse.Point{Name: "loss", Step: step + int64(i), Epoch: math.NaN(), Value: 1}
			}
			s.AddPoints(1, timed(time.Now(), pts...))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = s.Flush(ctx)
	close(stop)
	<-streamed
	if err != nil {
		t.Fatalf("Flush under a stream: %v", err)
	}
	got, err := s.Series(context.Background(), 1, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < len(before) {
		t.Errorf("%d points written after Flush, want the %d queued before it at least", len(got), len(before))
	}
}

// Another write (an answer's outbox row, a memory sample) waits for the
// one write connection at most one INSERT statement of the niced point
// writer, not its whole batch; the batch is written all the same.
func TestPointWriterYieldsTheConnection(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 10_000 // one batch, 50 statements
	pts := make([]logparse.Point, n)
	for i := range pts {
		pts[i] = logparse.Point{Name: "loss", Step: int64(i), Epoch: math.NaN(), Value: 1}
	}
	// The metric's name is known first: the batch's only use of the
	// connection is then its transaction.
	s.AddPoints(1, timed(time.Now(), pts[0]))
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.AddPoints(1, timed(time.Now(), pts[1:]...))
	wrote := make(chan error, 1)
	go func() { wrote <- s.writeQueued(context.Background(), true) }()
	deadline := time.Now().Add(20 * time.Second)
	for inTx := false; !inTx; {
		if time.Now().After(deadline) {
			t.Fatal("the writer never began the batch")
		}
		time.Sleep(time.Millisecond)
		s.pmu.Lock()
		inTx = s.taken > 1 && s.w.Stats().InUse == 1
		s.pmu.Unlock()
	}
	if _, err := s.w.ExecContext(context.Background(), `DELETE FROM metrics WHERE run_id = -1`); err != nil {
		t.Fatal(err)
	}
	count := func() (c int) {
		if err := s.r.QueryRow(`SELECT COUNT(*) FROM metrics`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count(); c >= n {
		t.Errorf("the other write waited for the whole batch (%d points written before it)", c)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if c := count(); c != n {
		t.Errorf("%d points written, want %d", c, n)
	}
}

// Points queued in rounds, some cut into several batches, some queued
// while nothing was written, are all stored, each once, with its value,
// and the read offsets with the last of them.
func TestPointsQueuedInRoundsAreStoredOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.batchSize = 7
	run := newRun(t, s)
	step := int64(0)
	for round, n := range []int{20, 3, 7, 1, 30, 0, 12} {
		var pts []logparse.Point
		for range n {
			step++
			pts = append(pts, logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: float64(step) / 10})
		}
		s.AddPoints(run, timed(time.Now(), pts...))
		s.SetOffsets(run, step*100, step)
		if round%2 == 0 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Series(ctx, run, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != int(step) {
		t.Fatalf("stored %d points, want %d", len(got), step)
	}
	for i, p := range got {
		if p.Step != int64(i+1) || p.Value != float64(i+1)/10 {
			t.Fatalf("point %d is step %d = %g, want step %d = %g", i, p.Step, p.Value, i+1, float64(i+1)/10)
		}
	}
	r, err := s.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if r.LogOffset != step*100 || r.MetricsOffset != step {
		t.Fatalf("offsets %d, %d; want %d, %d", r.LogOffset, r.MetricsOffset, step*100, step)
	}
}

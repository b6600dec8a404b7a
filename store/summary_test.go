package store

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

func TestMetricExtremes(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	losses := []float64{2.5, 1.0, math.NaN(), 0.25, math.Inf(-1), 0.5}
	accs := []float64{0.1, 0.7, 0.9, math.Inf(1), 0.8, 0.85}
	for i := range losses {
		s.AddPoints(id, timed(time.Now(),
			logparse.Point{Name: "loss", Step: int64(i + 1), Value: losses[i], Epoch: math.NaN()},
			logparse.Point{Name: "val_acc", Step: int64(i + 1), Value: accs[i], Epoch: math.NaN()},
		))
	}
	s.AddPoints(id, timed(time.Now(), logparse.Point{Name: "only_nan", Step: 1, Value: math.NaN(), Epoch: math.NaN()}))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ext, err := s.MetricExtremes(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := ext["loss"]; got != (history.Extremes{Min: 0.25, MinStep: 4, Max: 2.5, MaxStep: 1}) {
		t.Errorf("loss %+v", got)
	}
	if got := ext["val_acc"]; got != (history.Extremes{Min: 0.1, MinStep: 1, Max: 0.9, MaxStep: 3}) {
		t.Errorf("val_acc %+v", got)
	}
	if _, ok := ext["only_nan"]; ok || len(ext) != 2 {
		t.Errorf("extremes %+v, want loss and val_acc only", ext)
	}
}

func TestRetryOfRoundTripAndMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	first, _ := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateEnded, Outcome: trainer.OutcomeOOM, StartedAt: time.Now()})
	second, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: time.Now(), RetryOf: first})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Run(ctx, second)
	if got.RetryOf != first {
		t.Fatalf("retry_of %d, want %d", got.RetryOf, first)
	}
	got.Outcome = trainer.OutcomeFinished
	if err := s.UpdateRun(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, second); got.RetryOf != first || got.Outcome != trainer.OutcomeFinished {
		t.Errorf("after update: %+v", got)
	}
	if got, _ := s.Run(ctx, first); got.RetryOf != 0 {
		t.Errorf("the first run retries %d", got.RetryOf)
	}
	s.Close()

	// A database of schema 2 gains the column and keeps its runs.
	old := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(old, DBName))
	if err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:2] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
	}
	db.Exec(`PRAGMA user_version = 2`)
	db.Exec(`INSERT INTO runs(job, state, outcome, started_at) VALUES('old', 'ended', 'finished', 1)`)
	db.Close()
	s2 := open(t, old)
	r, err := s2.Run(ctx, 1)
	if err != nil || r.Job != "old" || r.RetryOf != 0 {
		t.Fatalf("old run after migration: %+v %v", r, err)
	}
}

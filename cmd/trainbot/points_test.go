package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// pointsHistory writes run 1 with a loss that turns NaN and +Inf and an
// accuracy with epochs, and run 2 with no metric.
func pointsHistory(t *testing.T) (dir string, start time.Time) {
	t.Helper()
	dir = t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	start = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for range 2 {
		r := &trainer.Run{Job: "bert", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: start, EndedAt: start.Add(time.Hour)}
		if _, err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var pts []trainer.TimedPoint
	for i, v := range []float64{2.5, 1.25, math.NaN(), math.Inf(1)} {
		at := start.Add(time.Duration(i+1)*time.Second + 250*time.Millisecond)
		step := int64(i+1) * 10
		pts = append(pts,
			trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: v}, At: at},
			trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: float64(i) / 2, Name: "acc", Value: 0.5 + float64(i)/10}, At: at})
	}
	st.AddPoints(1, pts)
	return dir, start
}

func TestPointsCommand(t *testing.T) {
	dir, start := pointsHistory(t)

	code, stdout, stderr := runCmd("points", "1", "--data", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 9 || strings.Join(strings.Fields(lines[0]), " ") != "step time name value epoch" ||
		strings.Join(strings.Fields(lines[1]), " ") != "10 2026-11-29T10:00:01.250Z loss 2.5 -" ||
		strings.Join(strings.Fields(lines[8]), " ") != "40 2026-11-29T10:00:04.250Z acc 0.8 1.5" {
		t.Errorf("the table, losses first:\n%s", stdout)
	}

	code, stdout, stderr = runCmd("points", "#1", "--csv", "--data", dir)
	if code != exitOK {
		t.Fatalf("--csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatalf("--csv: %v\n%s", err, stdout)
	}
	want := [][]string{
		{"step", "time", "name", "value", "epoch"},
		{"10", "2026-11-29T10:00:01.250Z", "loss", "2.5", ""},
		{"20", "2026-11-29T10:00:02.250Z", "loss", "1.25", ""},
		{"30", "2026-11-29T10:00:03.250Z", "loss", "NaN", ""},
		{"40", "2026-11-29T10:00:04.250Z", "loss", "Inf", ""},
		{"10", "2026-11-29T10:00:01.250Z", "acc", "0.5", "0"},
	}
	if len(rows) != 9 || !slices.EqualFunc(rows[:6], want, slices.Equal[[]string]) {
		t.Errorf("--csv: got %q, want 9 rows starting %q", rows, want)
	}

	code, stdout, stderr = runCmd("points", "1", "--json", "--metric", "LOSS", "--data", dir)
	if code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if len(got) != 4 || got[0]["step"] != 10.0 || got[0]["name"] != "loss" || got[0]["value"] != 2.5 || got[2]["value"] != "NaN" || got[3]["value"] != "Inf" {
		t.Errorf("--json --metric LOSS: got %v", got)
	}
	if _, ok := got[0]["epoch"]; ok {
		t.Errorf("--json: a point without an epoch has one: %v", got[0])
	}
	if at, _ := time.Parse(time.RFC3339Nano, got[1]["time"].(string)); !at.Equal(start.Add(2250 * time.Millisecond)) {
		t.Errorf("--json: time %v, want %v", got[1]["time"], start.Add(2250*time.Millisecond))
	}

	code, stdout, _ = runCmd("points", "2", "--json", "--data", dir)
	if code != exitOK || strings.TrimSpace(stdout) != "[\n]" {
		t.Errorf("a run without points: exit %d, %q; want an empty array", code, stdout)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"points", "9"}, exitFail, "run 9 not found in"},
		{[]string{"points", "1", "--metric", "bleu"}, exitFail, `run #1 has no metric "bleu"; it has loss, acc`},
		{[]string{"points", "2", "--metric", "loss"}, exitFail, "run #2 has no metric yet"},
		{[]string{"points"}, exitUsage, "points takes one run id"},
		{[]string{"points", "x"}, exitUsage, `"x" is not a run id`},
		{[]string{"points", "1", "--json", "--csv"}, exitUsage, "--json or --csv, not both"},
	} {
		code, _, stderr := runCmd(append(c.args, "--data", dir)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

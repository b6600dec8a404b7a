package render

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/historytest"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// addRate records a loss point every 10 steps at steps per second rate,
// up to step last.
func addRate(r *trainer.Run, st interface {
	AddPoints(int64, []trainer.TimedPoint)
}, rate float64, last int64) {
	for s := int64(10); s <= last; s += 10 {
		at := r.StartedAt.Add(time.Duration(float64(s) / rate * float64(time.Second)))
		st.AddPoints(r.ID, []trainer.TimedPoint{{Point: logparse.Point{Step: s, Epoch: math.NaN(), Name: "loss", Value: 1 / float64(s)}, At: at}})
	}
}

// 对比 of a finished run against one still running and one stopped: the
// unfinished ones are marked, and their time is compared per step and as
// an ETA-projected total, never the time so far against a whole run's.
func TestCompareMarksUnfinishedRuns(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	t0 := historytest.T0
	c := &Charts{Data: st, Painter: englishPainter(t), Now: func() time.Time { return t0.Add(21 * time.Second) }}

	// #1 finished 1000 steps in 100 s: 10 steps/s.
	done := addRun(t, st, nil, 100*time.Second, 1000)
	addRate(done, st, 10, 1000)
	// #2 is running at 5 steps/s, at step 100 of 1000 after 21 s: 0.2 s a
	// step, 21 s + 900/5 s = 201 s projected.
	running := &trainer.Run{Job: "demo", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning, StartedAt: t0, Steps: 100, Total: 1000}
	// #3 was stopped at step 420 of 1000 after 42 s, as fast as #1.
	stopped := &trainer.Run{Job: "demo", State: trainer.StateEnded, Outcome: trainer.OutcomeStopped, StartedAt: t0, EndedAt: t0.Add(42 * time.Second), Steps: 420, Total: 1000}
	for _, r := range []*trainer.Run{running, stopped} {
		id, err := st.CreateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		r.ID = id
	}
	addRate(running, st, 5, 100)
	addRate(stopped, st, 10, 420)

	_, text, err := c.Compare(ctx, []*trainer.Run{done, running, stopped}, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"✅ #1 demo · finished\n",
		"#2 demo · running · not finished, at step 100 of 1000",
		"#3 demo · stopped · not finished, at step 420 of 1000",
		"time 1m40s · 1000 steps",
		"time 21s so far · projected total 3m21s (+101 %)",
		"time 42s so far · projected total 1m40s (±0 %)",
		"0.1 s/step",
		"0.2 s/step",
		"Not finished: #2, #3.",
		"loss latest 0.0100 (+900 %)",
		"#2 vs #1: time per step +100 %, projected total time +101 %, latest loss +900 %",
		"#3 vs #1: time per step ±0 %, projected total time ±0 %",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	// The time so far is never set against a whole run's.
	for _, bad := range []string{"time −79 %", "time −58 %", "(−79 %)", "(−58 %)"} {
		if strings.Contains(text, bad) {
			t.Errorf("text compares a partial duration with a whole one (%q):\n%s", bad, text)
		}
	}

	// Without a total there is no projection, and still no time ratio.
	noTotal := &trainer.Run{Job: "demo", State: trainer.StateEnded, Outcome: trainer.OutcomeStopped, StartedAt: t0, EndedAt: t0.Add(42 * time.Second), Steps: 420}
	id, err := st.CreateRun(ctx, noTotal)
	if err != nil {
		t.Fatal(err)
	}
	noTotal.ID = id
	addRate(noTotal, st, 10, 420)
	_, text, err = c.Compare(ctx, []*trainer.Run{done, noTotal}, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "not finished, at step 420\n") || !strings.Contains(text, "#4 vs #1: time per step ±0 %") || strings.Contains(text, "projected total time") || strings.Contains(text, "so far · projected") || strings.Contains(text, "time −58 %") {
		t.Errorf("a stopped run without a total:\n%s", text)
	}

	zh := Comparison{}
	c.Lang = i18n.Zh
	if zh, _, err = c.comparison(ctx, []*trainer.Run{done, running}, "", false, false); err != nil {
		t.Fatal(err)
	}
	ztext := zh.Text(i18n.Zh)
	for _, want := range []string{"未跑完（第 100 步，共 1000 步）", "已用时 21 秒", "预计总用时 3 分 21 秒", "每步 0.2 秒", "#2 对比 #1：每步用时 +100%，预计总用时 +101%"} {
		if !strings.Contains(ztext, want) {
			t.Errorf("zh lacks %q:\n%s", want, ztext)
		}
	}
}

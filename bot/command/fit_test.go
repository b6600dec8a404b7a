package command

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

func TestRouterFit(t *testing.T) {
	st := openHistory(t)
	demo := &trainer.Job{Name: "demo", Command: []string{"true"}, Params: map[string]trainer.ParamSpec{
		"batch_size": {Type: trainer.ParamInt, Default: "64", HasDefault: true},
		"lr":         {Type: trainer.ParamFloat, Default: "0.1", HasDefault: true},
	}}
	sup, err := trainer.New(context.Background(), trainer.Options{Jobs: []*trainer.Job{demo}, Recorder: st, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{Trainer: sup, History: st, Plots: englishPainter(t), HostAvailable: func() int64 { return 1 << 30 }}
	if rep := say(r, "适配"); !strings.Contains(rep.Text, "❔ no answer: too few runs") {
		t.Errorf("适配 without runs:\n%s", rep.Text)
	}
	for _, bs := range []int64{16, 32, 64} {
		run := addRun(t, st, map[string]string{"batch_size": strconv.FormatInt(bs, 10), "lr": "0.1"}, time.Minute, 10)
		peak := (100 + 4*bs) << 20
		run.PeakHostMem, run.PeakHostHow = &peak, history.PeakMain
		if err := st.UpdateRun(context.Background(), run); err != nil {
			t.Fatal(err)
		}
	}
	// 90 % of 1 GiB is 921.6 MiB: (921.6 − 100) / 4 = 205, more than twice
	// the largest batch tried: the answer is 128, and it says so.
	for _, text := range []string{"适配", "/fit demo", "适配 demo batch_size", "适配 batch_size"} {
		rep := say(r, text)
		for _, want := range []string{
			"适配 fit · demo · peak host memory against batch_size · runs with lr=0.1",
			"peak = 100.00 MiB + 4.00 MiB × batch_size (R² 1.0000, 3 runs)",
			"limit 1.00 GiB (host MemAvailable now), 10 % kept free: 921.60 MiB",
			"extrapolated 2× past the largest value tried (batch_size=64)",
			"the line alone says batch_size=205: held at 2× the largest value tried",
			"✅ batch_size=128 should fit: predicted 612 MiB of 1 GiB, from runs #1 #2 #3",
		} {
			if !strings.Contains(rep.Text, want) {
				t.Errorf("%s: lacks %q:\n%s", text, want, rep.Text)
			}
		}
	}
	for text, want := range map[string]string{
		"适配 demo lr":    "❔ no answer: too few runs",
		"适配 demo nope":  `demo has no numeric parameter "nope".`,
		"适配 demo a b c": "适配 takes a job and a parameter, e.g. 适配 mnist batch_size.",
		"适配 bs lr":      `适配 takes a job and a parameter; "lr" is neither a job nor the only parameter.`,
	} {
		if rep := say(r, text); !strings.Contains(rep.Text, want) {
			t.Errorf("%s: got %q, want %q", text, rep.Text, want)
		}
	}
}

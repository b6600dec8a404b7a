package command_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// gpusFunc is a command.GPUs.
type gpusFunc func(context.Context) (gpu.Snapshot, error)

func (f gpusFunc) Collect(ctx context.Context) (gpu.Snapshot, error) { return f(ctx) }

var _ command.GPUs = gpusFunc(nil)
var _ command.GPUs = (*gpu.Monitor)(nil)

// activeRuns is a Trainer that only lists active runs (显卡 asks nothing
// else of it).
type activeRuns struct {
	command.Trainer
	runs []trainer.Status
}

func (a activeRuns) Active() []trainer.Status { return a.runs }

// 显卡 answers with a fresh sample as a table, what could not be read, and
// where the active Slurm runs' GPUs are.
func TestGPUAnswer(t *testing.T) {
	snap := gpu.Snapshot{Available: true, Devices: []gpu.Device{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 << 30, MemUsed: 8 << 30, TempC: 50, Util: 99}},
		Host: gpu.Host{MemTotal: 64 << 30, MemAvailable: 32 << 30}}
	collected := 0
	gpus := gpusFunc(func(context.Context) (gpu.Snapshot, error) {
		collected++
		return snap, errors.New("temperature: not supported")
	})
	slurmRun := trainer.Status{Run: &trainer.Run{ID: 2, Job: "big", Runner: "slurm", SlurmJobID: "42", Node: "gpu01"}}
	var asked []string
	r := &command.Router{Trainer: activeRuns{runs: []trainer.Status{{Run: &trainer.Run{ID: 1, Job: "local"}}, slurmRun}},
		Access: command.Access{Viewers: []int64{viewer}}, GPUs: gpus,
		SlurmMaxRSS: func(_ context.Context, id string) (int64, error) { asked = append(asked, id); return 3 << 30, nil }}
	got := r.Handle(context.Background(), chat.Message{Transport: "telegram", Chat: viewer, User: chat.User{ID: viewer}, Text: "显卡"})
	want := render.GPUTable(i18n.ZhEn, snap, map[int64]render.GPURun{1: {Job: "local"}, 2: {Job: "big"}}) + i18n.ZhEn.T(i18n.GPUSomeMissing, "temperature: not supported") + "\n" +
		"run #2 (big) is Slurm job 42 on gpu01: its GPUs are that node's, not in the figures above; MaxRSS (sstat) 3.00 GiB"
	if got.Text != want {
		t.Errorf("got\n%s\nwant\n%s", got.Text, want)
	}
	if collected != 1 || len(asked) != 1 || asked[0] != "42" {
		t.Errorf("sampled %d times, asked sstat of %q; want one sample and job 42", collected, asked)
	}
	// Without telemetry it says so.
	r.GPUs = nil
	got = r.Handle(context.Background(), chat.Message{Transport: "telegram", Chat: viewer, User: chat.User{ID: viewer}, Text: "/gpu"})
	if got.Text != i18n.ZhEn.T(i18n.NoGPU) {
		t.Errorf("without telemetry: %q", got.Text)
	}
}

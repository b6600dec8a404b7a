package command_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// hostGPUsFunc is a command.HostGPUs.
type hostGPUsFunc func() []gpu.HostSample

func (f hostGPUsFunc) Samples() []gpu.HostSample { return f() }

var _ command.HostGPUs = hostGPUsFunc(nil)

// 显卡 shows each [[hosts]] host after this one's table, in their order,
// an unreachable one as such; without this host's telemetry, the hosts'
// still.
func TestGPUAnswerWithHosts(t *testing.T) {
	local := gpu.Snapshot{Available: true, Devices: []gpu.Device{{Index: 0, Name: "NVIDIA A100", MemTotal: 40 << 30, Util: -1, TempC: -1}}}
	h1 := gpu.HostSample{Host: "h1", Snapshot: gpu.Snapshot{At: time.Now(), Available: true, Devices: []gpu.Device{{Index: 3, Name: "NVIDIA H100", MemTotal: 80 << 30, Util: 5, TempC: 41}}}}
	h2 := gpu.HostSample{Host: "h2", Unreachable: errors.New("connection refused"), Since: time.Now()}
	r := &command.Router{Trainer: activeRuns{}, Access: command.Access{Viewers: []int64{viewer}},
		GPUs:     gpusFunc(func(context.Context) (gpu.Snapshot, error) { return local, nil }),
		HostGPUs: hostGPUsFunc(func() []gpu.HostSample { return []gpu.HostSample{h1, h2} })}
	ask := func() string {
		return r.Handle(context.Background(), chat.Message{Transport: "telegram", Chat: viewer, User: chat.User{ID: viewer}, Text: "/gpu"}).Text
	}
	l := i18n.ZhEn
	want := render.GPUTable(l, local, map[int64]render.GPURun{}) + "\n\n" + render.HostGPUTable(l, h1, time.Now()) + "\n\n" + render.HostGPUTable(l, h2, time.Now())
	if got := ask(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	r.GPUs = nil
	if got := ask(); !strings.HasPrefix(got, l.T(i18n.NoGPU)+"\n\n") || !strings.Contains(got, "[3] H100") || !strings.Contains(got, "h2: unreachable since ") {
		t.Errorf("without local telemetry:\n%s", got)
	}
}

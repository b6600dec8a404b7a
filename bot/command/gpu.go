package command

import (
	"context"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// GPUs is what 显卡 needs of the GPU telemetry (gpu.Monitor).
type GPUs interface {
	// Collect samples the devices, their processes and the runs' memory
	// now; what it could not read is in the error, beside what it could.
	Collect(ctx context.Context) (gpu.Snapshot, error)
}

// gpu answers 显卡: a fresh sample as a table (render.GPUTable), what could
// not be read, and where the active Slurm runs' GPUs are.
func (r *Router) gpu(ctx context.Context, l i18n.Lang) chat.Reply {
	if r.GPUs == nil {
		return chat.Reply{Text: l.T(i18n.NoGPU)}
	}
	snap, err := r.GPUs.Collect(ctx)
	text := render.GPUTable(l, snap, r.gpuRuns())
	if err != nil {
		text += l.T(i18n.GPUSomeMissing, err.Error())
	}
	maxRSS := r.SlurmMaxRSS
	if maxRSS == nil {
		maxRSS = slurm.MaxRSS
	}
	if notes := render.SlurmGPUNotes(ctx, l, r.Trainer.Active(), maxRSS); notes != "" {
		text += "\n" + notes
	}
	return chat.Reply{Text: text}
}

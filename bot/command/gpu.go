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

// HostGPUs is what 显卡 needs of the [[hosts]]' GPUs (gpu/remote's
// Sampler).
type HostGPUs interface {
	// Samples returns each host's newest sample, or since when and why it
	// has not answered, in the configured order.
	Samples() []gpu.HostSample
}

// gpu answers 显卡: a fresh sample as a table (render.GPUTable), what could
// not be read, and where the active Slurm runs' GPUs are; then each
// [[hosts]] host's newest sample, or since when it has not answered
// (render.HostGPUTable).
func (r *Router) gpu(ctx context.Context, l i18n.Lang) chat.Reply {
	var remote []gpu.HostSample
	if r.HostGPUs != nil {
		remote = r.HostGPUs.Samples()
	}
	if r.GPUs == nil && len(remote) == 0 {
		return chat.Reply{Text: l.T(i18n.NoGPU)}
	}
	var text string
	if r.GPUs != nil {
		snap, err := r.GPUs.Collect(ctx)
		text = render.GPUTable(l, snap, r.gpuRuns())
		if err != nil {
			text += l.T(i18n.GPUSomeMissing, err.Error())
		}
	} else {
		text = l.T(i18n.NoGPU)
	}
	maxRSS := r.SlurmMaxRSS
	if maxRSS == nil {
		maxRSS = slurm.MaxRSS
	}
	if notes := render.SlurmGPUNotes(ctx, l, r.Trainer.Active(), maxRSS); notes != "" {
		text += "\n" + notes
	}
	now := r.now()
	for _, h := range remote {
		text += "\n\n" + render.HostGPUTable(l, h, now)
	}
	return chat.Reply{Text: text}
}

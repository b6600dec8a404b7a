package render

import (
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// GPUShortage words a start that waits for GPUs: how many it needs, and
// what holds each GPU of the host (a run of some trainbot, with whose it
// is; another user's process, with its command, memory and how long it
// has held it; too little free memory; not quiet for long enough).
// queue is the command that queues the start ("排队 train gpus=2"), ""
// when it cannot be queued.
func GPUShortage(l i18n.Lang, job string, s *trainer.GPUShortage, queue string, now time.Time) string {
	var b strings.Builder
	b.WriteString(l.T(i18n.GPUShort, job, s.Want.N(), s.Free()))
	if s.Want.Memory > 0 {
		b.WriteString(l.T(i18n.GPUShortMem, FormatBytes(s.Want.Memory)))
	}
	for _, g := range s.GPUs {
		if g.NotAsked {
			continue
		}
		b.WriteString("\n" + l.T(i18n.GPUShortLine, g.Index, g.Name, FormatBytes(int64(g.FreeBytes)), FormatBytes(int64(g.Total)), gpuWhy(l, g, now)))
	}
	if queue != "" {
		b.WriteString(l.T(i18n.GPUQueueHint, queue))
	}
	return b.String()
}

// gpuWhy is why one GPU is not free (or that it is).
func gpuWhy(l i18n.Lang, g trainer.GPUState, now time.Time) string {
	switch {
	case g.Run != nil:
		s := l.T(i18n.GPUHeldRun, g.Run.User, g.Run.Run, g.Run.Job)
		if g.Run.Unattended {
			s += l.T(i18n.GPUHeldOrph)
		}
		return s
	case len(g.Processes) > 0:
		var parts []string
		for _, p := range g.Processes {
			s := l.T(i18n.GPUHeldProc, p.User, p.Command, p.PID, FormatBytes(int64(p.Memory)))
			if !p.Since.IsZero() && now.After(p.Since) {
				s += l.T(i18n.GPUHeldFor, l.Duration(now.Sub(p.Since).Round(time.Second)))
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "; ")
	case g.Busy:
		return l.T(i18n.GPUBusyUtil, g.Util)
	case g.TooSmall:
		return l.T(i18n.GPUTooSmall)
	case g.QuietFor < g.Need:
		return l.T(i18n.GPUQuiet, l.Duration(g.QuietFor.Round(time.Second)), l.Duration(g.Need))
	}
	return l.T(i18n.GPUFree)
}

// GPUsText names the GPUs a run was given: "0, 3 (NVIDIA A100-SXM4-80GB)",
// the model once when they are all alike.
func GPUsText(gpus []trainer.RunGPU) string {
	idx := make([]string, len(gpus))
	same := true
	for i, g := range gpus {
		idx[i] = strconv.Itoa(g.Index)
		same = same && g.Name == gpus[0].Name
	}
	s := strings.Join(idx, ", ")
	switch {
	case len(gpus) == 0:
	case same && gpus[0].Name != "":
		s += " (" + gpus[0].Name + ")"
	case !same:
		names := make([]string, len(gpus))
		for i, g := range gpus {
			names[i] = strconv.Itoa(g.Index) + " " + g.Name
		}
		s = strings.Join(names, ", ")
	}
	return s
}

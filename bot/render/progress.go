package render

import (
	"fmt"
	"math"
	"strings"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// ProgressText is the live progress of a run: a bar with step/total, the
// loss, speed, ETA and memory.
//
//	▶️ run #12 · demo · running for 4m10s
//	▓▓▓▓░░░░░░ 41% · step 615/1500 · epoch 6/15
//	loss 0.0686 · 46 steps/s · ETA 19s
//	GPU 7.1 GiB / 80 GiB · peak 7.5 GiB
func ProgressText(l i18n.Lang, st trainer.Status, mem *history.RunMemory) string {
	var b strings.Builder
	r := st.Run
	b.WriteString(l.T(i18n.ProgressHead, r.ID, r.Job, stateText(l, st), l.Duration(st.Elapsed)))
	pr := st.Progress
	var line []string
	switch {
	case pr.Step == 0:
		line = append(line, l.T(i18n.WaitingMetric))
	case pr.TotalSteps > 0:
		frac := float64(pr.Step) / float64(pr.TotalSteps)
		line = append(line, fmt.Sprintf("%s %d%%", ProgressBar(frac, 10), int(math.Floor(100*min(frac, 1)))),
			l.T(i18n.StepOf, pr.Step, pr.TotalSteps))
	default:
		line = append(line, l.T(i18n.Step, pr.Step))
	}
	if !math.IsNaN(pr.Epoch) {
		if pr.TotalEpochs > 0 {
			line = append(line, l.T(i18n.EpochOf, trimFloat(pr.Epoch), pr.TotalEpochs))
		} else {
			line = append(line, l.T(i18n.Epoch, trimFloat(pr.Epoch)))
		}
	}
	b.WriteString(strings.Join(line, " · ") + "\n")
	var stats []string
	if m, ok := st.Loss(); ok {
		stats = append(stats, m.Name+" "+FormatMetric(m.Name, m.Value))
	}
	if st.StepsPerSec > 0 {
		stats = append(stats, l.T(i18n.StepsPerSec, trimFloat(roundSig(st.StepsPerSec, 3))))
	}
	if st.ETA > 0 {
		stats = append(stats, l.T(i18n.ETA, l.Duration(st.ETA)))
	}
	if len(stats) > 0 {
		b.WriteString(strings.Join(stats, " · ") + "\n")
	}
	if m := memoryText(l, r, mem); m != "" {
		b.WriteString(m + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// memoryText is "GPU 7.1 GiB / 80 GiB · peak 7.5 GiB", or host memory
// when there is no GPU, or "" when nothing was sampled.
func memoryText(l i18n.Lang, r *trainer.Run, mem *history.RunMemory) string {
	var parts []string
	if mem != nil && mem.GPUBytes != nil {
		s := FormatBytes(*mem.GPUBytes)
		if mem.GPUTotal != nil && *mem.GPUTotal > 0 {
			s += " / " + FormatBytes(*mem.GPUTotal)
		}
		parts = append(parts, l.T(i18n.MemGPU, s))
	}
	if r.PeakGPUMem != nil {
		if len(parts) > 0 {
			parts = append(parts, l.T(i18n.MemPeak, FormatBytes(*r.PeakGPUMem)))
		} else {
			parts = append(parts, l.T(i18n.MemGPUPeak, FormatBytes(*r.PeakGPUMem)))
		}
	}
	if len(parts) == 0 {
		if mem != nil && mem.HostBytes != nil {
			parts = append(parts, l.T(i18n.MemRAM, FormatBytes(*mem.HostBytes)))
		} else if r.PeakHostMem != nil {
			parts = append(parts, l.T(i18n.MemRAMPeak, FormatBytes(*r.PeakHostMem)))
		}
	}
	return strings.Join(parts, " · ")
}

// FinalProgressText replaces a run's live progress when it ends: the end
// report, with the bar where the run stopped.
func FinalProgressText(l i18n.Lang, e trainer.Event) string {
	text := EndReport(l, e, "", false) // the end report itself says what to try
	r := e.Run
	if r.Total > 0 && r.Steps > 0 {
		frac := float64(r.Steps) / float64(r.Total)
		first, rest, _ := strings.Cut(text, "\n")
		bar := fmt.Sprintf("%s %d%%", ProgressBar(frac, 10), int(math.Floor(100*min(frac, 1))))
		text = first + "\n" + bar
		if rest != "" {
			text += "\n" + rest
		}
	}
	return text
}

package render

import (
	"fmt"
	"math"
	"strings"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// ProgressText is the live progress of a run: a bar with step/total, the
// loss, speed, ETA and memory.
//
//	▶️ run #12 · demo · running for 4m10s
//	▓▓▓▓░░░░░░ 41% · step 615/1500 · epoch 6/15
//	loss 0.0686 · 46 steps/s · ETA 19s
//	GPU 7.1 GiB / 80 GiB · peak 7.5 GiB
func ProgressText(st trainer.Status, mem *store.RunMemory) string {
	var b strings.Builder
	r := st.Run
	fmt.Fprintf(&b, "▶️ run #%d · %s · %s for %s\n", r.ID, r.Job, stateText(st), FormatDuration(st.Elapsed))
	pr := st.Progress
	var line []string
	switch {
	case pr.Step == 0:
		line = append(line, "waiting for the first metric")
	case pr.TotalSteps > 0:
		frac := float64(pr.Step) / float64(pr.TotalSteps)
		line = append(line, fmt.Sprintf("%s %d%%", ProgressBar(frac, 10), int(math.Floor(100*min(frac, 1)))),
			fmt.Sprintf("step %d/%d", pr.Step, pr.TotalSteps))
	default:
		line = append(line, fmt.Sprintf("step %d", pr.Step))
	}
	if !math.IsNaN(pr.Epoch) {
		if pr.TotalEpochs > 0 {
			line = append(line, fmt.Sprintf("epoch %s/%d", trimFloat(pr.Epoch), pr.TotalEpochs))
		} else {
			line = append(line, "epoch "+trimFloat(pr.Epoch))
		}
	}
	b.WriteString(strings.Join(line, " · ") + "\n")
	var stats []string
	if m, ok := st.Loss(); ok {
		stats = append(stats, m.Name+" "+FormatValue(m.Value))
	}
	if st.StepsPerSec > 0 {
		stats = append(stats, fmt.Sprintf("%s steps/s", trimFloat(roundSig(st.StepsPerSec, 3))))
	}
	if st.ETA > 0 {
		stats = append(stats, "ETA "+FormatDuration(st.ETA))
	}
	if len(stats) > 0 {
		b.WriteString(strings.Join(stats, " · ") + "\n")
	}
	if m := memoryText(r, mem); m != "" {
		b.WriteString(m + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// memoryText is "GPU 7.1 GiB / 80 GiB · peak 7.5 GiB", or host memory
// when there is no GPU, or "" when nothing was sampled.
func memoryText(r *trainer.Run, mem *store.RunMemory) string {
	var parts []string
	if mem != nil && mem.GPUBytes != nil {
		s := "GPU " + FormatBytes(*mem.GPUBytes)
		if mem.GPUTotal != nil && *mem.GPUTotal > 0 {
			s += " / " + FormatBytes(*mem.GPUTotal)
		}
		parts = append(parts, s)
	}
	if r.PeakGPUMem != nil {
		if len(parts) > 0 {
			parts = append(parts, "peak "+FormatBytes(*r.PeakGPUMem))
		} else {
			parts = append(parts, "GPU peak "+FormatBytes(*r.PeakGPUMem))
		}
	}
	if len(parts) == 0 {
		if mem != nil && mem.HostBytes != nil {
			parts = append(parts, "RAM "+FormatBytes(*mem.HostBytes))
		} else if r.PeakHostMem != nil {
			parts = append(parts, "RAM peak "+FormatBytes(*r.PeakHostMem))
		}
	}
	return strings.Join(parts, " · ")
}

// FinalProgressText replaces a run's live progress when it ends: the end
// report, with the bar where the run stopped.
func FinalProgressText(e trainer.Event) string {
	text := EndReport(e, "", false) // the end report itself says what to try
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

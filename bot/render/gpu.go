package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer"
)

type xidInfo struct{ meaning, advice i18n.Msg }

// xids are the Xid errors that end training runs most often, from
// NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors); their words
// are in the catalog (i18n).
var xids = map[uint64]xidInfo{
	8:   {i18n.Xid8, i18n.XidAdviceDriver},
	13:  {i18n.Xid13, i18n.XidAdviceApp},
	31:  {i18n.Xid31, i18n.XidAdviceApp},
	43:  {i18n.Xid43, i18n.XidAdviceApp},
	45:  {i18n.Xid45, i18n.XidAdvice45},
	48:  {i18n.Xid48, i18n.XidAdviceReset},
	61:  {i18n.Xid61, i18n.XidAdviceDriver},
	62:  {i18n.Xid62, i18n.XidAdviceReset},
	63:  {i18n.Xid63, i18n.XidAdvice63},
	64:  {i18n.Xid64, i18n.XidAdviceReset},
	74:  {i18n.Xid74, i18n.XidAdvice74},
	79:  {i18n.Xid79, i18n.XidAdviceReboot},
	92:  {i18n.Xid92, i18n.XidAdvice92},
	94:  {i18n.Xid94, i18n.XidAdvice94},
	95:  {i18n.Xid95, i18n.XidAdviceReset},
	119: {i18n.Xid119, i18n.XidAdviceReset},
	120: {i18n.Xid120, i18n.XidAdviceReset},
}

// XidMeaning explains a common Xid number and says what to do, in l; for
// one not in trainbot's table the meaning is "" and the advice points to
// NVIDIA's catalog.
func XidMeaning(l i18n.Lang, xid uint64) (meaning, advice string) {
	x, ok := xids[xid]
	if !ok {
		return "", l.T(i18n.XidAdviceOther)
	}
	return l.T(x.meaning), l.T(x.advice)
}

// GPUAlert words a GPU alert in l: the memory of a device a run uses past
// its threshold, a device too hot, an Xid error or a double bit ECC error,
// with the runs that use the device.
func GPUAlert(l i18n.Lang, a gpu.Alert) string {
	d := a.Sampled
	switch a.Kind {
	case gpu.AlertMemory:
		return l.T(i18n.GPUMemory, deviceLabel(l, d), d.MemPercent(), units.Bytes(int64(d.MemUsed+d.MemReserved)), units.Bytes(int64(d.MemTotal)),
			a.Thresholds.MemoryPercent, a.RunID, units.Bytes(a.Held))
	case gpu.AlertTemperature:
		return l.T(i18n.GPUTemp, deviceLabel(l, d), d.TempC, a.Thresholds.TempC, usedBy(l, a.Runs, i18n.Msg{}))
	case gpu.AlertECC:
		return l.T(i18n.GPUECC, deviceLabel(l, d), usedBy(l, a.Runs, i18n.GPUECCUntrusted))
	}
	meaning, advice := XidMeaning(l, a.Xid)
	text := l.T(i18n.GPUXid, deviceLabel(l, d), a.Xid)
	if meaning != "" {
		text += l.Pick("：", ": ") + meaning
	}
	text += l.Pick("。", ".") + usedBy(l, a.Runs, i18n.Msg{})
	if advice != "" {
		text += l.Pick("", " ") + advice
	}
	return text
}

// deviceLabel is "GPU 0 (NVIDIA A100-SXM4-40GB)".
func deviceLabel(l i18n.Lang, d gpu.Device) string {
	if d.Index < 0 {
		return l.T(i18n.GPUAny)
	}
	if d.Name == "" {
		return fmt.Sprintf("GPU %d", d.Index)
	}
	return fmt.Sprintf("GPU %d (%s)", d.Index, d.Name)
}

// usedBy is " Run #3 uses it." (plus more, when more has words), or ""
// when no run does.
func usedBy(l i18n.Lang, runs []int64, more i18n.Msg) string {
	if len(runs) == 0 {
		return ""
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = fmt.Sprintf("#%d", r)
	}
	verb := l.T(i18n.GPUUsedBy, ids[0])
	if len(ids) > 1 {
		verb = l.T(i18n.GPUUsedByMany, strings.Join(ids, ", "))
	}
	if more.EN != "" {
		verb += l.T(more)
	}
	return verb
}

// mib is a mebibyte, the unit of the GPU table.
const mib = 1 << 20

// GPUTable renders a snapshot as a compact table like gpustat's, worded in
// l: one line per device (index, name, temperature, utilisation, memory
// used/total, power), the processes on it with their memory and run, then
// the host's memory and each active run's. Without device figures the first
// line says why.
func GPUTable(l i18n.Lang, s gpu.Snapshot) string {
	var b strings.Builder
	if !s.Available {
		reason := s.Reason
		if reason == "" {
			reason = l.T(i18n.GPUTableNoTelem)
		}
		b.WriteString(l.T(i18n.GPUTableNone, reason))
	} else {
		if len(s.Devices) == 0 {
			b.WriteString(l.T(i18n.GPUTableSilent))
		}
		width := 0
		for _, d := range s.Devices {
			width = max(width, len(d.Name))
		}
		for _, d := range s.Devices {
			fmt.Fprintf(&b, "[%d] %-*s | %s %s | %5d / %5d MiB", d.Index, width, d.Name,
				dashIfUnknown(d.TempC, "%3d°C", 5), dashIfUnknown(d.Util, "%3d%%", 4), (d.MemUsed+d.MemReserved)/mib, d.MemTotal/mib)
			if d.PowerMilliW > 0 {
				fmt.Fprintf(&b, " | %3d", d.PowerMilliW/1000)
				if d.PowerLimitMilliW > 0 {
					fmt.Fprintf(&b, " / %3d", d.PowerLimitMilliW/1000)
				}
				b.WriteString(" W")
			}
			b.WriteByte('\n')
			for _, p := range s.Processes {
				if p.Device != d.Index {
					continue
				}
				name := p.Name
				if name == "" {
					name = "?"
				}
				fmt.Fprintf(&b, "    pid %d %s %d MiB", p.PID, name, p.MemUsed/mib)
				if p.RunID != 0 {
					fmt.Fprintf(&b, " · run #%d", p.RunID)
				}
				b.WriteByte('\n')
			}
		}
	}
	if s.Host.MemTotal > 0 {
		b.WriteString(l.T(i18n.GPUTableHost, units.Bytes(int64(s.Host.Used())),
			units.Bytes(int64(s.Host.MemTotal)), units.Bytes(int64(s.Host.MemAvailable))))
	}
	for _, u := range s.Runs {
		var parts []string
		if u.GPUBytes != nil {
			g := l.T(i18n.GPUTableRunGPU, units.Bytes(*u.GPUBytes))
			if len(u.Devices) > 0 {
				g += l.T(i18n.GPUTableOn, devList(u.Devices))
			}
			parts = append(parts, g)
		}
		if u.HostBytes != nil {
			parts = append(parts, l.T(i18n.GPUTableRunHost, units.Bytes(*u.HostBytes), u.Processes))
		}
		if len(parts) == 0 {
			parts = append(parts, l.T(i18n.GPUTableNoFigures))
		}
		b.WriteString(l.T(i18n.GPUTableRun, u.RunID, u.PID, strings.Join(parts, " · ")))
	}
	return strings.TrimRight(b.String(), "\n")
}

func dashIfUnknown(v int, format string, width int) string {
	if v < 0 {
		return fmt.Sprintf("%*s", width, "--")
	}
	return fmt.Sprintf(format, v)
}

func devList(devs []int) string {
	s := make([]string, len(devs))
	for i, d := range devs {
		s[i] = fmt.Sprint(d)
	}
	if len(s) == 1 {
		return "GPU " + s[0]
	}
	return "GPUs " + strings.Join(s, ",")
}

// SlurmGPUNotes says, for each active Slurm run, that its GPUs are on its
// node (not in this host's figures) and, where maxRSS (sstat) can tell,
// its MaxRSS; "" when no active run is on Slurm. It goes under GPUTable
// in the 显卡 answer.
func SlurmGPUNotes(ctx context.Context, l i18n.Lang, active []trainer.Status, maxRSS func(context.Context, string) (int64, error)) string {
	var lines []string
	for _, st := range active {
		r := st.Run
		if r.SlurmJobID == "" {
			continue
		}
		line := l.T(i18n.SlurmRunNode, r.ID, r.Job, r.SlurmJobID)
		if r.Node == "" {
			lines = append(lines, line+l.T(i18n.SlurmNotYet))
			continue
		}
		line += l.T(i18n.SlurmOnNode, r.Node)
		if n, err := maxRSS(ctx, r.SlurmJobID); err == nil {
			line += l.T(i18n.SlurmMaxRSS, units.Bytes(n))
		} else {
			line += l.T(i18n.SlurmNoMaxRSS, err.Error())
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

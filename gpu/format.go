package gpu

import (
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
)

const mib = 1 << 20

// Format renders a snapshot as a compact table like gpustat's: one line per
// device (index, name, temperature, utilisation, memory used/total, power),
// the processes on it with their memory and run, then the host's memory and
// each active run's. Without device figures the first line says why.
func Format(s Snapshot) string { return FormatIn(i18n.ZhEn, s) }

// FormatIn is Format worded in l.
func FormatIn(l i18n.Lang, s Snapshot) string {
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
				orDash(d.TempC, "%3d°C", 5), orDash(d.Util, "%3d%%", 4), (d.MemUsed+d.MemReserved)/mib, d.MemTotal/mib)
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

func orDash(v int, format string, width int) string {
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

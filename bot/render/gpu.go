package render

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
// with the runs that use the device; another host's device is named with
// its host ("gpu2 GPU 1 (…)").
func GPUAlert(l i18n.Lang, a gpu.Alert) string {
	d := a.Sampled
	label := hostDeviceLabel(l, a.Host, d)
	switch a.Kind {
	case gpu.AlertMemory:
		return l.T(i18n.GPUMemory, label, d.MemPercent(), units.Bytes(int64(d.MemUsed+d.MemReserved)), units.Bytes(int64(d.MemTotal)),
			a.Thresholds.MemoryPercent, a.RunID, units.Bytes(a.Held))
	case gpu.AlertTemperature:
		return l.T(i18n.GPUTemp, label, d.TempC, a.Thresholds.TempC, usedBy(l, a.Runs, i18n.Msg{}))
	case gpu.AlertECC:
		return l.T(i18n.GPUECC, label, usedBy(l, a.Runs, i18n.GPUECCUntrusted))
	case gpu.AlertIdleHeld:
		return l.T(i18n.GPUIdleHeld, label, l.Duration(a.Idle), idleHolder(l, a.Holder), units.Bytes(int64(a.Holder.MemUsed)),
			units.Bytes(int64(a.Thresholds.IdleMemory)), l.Duration(a.Thresholds.IdleFor))
	}
	meaning, advice := XidMeaning(l, a.Xid)
	text := l.T(i18n.GPUXid, label, a.Xid)
	if meaning != "" {
		text += l.Pick("：", ": ") + meaning
	}
	text += l.Pick("。", ".") + usedBy(l, a.Runs, i18n.Msg{})
	if advice != "" {
		text += l.Pick("", " ") + advice
	}
	return text
}

// idleHolder is "bob's process 5121 (jupyter-lab)" or "process 5121 of
// run #4".
func idleHolder(l i18n.Lang, p gpu.Process) string {
	if p.RunID != 0 {
		return l.T(i18n.GPUIdleByRun, p.PID, p.RunID)
	}
	return l.T(i18n.GPUIdleByOther, holderUser(p), p.PID, processWhat(p, tableCommand))
}

// processWhat is a process's command line cut to n runes, or its name,
// or "?".
func processWhat(p gpu.Process, n int) string {
	if p.Command != "" {
		return truncate(p.Command, n)
	}
	if p.Name != "" {
		return p.Name
	}
	return "?"
}

// GPURefusal words why a run cannot have the GPUs it asked for: err is
// what gpu.Choose returned. A *gpu.NoGPUsError (never on this host) is one
// line; a *gpu.BusyError (not now) has a line per GPU with why it is not
// free, naming the runs with their job and starter from runs. Any other
// error (or nil) gives "".
func GPURefusal(l i18n.Lang, err error, runs map[int64]GPURun) string {
	var never *gpu.NoGPUsError
	if errors.As(err, &never) {
		req := gpuRequest(l, never.Request)
		switch {
		case never.Unavailable != "":
			return l.T(i18n.GPUNeverUnavailable, req, never.Unavailable)
		case len(never.Missing) > 0:
			return l.T(i18n.GPUNeverMissing, req, joinInts(never.Missing), never.Have)
		case len(never.Small) > 0:
			return l.T(i18n.GPUNeverSmall, req, joinInts(never.Small))
		case never.Fit < never.Have:
			return l.T(i18n.GPUNeverFit, req, never.Have, never.Fit)
		}
		return l.T(i18n.GPUNeverFew, req, never.Have)
	}
	var busy *gpu.BusyError
	if !errors.As(err, &busy) {
		return ""
	}
	lines := []string{l.T(i18n.GPUBusyHead, gpuRequest(l, busy.Request), busy.FreeCount())}
	for _, st := range busy.Devices {
		lines = append(lines, l.T(i18n.GPUBusyLine, st.Device.Index, deviceReason(l, st, busy.Request, runs)))
	}
	return strings.Join(lines, "\n")
}

// deviceReason is why one device is not free (the first reason of the
// order Taken, Holders, Busy, TooLittle, not quiet long enough), or
// "free".
func deviceReason(l i18n.Lang, st gpu.DeviceState, req gpu.Request, runs map[int64]GPURun) string {
	switch {
	case st.Taken && len(st.Runs) > 0:
		return runLabel(l, st.Runs[0], runs, i18n.GPUBusyRun, i18n.GPUBusyRunJob, i18n.GPUBusyRunBare)
	case st.Taken && st.Lock != nil:
		who := st.Lock.User
		if st.Lock.Host != "" {
			who += "@" + st.Lock.Host
		}
		text := l.T(i18n.GPUBusyLockedBy, st.Lock.Run, st.Lock.Job, who)
		if st.Lock.Orphan {
			text += l.T(i18n.GPUBusyOrphan)
		}
		return text
	case st.Taken:
		return l.T(i18n.GPUBusyLocked)
	case len(st.Holders) > 0:
		p := st.Holders[0]
		text := l.T(i18n.GPUBusyHeld, holderUser(p), p.PID, processWhat(p, tableCommand), units.Bytes(int64(p.MemUsed)))
		if more := len(st.Holders) - 1; more > 0 {
			text += l.T(i18n.GPUBusyHeldMore, more)
		}
		return text
	case st.Busy:
		return l.T(i18n.GPUBusyUtil, st.Device.Util, st.BusyUtil)
	case st.TooLittle:
		return l.T(i18n.GPUBusyTooLittle, units.Bytes(int64(st.FreeMemory)), units.Bytes(int64(req.Memory)))
	case !st.Free:
		return l.T(i18n.GPUBusyNotQuietYet, l.Duration(st.QuietFor), l.Duration(st.FreeFor))
	}
	return l.T(i18n.GPUBusyFree)
}

// gpuRequest words a request: "2 GPUs", "GPU 3", "GPUs 0,3", "… with
// 20.00 GiB free each".
func gpuRequest(l i18n.Lang, r gpu.Request) string {
	var s string
	switch {
	case len(r.Indices) == 1:
		s = l.T(i18n.GPUReqIndex, joinInts(r.Indices))
	case len(r.Indices) > 1:
		s = l.T(i18n.GPUReqIndices, joinInts(r.Indices))
	default:
		s = l.T(i18n.GPUReqCount, r.Count)
	}
	if r.Memory > 0 {
		s += l.T(i18n.GPUReqMemory, units.Bytes(int64(r.Memory)))
	}
	return s
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// hostDeviceLabel is deviceLabel with the host's name first when it is
// another host's ("gpu2 GPU 1 (…)").
func hostDeviceLabel(l i18n.Lang, host string, d gpu.Device) string {
	if host == "" {
		return deviceLabel(l, d)
	}
	return host + " " + deviceLabel(l, d)
}

// HostGPUTable renders another host's section of 显卡, worded in l, its
// times in now's zone: its name, then its table (GPUTable, whose first
// line says why when the host has no NVML) and what it could not read;
// or that it has not answered since when, and why.
func HostGPUTable(l i18n.Lang, h gpu.HostSample, now time.Time) string {
	switch {
	case h.Unreachable != nil:
		text := l.T(i18n.GPUHostDown, h.Host, clock(h.Since, now), truncate(h.Unreachable.Error(), 160))
		if !h.Snapshot.At.IsZero() {
			text += l.T(i18n.GPUHostLast, clock(h.Snapshot.At, now))
		}
		return text
	case h.Snapshot.At.IsZero():
		return l.T(i18n.GPUHostPending, h.Host)
	}
	text := l.T(i18n.GPUHostHead, h.Host) + GPUTable(l, h.Snapshot, nil)
	if h.Partial != nil {
		text += l.T(i18n.GPUSomeMissing, h.Partial.Error())
	}
	return text
}

// clock is t in now's zone: "14:03:07" today, "12-01 14:03" another day.
func clock(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return StartedText(t, now)
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

// GPURun is what the GPU texts say of a run besides its id: its job and
// who started it ("" when unknown).
type GPURun struct {
	Job string
	By  string
}

// tableCommand is the most runes of a command line the table shows: a
// phone's line or two.
const tableCommand = 60

// GPUWhyText says why there are no device figures in l: reason (the
// backend's English) unless l is Chinese and why is a fact it words.
func GPUWhyText(l i18n.Lang, why gpu.Why, reason string) string {
	m, ok := map[gpu.Why]i18n.Msg{gpu.WhyNoDriver: i18n.GPUWhyNoDriver, gpu.WhyDriverNotLoad: i18n.GPUWhyNotLoaded,
		gpu.WhyNoPermission: i18n.GPUWhyPermission, gpu.WhyDriverMismatch: i18n.GPUWhyMismatch, gpu.WhyNoGPU: i18n.GPUWhyNoGPU,
		gpu.WhyNoNVML: i18n.GPUWhyNoNVML}[why]
	if !ok || l != i18n.Zh {
		return reason
	}
	return l.T(m)
}

// GPUTable renders a snapshot, worded in l, compactly for a phone: one
// line per device (index, name, memory used/total, utilisation,
// temperature, power), then one line per holder: a trainbot run (#id, its
// job and who started it, from runs; its memory there) or another
// process (user, pid, command, memory, utilisation, how long it has held
// the device), then the host's memory and each active run's. Without
// device figures the first line says why.
func GPUTable(l i18n.Lang, s gpu.Snapshot, runs map[int64]GPURun) string {
	var b strings.Builder
	if !s.Available {
		reason := GPUWhyText(l, s.Why, s.Reason)
		if reason == "" {
			reason = l.T(i18n.GPUTableNoTelem)
		}
		b.WriteString(l.T(i18n.GPUTableNone, reason))
	} else {
		if len(s.Devices) == 0 {
			b.WriteString(l.T(i18n.GPUTableSilent))
		}
		for _, d := range s.Devices {
			parts := []string{fmt.Sprintf("[%d] %s", d.Index, shortName(d.Name)), memPair(d.MemUsed+d.MemReserved, d.MemTotal)}
			if d.Util >= 0 {
				parts = append(parts, fmt.Sprintf("%d%%", d.Util))
			}
			if d.TempC >= 0 {
				parts = append(parts, fmt.Sprintf("%d°C", d.TempC))
			}
			if d.PowerMilliW > 0 {
				w := fmt.Sprintf("%d", d.PowerMilliW/1000)
				if d.PowerLimitMilliW > 0 {
					w += fmt.Sprintf("/%d", d.PowerLimitMilliW/1000)
				}
				parts = append(parts, w+" W")
			}
			b.WriteString(strings.Join(parts, " · "))
			b.WriteByte('\n')
			writeHolders(&b, l, s, d, runs)
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

// writeHolders writes the lines of device d's holders: each run once (its
// processes' memory summed), then every other process, largest first.
func writeHolders(b *strings.Builder, l i18n.Lang, s gpu.Snapshot, d gpu.Device, runs map[int64]GPURun) {
	type runHold struct {
		id    int64
		mem   uint64
		procs int
	}
	var held []runHold
	var others []gpu.Process
	for _, p := range s.Processes {
		if p.Device != d.Index {
			continue
		}
		if p.RunID == 0 {
			others = append(others, p)
			continue
		}
		i := slices.IndexFunc(held, func(h runHold) bool { return h.id == p.RunID })
		if i < 0 {
			held = append(held, runHold{id: p.RunID})
			i = len(held) - 1
		}
		held[i].mem += p.MemUsed
		held[i].procs++
	}
	slices.SortFunc(held, func(a, b runHold) int { return cmp.Compare(a.id, b.id) })
	slices.SortStableFunc(others, func(a, b gpu.Process) int { return cmp.Compare(b.MemUsed, a.MemUsed) })
	for _, h := range held {
		what := units.Bytes(int64(h.mem))
		if h.procs > 1 {
			what += l.T(i18n.GPUHolderProcs, h.procs)
		}
		b.WriteString(runLabel(l, h.id, runs, i18n.GPUHolderRun, i18n.GPUHolderRunJob, i18n.GPUHolderRunBare, what))
		b.WriteByte('\n')
	}
	for _, p := range others {
		line := l.T(i18n.GPUHolderOther, holderUser(p), p.PID, processWhat(p, tableCommand), units.Bytes(int64(p.MemUsed)))
		if p.Util >= 0 {
			line += fmt.Sprintf(" · %d%%", p.Util)
		}
		if !p.Since.IsZero() && !s.At.IsZero() && s.At.After(p.Since) {
			line += l.T(i18n.GPUHolderFor, l.Duration(s.At.Sub(p.Since)))
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// runLabel words a run with what is known of it: full (job and starter),
// job (job only) or bare (neither), each taking the id, [job, [starter,]]
// then rest.
func runLabel(l i18n.Lang, id int64, runs map[int64]GPURun, full, job, bare i18n.Msg, rest ...any) string {
	r := runs[id]
	switch {
	case r.Job != "" && r.By != "":
		return l.T(full, append([]any{id, r.Job, r.By}, rest...)...)
	case r.Job != "":
		return l.T(job, append([]any{id, r.Job}, rest...)...)
	}
	return l.T(bare, append([]any{id}, rest...)...)
}

// holderUser is a process's user, "?" when unknown.
func holderUser(p gpu.Process) string {
	if p.User == "" {
		return "?"
	}
	return p.User
}

// shortName drops the vendor from a device's name ("NVIDIA H100 80GB HBM3"
// is "H100 80GB HBM3"): every device in the table is NVIDIA's.
func shortName(name string) string {
	if n, ok := strings.CutPrefix(name, "NVIDIA "); ok && n != "" {
		return n
	}
	return name
}

// memPair is "40.00/80.00 GiB", or "512.00 MiB/80.00 GiB" when the units
// differ.
func memPair(used, total uint64) string {
	u, t := units.Bytes(int64(used)), units.Bytes(int64(total))
	if i, j := strings.LastIndexByte(u, ' '), strings.LastIndexByte(t, ' '); i > 0 && j > 0 && u[i:] == t[j:] {
		return u[:i] + "/" + t
	}
	return u + "/" + t
}

// truncate cuts s to n runes, the last one "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
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

// GPUsText names the GPUs a run was given: "0, 3 (A100-SXM4-80GB)", the
// model once when they are all alike.
func GPUsText(gpus []trainer.RunGPU) string {
	idx := make([]string, len(gpus))
	same := true
	for i, g := range gpus {
		idx[i] = strconv.Itoa(g.Index)
		same = same && g.Name == gpus[0].Name
	}
	switch {
	case len(gpus) == 0:
		return ""
	case same && gpus[0].Name != "":
		return strings.Join(idx, ", ") + " (" + shortName(gpus[0].Name) + ")"
	case !same:
		for i, g := range gpus {
			idx[i] += " " + shortName(g.Name)
		}
	}
	return strings.Join(idx, ", ")
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

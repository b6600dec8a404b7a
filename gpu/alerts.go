package gpu

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/units"
)

// AlertKind says what an alert is about.
type AlertKind string

// Alert kinds.
const (
	AlertMemory      AlertKind = "memory"
	AlertTemperature AlertKind = "temperature"
	AlertXid         AlertKind = "xid"
	AlertECC         AlertKind = "ecc"
)

// Alert is a message for the chats about a device.
type Alert struct {
	Kind   AlertKind
	Device int   // index
	RunID  int64 // the run using the device (the lowest id when several), 0 if none
	// Key is unique per crossing or event ("gpu:memory:run3:dev0:1700000000123"),
	// so that a retried delivery is recognised and a new crossing is not.
	Key  string
	Text string
}

// Thresholds say when to alert; a zero turns one off.
type Thresholds struct {
	// MemoryPercent: a device used by a run at or above this share of its
	// memory (allocated plus reserved).
	MemoryPercent float64
	// TempC: a device at or above this temperature.
	TempC int
}

// After a crossing, an alert re-arms only once the value has gone back
// below the threshold by this much, so that a value hovering at the
// threshold does not alert on every sample. A device event repeated within
// eventRepeat (Xid 13 can fire many times a second) is sent once.
const (
	memoryRearm = 2.0 // percentage points
	tempRearm   = 3   // °C
	eventRepeat = 10 * time.Minute
)

type memKey struct {
	run int64
	dev int
}

type eventKey struct {
	dev  int
	kind EventKind
	xid  uint64
}

// alerter turns snapshots and device events into alerts, once per
// crossing. It is not safe for concurrent use.
type alerter struct {
	th     Thresholds
	mem    map[memKey]bool
	temp   map[int]bool
	events map[eventKey]time.Time
}

func newAlerter(th Thresholds) *alerter {
	return &alerter{th: th, mem: map[memKey]bool{}, temp: map[int]bool{}, events: map[eventKey]time.Time{}}
}

// check returns the alerts of the crossings in s.
func (a *alerter) check(s Snapshot) []Alert {
	var out []Alert
	if a.th.MemoryPercent > 0 {
		active := map[int64]bool{}
		for _, u := range s.Runs {
			active[u.RunID] = true
			if u.GPUBytes == nil {
				continue // no complete device figures this time: keep the state
			}
			for _, dev := range u.Devices {
				d, ok := s.DeviceByIndex(dev)
				if !ok {
					continue
				}
				k := memKey{u.RunID, dev}
				pct := d.MemPercent()
				switch {
				case pct >= a.th.MemoryPercent && !a.mem[k]:
					a.mem[k] = true
					out = append(out, Alert{Kind: AlertMemory, Device: dev, RunID: u.RunID,
						Key:  fmt.Sprintf("gpu:memory:run%d:dev%d:%d", u.RunID, dev, s.At.UnixMilli()),
						Text: memoryText(d, u.RunID, runBytesOn(s, u.RunID, dev), a.th.MemoryPercent)})
				case pct < a.th.MemoryPercent-memoryRearm && a.mem[k]:
					delete(a.mem, k)
				}
			}
		}
		for k := range a.mem {
			if !active[k.run] {
				delete(a.mem, k)
			}
		}
	}
	if a.th.TempC > 0 {
		for _, d := range s.Devices {
			if d.TempC < 0 {
				continue
			}
			switch {
			case d.TempC >= a.th.TempC && !a.temp[d.Index]:
				a.temp[d.Index] = true
				runs := s.RunsOnDevice(d.Index)
				out = append(out, Alert{Kind: AlertTemperature, Device: d.Index, RunID: first(runs),
					Key:  fmt.Sprintf("gpu:temp:dev%d:%d", d.Index, s.At.UnixMilli()),
					Text: tempText(d, runs, a.th.TempC)})
			case d.TempC < a.th.TempC-tempRearm && a.temp[d.Index]:
				delete(a.temp, d.Index)
			}
		}
	}
	return out
}

// event returns the alert of a device event; ok is false for a repeat.
// last is the latest snapshot, for the device's name and its runs.
func (a *alerter) event(ev DeviceEvent, last Snapshot) (Alert, bool) {
	k := eventKey{ev.Device, ev.Kind, ev.Xid}
	if t, seen := a.events[k]; seen && ev.At.Sub(t) < eventRepeat {
		return Alert{}, false
	}
	a.events[k] = ev.At
	for k, t := range a.events {
		if ev.At.Sub(t) >= eventRepeat {
			delete(a.events, k)
		}
	}
	d, ok := last.DeviceByIndex(ev.Device)
	if !ok {
		d = Device{Index: ev.Device}
	}
	runs := last.RunsOnDevice(ev.Device)
	al := Alert{Device: ev.Device, RunID: first(runs)}
	switch ev.Kind {
	case EventDoubleBitECC:
		al.Kind = AlertECC
		al.Key = fmt.Sprintf("gpu:ecc:dev%d:%d", ev.Device, ev.At.UnixMilli())
		al.Text = fmt.Sprintf("🛑 %s reported a double bit ECC error: data in its memory was corrupted beyond repair.%s "+
			"Reset the GPU (nvidia-smi -r) or reboot; if it happens again the card needs replacing.", deviceLabel(d), usedBy(runs, " Results computed on it from now on cannot be trusted."))
	default:
		al.Kind = AlertXid
		al.Key = fmt.Sprintf("gpu:xid%d:dev%d:%d", ev.Xid, ev.Device, ev.At.UnixMilli())
		meaning, advice := XidMeaning(ev.Xid)
		text := fmt.Sprintf("🛑 %s reported Xid %d", deviceLabel(d), ev.Xid)
		if meaning != "" {
			text += ": " + meaning
		}
		text += "." + usedBy(runs, "")
		if advice != "" {
			text += " " + advice
		}
		al.Text = text
	}
	return al, true
}

type xidInfo struct{ meaning, advice string }

const (
	adviceApp    = "Usually a bug in the program (e.g. an out-of-bounds index in a kernel): rerun with CUDA_LAUNCH_BLOCKING=1 to find the line."
	adviceReset  = "Reset the GPU (nvidia-smi -r) or reboot before the next run; if it happens again the card needs replacing."
	adviceReboot = "The GPU is unreachable until the machine is rebooted (a reset is not enough); check its power, cooling and seating."
	adviceDriver = "Restart the run; if it happens again, update the driver or reset the GPU (nvidia-smi -r)."
)

// xids are the Xid errors that end training runs most often, from
// NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).
var xids = map[uint64]xidInfo{
	8:   {"GPU stopped processing", adviceDriver},
	13:  {"graphics engine exception", adviceApp},
	31:  {"GPU memory page fault (illegal memory access)", adviceApp},
	43:  {"GPU stopped processing (the application faulted)", adviceApp},
	45:  {"preemptive cleanup after previous errors (the process was ended)", "Another Xid came first: look for it."},
	48:  {"double bit ECC error (uncorrectable memory error)", adviceReset},
	61:  {"internal micro-controller breakpoint/warning", adviceDriver},
	62:  {"internal micro-controller halt", adviceReset},
	63:  {"ECC page retirement or row remapping event", "The faulty memory was mapped out; reset the GPU when convenient for it to take effect."},
	64:  {"ECC page retirement or row remapping failure", adviceReset},
	74:  {"NVLink error", "Check the NVLink bridges and the other GPUs' logs; " + adviceReset},
	79:  {"the GPU has fallen off the bus", adviceReboot},
	92:  {"high single bit ECC error rate", "The memory is wearing out: plan to replace the card."},
	94:  {"contained ECC error (the application using the memory was affected)", "Restart the run; reset the GPU when convenient."},
	95:  {"uncontained ECC error (every application on the GPU was affected)", adviceReset},
	119: {"GSP RPC timeout (the GPU's system processor stopped answering)", adviceReset},
	120: {"GSP error", adviceReset},
}

// XidMeaning explains a common Xid number and says what to do; for one not
// in trainbot's table the meaning is "" and the advice points to NVIDIA's
// catalog.
func XidMeaning(xid uint64) (meaning, advice string) {
	x, ok := xids[xid]
	if !ok {
		return "", "See NVIDIA's Xid catalog: https://docs.nvidia.com/deploy/xid-errors/"
	}
	return x.meaning, x.advice
}

func memoryText(d Device, run int64, held int64, threshold float64) string {
	return fmt.Sprintf("⚠️ %s memory at %.0f%% (%s of %s; alert at %g%%): run #%d holds %s. "+
		"The next allocation may fail with CUDA out of memory: a smaller batch, gradient checkpointing or mixed precision (bf16/fp16) would leave room.",
		deviceLabel(d), d.MemPercent(), units.Bytes(int64(d.MemUsed+d.MemReserved)), units.Bytes(int64(d.MemTotal)),
		threshold, run, units.Bytes(held))
}

func tempText(d Device, runs []int64, threshold int) string {
	return fmt.Sprintf("🌡 %s at %d°C (alert at %d°C).%s A hot GPU slows its clocks down: check the fans and the airflow.",
		deviceLabel(d), d.TempC, threshold, usedBy(runs, ""))
}

// deviceLabel is "GPU 0 (NVIDIA A100-SXM4-40GB)".
func deviceLabel(d Device) string {
	if d.Index < 0 {
		return "a GPU"
	}
	if d.Name == "" {
		return fmt.Sprintf("GPU %d", d.Index)
	}
	return fmt.Sprintf("GPU %d (%s)", d.Index, d.Name)
}

// usedBy is " Run #3 uses it." (plus more), or "" when no run does.
func usedBy(runs []int64, more string) string {
	if len(runs) == 0 {
		return ""
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = fmt.Sprintf("#%d", r)
	}
	verb := "Run " + ids[0] + " uses it."
	if len(ids) > 1 {
		verb = "Runs " + strings.Join(ids, ", ") + " use it."
	}
	return " " + verb + more
}

// runBytesOn is the memory a run's processes hold on one device.
func runBytesOn(s Snapshot, run int64, dev int) int64 {
	var n int64
	for _, p := range s.Processes {
		if p.RunID == run && p.Device == dev {
			n += int64(p.MemUsed)
		}
	}
	return n
}

func first(ids []int64) int64 {
	if len(ids) == 0 {
		return 0
	}
	return ids[0]
}

package gpu

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/i18n"
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
	Key string
	// Text is the alert in zh+en (its words in English); Say words it in
	// any language.
	Text string
	Say  func(i18n.Lang) string
}

// said fills Text from Say.
func (a Alert) said() Alert {
	a.Text = a.Say(i18n.ZhEn)
	return a
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
						Key: fmt.Sprintf("gpu:memory:run%d:dev%d:%d", u.RunID, dev, s.At.UnixMilli()),
						Say: memoryText(d, u.RunID, runBytesOn(s, u.RunID, dev), a.th.MemoryPercent)}.said())
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
					Key: fmt.Sprintf("gpu:temp:dev%d:%d", d.Index, s.At.UnixMilli()),
					Say: tempText(d, runs, a.th.TempC)}.said())
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
		al.Say = func(l i18n.Lang) string {
			return l.T(i18n.GPUECC, deviceLabel(l, d), usedBy(l, runs, i18n.GPUECCUntrusted))
		}
	default:
		al.Kind = AlertXid
		al.Key = fmt.Sprintf("gpu:xid%d:dev%d:%d", ev.Xid, ev.Device, ev.At.UnixMilli())
		xid := ev.Xid
		al.Say = func(l i18n.Lang) string {
			meaning, advice := XidMeaningIn(l, xid)
			text := l.T(i18n.GPUXid, deviceLabel(l, d), xid)
			if meaning != "" {
				text += l.Pick("：", ": ") + meaning
			}
			text += l.Pick("。", ".") + usedBy(l, runs, i18n.Msg{})
			if advice != "" {
				text += l.Pick("", " ") + advice
			}
			return text
		}
	}
	al.Text = al.Say(i18n.ZhEn)
	return al, true
}

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

// XidMeaning explains a common Xid number and says what to do, in
// English; for one not in trainbot's table the meaning is "" and the
// advice points to NVIDIA's catalog.
func XidMeaning(xid uint64) (meaning, advice string) { return XidMeaningIn(i18n.En, xid) }

// XidMeaningIn is XidMeaning in l.
func XidMeaningIn(l i18n.Lang, xid uint64) (meaning, advice string) {
	x, ok := xids[xid]
	if !ok {
		return "", l.T(i18n.XidAdviceOther)
	}
	return l.T(x.meaning), l.T(x.advice)
}

func memoryText(d Device, run int64, held int64, threshold float64) func(i18n.Lang) string {
	return func(l i18n.Lang) string {
		return l.T(i18n.GPUMemory, deviceLabel(l, d), d.MemPercent(), units.Bytes(int64(d.MemUsed+d.MemReserved)), units.Bytes(int64(d.MemTotal)),
			threshold, run, units.Bytes(held))
	}
}

func tempText(d Device, runs []int64, threshold int) func(i18n.Lang) string {
	return func(l i18n.Lang) string {
		return l.T(i18n.GPUTemp, deviceLabel(l, d), d.TempC, threshold, usedBy(l, runs, i18n.Msg{}))
	}
}

// deviceLabel is "GPU 0 (NVIDIA A100-SXM4-40GB)".
func deviceLabel(l i18n.Lang, d Device) string {
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

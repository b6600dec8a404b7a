package gpu

import (
	"fmt"
	"time"
)

// AlertKind says what an alert is about.
type AlertKind string

// Alert kinds.
const (
	AlertMemory      AlertKind = "memory"
	AlertTemperature AlertKind = "temperature"
	AlertXid         AlertKind = "xid"
	AlertECC         AlertKind = "ecc"
	// AlertIdleHeld: a process holds memory on a device at 0 % for long
	// (Thresholds.IdleMemory, IdleFor).
	AlertIdleHeld AlertKind = "idle_held"
)

// Alert is what happened to a device, for the chats: the facts, which
// bot/render words in each person's language (render.GPUAlert).
type Alert struct {
	Kind AlertKind
	// Host is the [[hosts]] name of the device's host; "" is this one.
	Host   string
	Device int   // index; -1 when the device is not known
	RunID  int64 // the run using the device (the lowest id when several), 0 if none
	// Key is unique per crossing or event ("gpu:memory:run3:dev0:1700000000123"),
	// so that a retried delivery is recognised and a new crossing is not.
	Key string
	// Sampled is the device as last sampled (name, memory, temperature);
	// only Index is set for a device the last snapshot did not know.
	Sampled Device
	// Runs are the runs using the device (AlertTemperature, AlertXid,
	// AlertECC); RunID is the first.
	Runs []int64
	// Held is what run RunID holds on the device (AlertMemory), in bytes.
	Held int64
	// Thresholds are the thresholds crossed: MemoryPercent for AlertMemory,
	// TempC for AlertTemperature.
	Thresholds Thresholds
	// Xid is the Xid number of an AlertXid.
	Xid uint64
	// Holder is the process that holds the idle device (AlertIdleHeld):
	// its user, command, memory and Since; RunID is its run, if any.
	Holder Process
	// Idle is how long the device has been at 0 % while Holder held it
	// (AlertIdleHeld).
	Idle time.Duration
}

// Thresholds say when to alert; a zero turns one off.
type Thresholds struct {
	// MemoryPercent: a device used by a run at or above this share of its
	// memory (allocated plus reserved).
	MemoryPercent float64
	// TempC: a device at or above this temperature.
	TempC int
	// IdleMemory and IdleFor: a process holding at least IdleMemory bytes
	// on a device at 0 % utilisation for IdleFor ([gpu] idle_held); an
	// IdleFor of 0 turns it off.
	IdleMemory uint64
	IdleFor    time.Duration
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
	idle   map[holderKey]*idleState
}

// idleState is one holder of a device at 0 %: since when, and whether it
// was told.
type idleState struct {
	since time.Time
	told  bool
}

func newAlerter(th Thresholds) *alerter {
	return &alerter{th: th, mem: map[memKey]bool{}, temp: map[int]bool{}, events: map[eventKey]time.Time{},
		idle: map[holderKey]*idleState{}}
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
						Key:     fmt.Sprintf("gpu:memory:run%d:dev%d:%d", u.RunID, dev, s.At.UnixMilli()),
						Sampled: d, Held: runBytesOn(s, u.RunID, dev), Thresholds: Thresholds{MemoryPercent: a.th.MemoryPercent}})
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
					Key:     fmt.Sprintf("gpu:temp:dev%d:%d", d.Index, s.At.UnixMilli()),
					Sampled: d, Runs: runs, Thresholds: Thresholds{TempC: a.th.TempC}})
			case d.TempC < a.th.TempC-tempRearm && a.temp[d.Index]:
				delete(a.temp, d.Index)
			}
		}
	}
	if a.th.IdleFor > 0 {
		out = append(out, a.idleHeld(s)...)
	}
	return out
}

// idleHeld returns an alert for each process that has held at least
// IdleMemory on a device at 0 % for IdleFor, once: it is told again only
// after the device was busy (above 0 %) or the process let go (ended, or
// holds less) in between. A device of unknown utilisation, or missing
// from the snapshot, keeps its state.
func (a *alerter) idleHeld(s Snapshot) []Alert {
	if !s.Available {
		return nil
	}
	var out []Alert
	present := map[holderKey]bool{}
	for _, d := range s.Devices {
		if d.Util < 0 {
			for _, p := range s.Processes {
				if p.Device == d.Index {
					present[holderKey{d.UUID, p.PID}] = true
				}
			}
			continue
		}
		for _, p := range s.Processes {
			if p.Device != d.Index || p.MemUsed < a.th.IdleMemory || d.Util > 0 {
				continue
			}
			k := holderKey{d.UUID, p.PID}
			present[k] = true
			st := a.idle[k]
			if st == nil {
				st = &idleState{since: s.At}
				a.idle[k] = st
			}
			if st.told || s.At.Sub(st.since) < a.th.IdleFor {
				continue
			}
			st.told = true
			out = append(out, Alert{Kind: AlertIdleHeld, Device: d.Index, RunID: p.RunID,
				Key:     fmt.Sprintf("gpu:idle:%s:pid%d:%d", d.UUID, p.PID, s.At.UnixMilli()),
				Sampled: d, Runs: s.RunsOnDevice(d.Index), Holder: p, Idle: s.At.Sub(st.since),
				Thresholds: Thresholds{IdleMemory: a.th.IdleMemory, IdleFor: a.th.IdleFor}})
		}
	}
	sampled := make(map[string]bool, len(s.Devices))
	for _, d := range s.Devices {
		sampled[d.UUID] = true
	}
	for k := range a.idle {
		if sampled[k.uuid] && !present[k] {
			delete(a.idle, k)
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
	al := Alert{Device: ev.Device, RunID: first(runs), Sampled: d, Runs: runs}
	switch ev.Kind {
	case EventDoubleBitECC:
		al.Kind = AlertECC
		al.Key = fmt.Sprintf("gpu:ecc:dev%d:%d", ev.Device, ev.At.UnixMilli())
	default:
		al.Kind = AlertXid
		al.Key = fmt.Sprintf("gpu:xid%d:dev%d:%d", ev.Xid, ev.Device, ev.At.UnixMilli())
		al.Xid = ev.Xid
	}
	return al, true
}

// Alerter turns another host's snapshots into alerts, once per crossing,
// as a Monitor does with this host's: gpu/remote keeps one per host. It
// is not safe for concurrent use.
type Alerter struct {
	host string
	a    *alerter
}

// NewAlerter alerts on th for host (its [[hosts]] name), which every
// alert names (Alert.Host, and in its Key).
func NewAlerter(th Thresholds, host string) *Alerter {
	return &Alerter{host: host, a: newAlerter(th)}
}

// Check returns the alerts of the crossings in s.
func (a *Alerter) Check(s Snapshot) []Alert {
	out := a.a.check(s)
	for i := range out {
		out[i].Host = a.host
		out[i].Key = "host:" + a.host + ":" + out[i].Key
	}
	return out
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

package gpu

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const gb = 1 << 30

func i64(v int64) *int64 { return &v }

// snapAt is a snapshot of one 80 GiB device at pct% memory and tempC, with
// run 3's process holding 10 GiB of it when run is true.
func snapAt(at time.Time, pct float64, tempC int, run bool) Snapshot {
	d := Device{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 * gb, MemUsed: uint64(pct / 100 * 80 * gb), TempC: tempC, Util: 99}
	s := Snapshot{At: at, Available: true, Devices: []Device{d}}
	if run {
		s.Processes = []Process{{PID: 42, Device: 0, MemUsed: 10 * gb, RunID: 3}}
		s.Runs = []RunUsage{{RunID: 3, PID: 40, GPUBytes: i64(10 * gb), Devices: []int{0}, HostBytes: i64(gb)}}
	}
	return s
}

func TestAlerterThresholds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		pct   float64
		temp  int
		run   bool
		wants []AlertKind
	}{
		{pct: 50, temp: 60, run: true},
		{pct: 95, temp: 60, run: true, wants: []AlertKind{AlertMemory}}, // at the threshold
		{pct: 99, temp: 86, run: true, wants: []AlertKind{AlertTemperature}},
		{pct: 93.5, temp: 83, run: true}, // within both re-arm margins
		{pct: 96, temp: 86, run: true},
		{pct: 92, temp: 81, run: true}, // re-armed
		{pct: 96, temp: 90, run: true, wants: []AlertKind{AlertMemory, AlertTemperature}},
		{pct: 96, temp: 90, run: false},                                 // the run ended: its state goes
		{pct: 96, temp: 90, run: true, wants: []AlertKind{AlertMemory}}, // a run on the full device again
		{pct: 97, temp: -1, run: true},                                  // unknown temperature: no change
	}
	a := newAlerter(Thresholds{MemoryPercent: 95, TempC: 85})
	for i, st := range steps {
		got := a.check(snapAt(t0.Add(time.Duration(i)*time.Second), st.pct, st.temp, st.run))
		var kinds []AlertKind
		for _, al := range got {
			kinds = append(kinds, al.Kind)
		}
		if strings.Join(kindStrings(kinds), ",") != strings.Join(kindStrings(st.wants), ",") {
			t.Fatalf("step %d (%.1f%%, %d°C, run %v): alerts %v, want %v", i, st.pct, st.temp, st.run, kinds, st.wants)
		}
		for _, al := range got {
			if al.Kind == AlertMemory && (al.RunID != 3 || al.Held != 10*gb || al.Thresholds.MemoryPercent != 95 || al.Sampled.Name != "NVIDIA H100 80GB HBM3") {
				t.Errorf("step %d: %+v", i, al)
			}
			if al.Kind == AlertTemperature && st.run && (al.RunID != 3 || !slices.Equal(al.Runs, []int64{3}) || al.Thresholds.TempC != 85 || al.Sampled.TempC != st.temp) {
				t.Errorf("step %d: %+v", i, al)
			}
		}
	}
}

func kindStrings(k []AlertKind) []string {
	s := make([]string, len(k))
	for i, v := range k {
		s[i] = string(v)
	}
	return s
}

func TestAlerterOff(t *testing.T) {
	a := newAlerter(Thresholds{})
	if got := a.check(snapAt(time.Now(), 100, 120, true)); len(got) != 0 {
		t.Errorf("alerts with thresholds off: %+v", got)
	}
}

func TestAlerterIncompleteSampleKeepsState(t *testing.T) {
	a := newAlerter(Thresholds{MemoryPercent: 90})
	t0 := time.Now()
	if got := a.check(snapAt(t0, 95, 50, true)); len(got) != 1 {
		t.Fatalf("first crossing: %d alerts", len(got))
	}
	partial := snapAt(t0.Add(time.Second), 10, 50, true)
	partial.Runs[0].GPUBytes = nil // a device did not answer
	a.check(partial)
	if got := a.check(snapAt(t0.Add(2*time.Second), 95, 50, true)); len(got) != 0 {
		t.Errorf("an incomplete sample re-armed the alert: %+v", got)
	}
}

func TestAlerterEvents(t *testing.T) {
	a := newAlerter(Thresholds{})
	t0 := time.Unix(1_700_000_000, 0)
	last := snapAt(t0, 50, 50, true)
	ev := func(after time.Duration, kind EventKind, xid uint64) (Alert, bool) {
		return a.event(DeviceEvent{At: t0.Add(after), Device: 0, Kind: kind, Xid: xid}, last)
	}
	h100 := last.Devices[0]
	al, ok := ev(0, EventXid, 79)
	if want := (Alert{Kind: AlertXid, Device: 0, RunID: 3, Key: "gpu:xid79:dev0:1700000000000", Sampled: h100, Runs: []int64{3}, Xid: 79}); !ok || !reflect.DeepEqual(al, want) {
		t.Errorf("xid 79 = %+v, want %+v", al, want)
	}
	if _, ok := ev(time.Minute, EventXid, 79); ok {
		t.Error("a repeat within the window was sent")
	}
	if al, ok := ev(time.Minute, EventXid, 13); !ok || al.Xid != 13 || al.Kind != AlertXid {
		t.Errorf("xid 13 = %+v %v", al, ok)
	}
	if al, ok := ev(11*time.Minute, EventXid, 79); !ok || al.Key == "" {
		t.Errorf("xid 79 after the window = %+v %v", al, ok)
	}
	if al, ok := ev(0, EventXid, 999); !ok || al.Xid != 999 || !slices.Equal(al.Runs, []int64{3}) {
		t.Errorf("unknown xid = %+v", al)
	}
	if al, ok := ev(0, EventDoubleBitECC, 0); !ok || al.Kind != AlertECC || al.Xid != 0 || al.Sampled != h100 {
		t.Errorf("dbe = %+v", al)
	}
	// An event on a device the last snapshot does not know.
	al, ok = a.event(DeviceEvent{At: t0, Device: -1, Kind: EventXid, Xid: 48}, last)
	if !ok || al.Sampled != (Device{Index: -1}) || al.Xid != 48 || al.RunID != 0 || len(al.Runs) != 0 {
		t.Errorf("unknown device = %+v", al)
	}
}

func TestParseMeminfo(t *testing.T) {
	h, err := parseMeminfo(strings.NewReader("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\nHugePages_Total: 0\n"))
	if err != nil || h.MemTotal != 16384*1024 || h.MemAvailable != 8192*1024 || h.Used() != 8192*1024 {
		t.Errorf("got %+v, %v", h, err)
	}
	if _, err := parseMeminfo(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("no MemTotal: want an error")
	}
}

// idleAt is one 80 GiB device at util% held by the processes.
func idleAt(at time.Time, util int, procs ...Process) Snapshot {
	d := Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 * gb, MemUsed: 6 * gb, Util: util, TempC: 40}
	return Snapshot{At: at, Available: true, Devices: []Device{d}, Processes: procs}
}

// idle_held: a holder of at least IdleMemory on a device at 0 % for
// IdleFor is told once; again only after the device was busy or the
// holder let go in between.
func TestAlerterIdleHeld(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	bob := Process{PID: 10, Device: 0, MemUsed: 5 * gb, UID: 1001, User: "bob", Command: "jupyter-lab", Since: t0.Add(-time.Hour), Util: 0}
	tiny := Process{PID: 11, Device: 0, MemUsed: gb / 2, User: "carol"}
	run := Process{PID: 12, Device: 0, MemUsed: 2 * gb, RunID: 4}
	let := func(p Process, mem uint64) Process { p.MemUsed = mem; return p }
	steps := []struct {
		min   int
		util  int
		procs []Process
		want  []int // PIDs told
	}{
		{0, 0, []Process{bob, tiny}, nil},
		{29, 0, []Process{bob, tiny}, nil},
		{30, 0, []Process{bob, tiny}, []int{10}}, // 30 minutes at 0 %
		{31, 0, []Process{bob, tiny}, nil},       // told once
		{40, -1, []Process{bob, tiny}, nil},      // unknown: no change
		{45, 0, []Process{bob, tiny, run}, nil},  // the run's process is new
		{75, 0, []Process{bob, tiny, run}, []int{12}},
		{76, 3, []Process{bob, tiny, run}, nil}, // busy: re-armed
		{77, 0, []Process{bob, run}, nil},
		{107, 0, []Process{bob, run}, []int{10, 12}},
		{108, 0, []Process{let(bob, gb/2), run}, nil}, // bob let go
		{109, 0, []Process{bob, run}, nil},
		{139, 0, []Process{bob, run}, []int{10}},
	}
	a := newAlerter(Thresholds{IdleMemory: gb, IdleFor: 30 * time.Minute})
	for _, st := range steps {
		at := t0.Add(time.Duration(st.min) * time.Minute)
		got := a.check(idleAt(at, st.util, st.procs...))
		var pids []int
		for _, al := range got {
			pids = append(pids, al.Holder.PID)
			if al.Kind != AlertIdleHeld || al.Device != 0 || al.Sampled.UUID != "GPU-0" || al.Thresholds.IdleFor != 30*time.Minute ||
				al.Thresholds.IdleMemory != gb || al.Idle != 30*time.Minute || al.RunID != al.Holder.RunID ||
				!strings.HasPrefix(al.Key, "gpu:idle:GPU-0:pid") {
				t.Errorf("minute %d: %+v", st.min, al)
			}
			if al.Holder.PID == 10 && (al.Holder.User != "bob" || al.Holder.Command != "jupyter-lab") {
				t.Errorf("minute %d: holder %+v", st.min, al.Holder)
			}
		}
		if !slices.Equal(pids, st.want) {
			t.Fatalf("minute %d: told %v, want %v", st.min, pids, st.want)
		}
	}
	// A device that did not answer keeps its state.
	a = newAlerter(Thresholds{IdleMemory: gb, IdleFor: 30 * time.Minute})
	a.check(idleAt(t0, 0, bob))
	a.check(Snapshot{At: t0.Add(10 * time.Minute), Available: true})
	if got := a.check(idleAt(t0.Add(30*time.Minute), 0, bob)); len(got) != 1 {
		t.Errorf("after a sample without the device: %d alerts, want 1", len(got))
	}
	// Off by default.
	a = newAlerter(Thresholds{MemoryPercent: 95})
	a.check(idleAt(t0, 0, bob))
	if got := a.check(idleAt(t0.Add(48*time.Hour), 0, bob)); len(got) != 0 {
		t.Errorf("idle_held off: %+v", got)
	}
}

// Another host's alerter names the host in its alerts and their keys.
func TestAlerterNamesTheHost(t *testing.T) {
	a := NewAlerter(Thresholds{TempC: 80}, "gpu2")
	s := Snapshot{At: time.Unix(1700000000, 0), Available: true, Devices: []Device{{Index: 1, TempC: 85, Util: 50}}}
	got := a.Check(s)
	if len(got) != 1 || got[0].Host != "gpu2" || got[0].Kind != AlertTemperature || got[0].Key != "host:gpu2:gpu:temp:dev1:1700000000000" {
		t.Fatalf("alerts = %+v", got)
	}
	if again := a.Check(s); len(again) != 0 {
		t.Errorf("the same crossing again: %+v", again)
	}
}

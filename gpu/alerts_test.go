package gpu

import (
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/i18n"
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
			if al.Kind == AlertMemory && (al.RunID != 3 || !strings.Contains(al.Text, "run #3 holds 10.00 GiB") || !strings.Contains(al.Text, "alert at 95%")) {
				t.Errorf("step %d: %+v", i, al)
			}
			if al.Kind == AlertTemperature && st.run && (al.RunID != 3 || !strings.Contains(al.Text, "Run #3 uses it.")) {
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
	al, ok := ev(0, EventXid, 79)
	if !ok || al.Kind != AlertXid || al.RunID != 3 || al.Text != "🛑 GPU 0 (NVIDIA H100 80GB HBM3) reported Xid 79: the GPU has fallen off the bus. Run #3 uses it. "+i18n.En.T(i18n.XidAdviceReboot) {
		t.Errorf("xid 79 = %+v", al)
	}
	if _, ok := ev(time.Minute, EventXid, 79); ok {
		t.Error("a repeat within the window was sent")
	}
	if al, ok := ev(time.Minute, EventXid, 13); !ok || !strings.Contains(al.Text, "Xid 13: graphics engine exception") || !strings.Contains(al.Text, "CUDA_LAUNCH_BLOCKING=1") {
		t.Errorf("xid 13 = %+v %v", al, ok)
	}
	if al, ok := ev(11*time.Minute, EventXid, 79); !ok || al.Key == "" {
		t.Errorf("xid 79 after the window = %+v %v", al, ok)
	}
	if al, ok := ev(0, EventXid, 999); !ok || !strings.Contains(al.Text, "reported Xid 999. Run #3 uses it. See NVIDIA's Xid catalog") {
		t.Errorf("unknown xid = %+v", al)
	}
	if al, ok := ev(0, EventDoubleBitECC, 0); !ok || al.Kind != AlertECC || !strings.Contains(al.Text, "double bit ECC error") {
		t.Errorf("dbe = %+v", al)
	}
	// An event on a device the last snapshot does not know.
	al, ok = a.event(DeviceEvent{At: t0, Device: -1, Kind: EventXid, Xid: 48}, last)
	if !ok || !strings.HasPrefix(al.Text, "🛑 a GPU reported Xid 48: double bit ECC error") || al.RunID != 0 {
		t.Errorf("unknown device = %+v", al)
	}
	for _, x := range []uint64{79, 48} {
		if m, _ := XidMeaning(x); m == "" {
			t.Errorf("Xid %d has no meaning", x)
		}
	}
	// The same alert in Chinese.
	al, _ = a.event(DeviceEvent{At: t0.Add(time.Hour), Device: 0, Kind: EventXid, Xid: 79}, last)
	if got, want := al.Say(i18n.Zh), "🛑 GPU 0 (NVIDIA H100 80GB HBM3) 报告了 Xid 79：GPU 从总线上掉了。训练 #3 在用它。重启机器之前这块显卡都无法访问（重置不够）；检查供电、散热和插接。"; got != want {
		t.Errorf("zh xid 79 = %q,\nwant %q", got, want)
	}
	if al.Say(i18n.ZhEn) != al.Text {
		t.Errorf("Text %q is not the zh+en wording %q", al.Text, al.Say(i18n.ZhEn))
	}
}

func TestFormat(t *testing.T) {
	s := snapAt(time.Now(), 50, -1, true)
	s.Devices[0].Util = -1
	s.Devices[0].PowerMilliW = 350_500
	s.Devices[0].PowerLimitMilliW = 700_000
	s.Processes[0].Name = "python"
	s.Host = Host{MemTotal: 64 * gb, MemAvailable: 48 * gb}
	want := "[0] NVIDIA H100 80GB HBM3 |    --   -- | 40960 / 81920 MiB | 350 / 700 W\n" +
		"    pid 42 python 10240 MiB · run #3\n" +
		"host memory 16.00 GiB used of 64.00 GiB (48.00 GiB available)\n" +
		"run #3 (pid 40): GPU 10.00 GiB on GPU 0 · host 1.00 GiB in 0 processes"
	if got := Format(s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	none := Snapshot{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", Host: Host{MemTotal: 8 * gb, MemAvailable: 6 * gb},
		Runs: []RunUsage{{RunID: 5, PID: 77, HostBytes: i64(300 << 20), Processes: 1}}}
	want = "No NVIDIA GPU: no NVIDIA driver (libnvidia-ml.so.1 not found). Memory below is host memory.\n" +
		"host memory 2.00 GiB used of 8.00 GiB (6.00 GiB available)\n" +
		"run #5 (pid 77): host 300.00 MiB in 1 process"
	if got := Format(none); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	want = "没有 NVIDIA 显卡：no NVIDIA driver (libnvidia-ml.so.1 not found)。下面是主机内存。\n" +
		"主机内存已用 2.00 GiB，共 8.00 GiB（可用 6.00 GiB）\n" +
		"训练 #5（进程 77）：内存 300.00 MiB，1 个进程"
	if got := FormatIn(i18n.Zh, none); got != want {
		t.Errorf("zh got:\n%s\nwant:\n%s", got, want)
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

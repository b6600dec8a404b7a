package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseStatusUID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1001\t1002\t1003\nGid:\t1000\t1000\t1000\t1000\n", 1000},
		{"Uid:\t0\t0\t0\t0", 0},
		{"Name:\tx\n", -1},
		{"Uid:\n", -1},
		{"Uid:\tabc\t1\t1\t1\n", -1},
		{"", -1},
	} {
		if got := parseStatusUID([]byte(c.in)); got != c.want {
			t.Errorf("parseStatusUID(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	long := "python\x00train.py\x00--data\x00" + strings.Repeat("/very/long/path", 20) + "\x00"
	for _, c := range []struct{ name, in, want string }{
		{"arguments", "python\x00train.py\x00--lr\x003e-4\x00", "python train.py --lr 3e-4"},
		{"no trailing NUL", "sleep\x0060", "sleep 60"},
		{"kernel thread", "", ""},
		{"setproctitle", "python: worker 3 [train]\x00\x00\x00", "python: worker 3 [train]"},
		{"control characters", "evil\x00\x1b[2J\x00a\nb", `evil \x1b[2J a\nb`},
		{"not UTF-8", "bad\xff\x00x", `bad\xff x`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseCmdline([]byte(c.in)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	got := parseCmdline([]byte(long))
	if n := utf8.RuneCountInString(got); n != MaxCommand || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "python train.py --data /very") {
		t.Errorf("long command line: %d runes, %q", n, got)
	}
	if got := truncateRunes("显卡显卡显卡", 4); got != "显卡显…" {
		t.Errorf("truncateRunes = %q", got)
	}
}

// writeProc makes a fake /proc entry for pid under root.
func writeProc(t *testing.T, root string, pid int, status, cmdline, comm string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"status": status, "cmdline": cmdline, "comm": comm} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The book reads a process's /proc once while it stays on a device, keeps
// since when it holds each device, and forgets it when it lets go.
func TestHolderBook(t *testing.T) {
	root := t.TempDir()
	// 4242 is a uid no user has: it is shown as its number.
	writeProc(t, root, 100, "Name:\tpython\nUid:\t4242\t4242\t4242\t4242\n", "python\x00train.py\x00", "python\n")
	writeProc(t, root, 200, "Uid:\t0\t0\t0\t0\n", "/usr/bin/Xorg\x00", "Xorg\n")
	b := newHolderBook()
	b.root = root
	t0 := time.Unix(1_700_000_000, 0)
	devs := []Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}
	snap := func(at time.Time, procs ...Process) Snapshot {
		return Snapshot{At: at, Available: true, Devices: devs, Processes: procs}
	}

	s1 := snap(t0, Process{PID: 100, Device: 0}, Process{PID: 100, Device: 1}, Process{PID: 200, Device: 1}, Process{PID: 300, Device: 1})
	b.identify(s1.Processes)
	b.observe(&s1)
	p := s1.Processes
	if p[0].UID != 4242 || p[0].User != "4242" || p[0].Command != "python train.py" || p[0].Name != "python" || !p[0].Since.Equal(t0) {
		t.Errorf("pid 100 = %+v", p[0])
	}
	if p[2].UID != 0 || p[2].User != "root" || p[2].Command != "/usr/bin/Xorg" {
		t.Errorf("pid 200 = %+v", p[2])
	}
	if p[3].UID != -1 || p[3].User != "" || p[3].Command != "" {
		t.Errorf("pid 300 (no /proc entry) = %+v", p[3])
	}

	// A changed file is not read again while the process stays; Since
	// stays the first sample's.
	writeProc(t, root, 100, "Uid:\t1\t1\t1\t1\n", "other\x00", "other\n")
	s2 := snap(t0.Add(time.Minute), Process{PID: 100, Device: 0}, Process{PID: 200, Device: 1})
	b.identify(s2.Processes)
	b.observe(&s2)
	if p := s2.Processes[0]; p.Command != "python train.py" || !p.Since.Equal(t0) {
		t.Errorf("pid 100 a minute later = %+v", p)
	}
	// sinceOf reads without remembering: a new holder is "since now".
	s3 := snap(t0.Add(90*time.Second), Process{PID: 100, Device: 0}, Process{PID: 100, Device: 1})
	b.sinceOf(&s3)
	if !s3.Processes[0].Since.Equal(t0) || !s3.Processes[1].Since.Equal(t0.Add(90*time.Second)) {
		t.Errorf("sinceOf = %v, %v", s3.Processes[0].Since, s3.Processes[1].Since)
	}
	// Pid 100 left device 1 at s2: coming back, it is new there; a device
	// that did not answer keeps its holders.
	s4 := Snapshot{At: t0.Add(2 * time.Minute), Available: true, Devices: devs[1:], Processes: []Process{{PID: 100, Device: 1}}}
	b.identify(s4.Processes)
	b.observe(&s4)
	if !s4.Processes[0].Since.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("pid 100 back on device 1: since %v", s4.Processes[0].Since)
	}
	if _, kept := b.since[holderKey{"GPU-a", 100}]; !kept {
		t.Error("device 0 did not answer, yet its holder was forgotten")
	}
	// Pid 200 is gone: read again when a process of that pid comes.
	s5 := snap(t0.Add(3*time.Minute), Process{PID: 200, Device: 0})
	b.identify(s5.Processes)
	if p := s5.Processes[0]; p.Command != "/usr/bin/Xorg" {
		t.Errorf("pid 200 = %+v", p)
	}
	b.observe(&s5)
	s6 := snap(t0.Add(4*time.Minute), Process{PID: 100, Device: 0})
	b.identify(s6.Processes)
	if p := s6.Processes[0]; p.Command != "other" || p.UID != 1 {
		t.Errorf("pid 100 after it let go of every device = %+v, want read again", p)
	}
}

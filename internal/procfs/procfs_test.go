package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Stat
		bad  bool
	}{
		{
			name: "python",
			line: "4242 (python3) S 4200 4200 4100 0 -1 4194560 1234 0 0 0 500 20 0 0 20 0 12 0 987654 8000000000 51200 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 3 0 0 0 0 0\n",
			want: Stat{State: 'S', PPID: 4200, PGID: 4200, Start: 987654, RSS: 51200, UTime: 500, STime: 20, VSize: 8000000000},
		},
		{
			name: "command name with spaces and parentheses",
			line: "77 (a) b (c)) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 1000 9 0",
			want: Stat{State: 'R', PPID: 1, PGID: 77, Start: 42, RSS: 9, VSize: 1000},
		},
		{
			name: "zombie",
			line: "9 (defunct) Z 8 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0",
			want: Stat{State: 'Z', PPID: 8, PGID: 8, Start: 5},
		},
		{name: "no parenthesis", line: "1 init S 0 1 1", bad: true},
		{name: "short", line: "1 (init) S 0 1 1 0", bad: true},
		{name: "empty", line: "", bad: true},
		{name: "nothing after the name", line: "1 (x)", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if tt.bad {
				if err == nil {
					t.Fatalf("ParseStat(%q) = %+v, want an error", tt.line, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStat: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// fakeProc writes a /proc with the given processes: pid -> "ppid pgid rss comm".
func fakeProc(t *testing.T, procs map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, spec := range procs {
		var ppid, pgid, rss int
		var comm string
		if _, err := fmt.Sscan(spec, &ppid, &pgid, &rss, &comm); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000 %d 0 0\n", pid, comm, ppid, pgid, pgid, 100*pid, rss)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644)
	}
	os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 2 3\nbtime 1700000000\n"), 0o644)
	os.Mkdir(filepath.Join(root, "self"), 0o755) // not a pid: skipped
	return root
}

func TestOwnerAndTreeUsage(t *testing.T) {
	// trainbot (100) started run 7 as pid 200 (group 200). 200 has a
	// worker 201 in its group, and 202 which left the group with setsid and
	// has a child 203 of its own. 300 is someone else's process; 400 was
	// started by run 7 but reparented to init while staying in group 200.
	root := fakeProc(t, map[int]string{
		1:   "0 1 10 init",
		100: "1 100 1000 trainbot",
		200: "100 200 2000 python",
		201: "200 200 300 pt_data_worker",
		202: "200 202 400 setsid_child",
		203: "202 202 50 grandchild",
		300: "1 300 9999 other",
		400: "1 200 70 orphan",
	})
	p, err := ReadProcsAt(root)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 8 {
		t.Fatalf("read %d processes, want 8", p.Len())
	}
	runs := map[int]int64{200: 7}
	for pid, want := range map[int]int64{200: 7, 201: 7, 202: 7, 203: 7, 400: 7, 100: 0, 300: 0, 1: 0, 999: 0} {
		if got := p.Owner(pid, runs); got != want {
			t.Errorf("Owner(%d) = %d, want %d", pid, got, want)
		}
	}
	if got := p.Owner(201, nil); got != 0 {
		t.Errorf("Owner without runs = %d, want 0", got)
	}
	u := p.Usage(runs)[7]
	page := int64(os.Getpagesize())
	if want := (2000 + 300 + 400 + 50 + 70) * page; u.RSS != want || u.Procs != 5 {
		t.Errorf("run 7 usage = %d bytes in %d processes, want %d in 5", u.RSS, u.Procs, want)
	}
	if got := p.Comm(201); got != "pt_data_worker" {
		t.Errorf("Comm(201) = %q", got)
	}
	desc := p.Descendants(200)
	slices.Sort(desc)
	if want := []int{201, 202, 203}; !slices.Equal(desc, want) {
		t.Errorf("Descendants(200) = %v, want %v", desc, want)
	}
	if desc := p.Descendants(203); len(desc) != 0 {
		t.Errorf("Descendants(203) = %v, want none", desc)
	}
	if st, ok := p.Get(202); !ok || st.PGID != 202 || st.PPID != 200 {
		t.Errorf("Get(202) = %+v, %v", st, ok)
	}
	started, ok := p.Started(200)
	if want := time.Unix(1700000000, 0).Add(200 * time.Second); !ok || !started.Equal(want) {
		t.Errorf("Started(200) = %v %v, want %v", started, ok, want)
	}
}

// BenchmarkProcStatBaseline reads one /proc/PID/stat: the unit the tree
// sample is made of, measured in the same run for bench/gpu-sample.sh.
func BenchmarkProcStatBaseline(b *testing.B) {
	var buf [1024]byte
	path := []byte("/proc/self/stat")
	for b.Loop() {
		if _, err := readSmall(path, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
}

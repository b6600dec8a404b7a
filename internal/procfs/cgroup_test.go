package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestOOMKillFiles(t *testing.T) {
	tests := []struct {
		name, cgroup string
		want         []string
	}{
		{"v2", "0::/user.slice/a.scope\n", []string{
			"/sys/fs/cgroup/user.slice/a.scope/memory.events",
			"/sys/fs/cgroup/unified/user.slice/a.scope/memory.events"}},
		{"v1", "9:name=systemd:/\n4:memory:/job/7\n0::/\n", []string{
			"/sys/fs/cgroup/memory/job/7/memory.oom_control",
			"/sys/fs/cgroup/memory.events",
			"/sys/fs/cgroup/unified/memory.events"}},
		{"v1 joined controllers", "3:cpu,memory:/x\n", []string{"/sys/fs/cgroup/memory/x/memory.oom_control"}},
		{"none", "1:cpu:/\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := oomKillFiles(tt.cgroup, "/sys/fs/cgroup"); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseOOMKill(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n", 2, true},
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 5\n", 5, true},
		{"oom_kill x\n", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseOOMKill(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseOOMKill(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestOwnCgroupPeak(t *testing.T) {
	proc, sysfs := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(proc+"/10/cgroup", "0::/user.slice/shim.scope\n")
	write(proc+"/11/cgroup", "0::/user.slice/shim.scope\n")                   // shares its parent's
	write(proc+"/12/cgroup", "0::/user.slice/run-12.scope\n")                 // its own, v2
	write(proc+"/13/cgroup", "4:memory:/runs/13\n0::/user.slice/run.scope\n") // its own, v1 memory
	write(sysfs+"/user.slice/run-12.scope/memory.peak", "476053504\n")
	write(sysfs+"/memory/runs/13/memory.max_usage_in_bytes", "1048576\n")
	for _, tc := range []struct {
		pid    int
		want   int64
		wantOK bool
	}{{11, 0, false}, {12, 476053504, true}, {13, 1048576, true}, {99, 0, false}} {
		got, ok := ownCgroupPeak(proc, sysfs, tc.pid, 10)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("pid %d: got %d, %v; want %d, %v", tc.pid, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestParseHWM(t *testing.T) {
	status := "Name:\tpython3\nVmPeak:\t 1234 kB\nVmHWM:\t  476052 kB\nVmRSS:\t  12 kB\n"
	if got, ok := parseHWM([]byte(status)); !ok || got != 476052<<10 {
		t.Errorf("got %d, %v; want %d", got, ok, 476052<<10)
	}
	if _, ok := parseHWM([]byte("Name:\tkthreadd\nState:\tS\n")); ok {
		t.Error("a kernel thread has no VmHWM")
	}
	// The test process itself has one, at least its current RSS.
	if got, ok := ReadHWM(os.Getpid()); !ok || got < 1<<20 {
		t.Errorf("ReadHWM(self) = %d, %v", got, ok)
	}
}

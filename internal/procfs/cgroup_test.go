package procfs

import (
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

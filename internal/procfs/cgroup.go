package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CgroupOOMKills returns how many processes the kernel's OOM killer has
// killed in the calling process's memory cgroup (its children inherit
// it), or -1 when it cannot be read. cgroup v2 ("0::/path", memory.events;
// also mounted at /sys/fs/cgroup/unified on hybrid hosts) and v1 (the
// memory controller's memory.oom_control) are both read.
func CgroupOOMKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	for _, f := range oomKillFiles(string(b), "/sys/fs/cgroup") {
		if n, ok := readOOMKill(f); ok {
			return n
		}
	}
	return -1
}

// oomKillFiles lists, from the text of /proc/PID/cgroup, the files that
// may hold the process's oom_kill count, most likely first.
func oomKillFiles(cgroup, sysfs string) []string {
	return memoryFiles(cgroup, sysfs, "memory.events", "memory.oom_control", true)
}

// memoryFiles lists, from the text of /proc/PID/cgroup, the file v2 (the
// unified hierarchy, also at sysfs/unified on hybrid hosts) or v1 (the
// memory controller) names in the process's memory cgroup, most likely
// first. Without root, the root cgroup ("/", the whole host) is left out.
func memoryFiles(cgroup, sysfs, v2, v1 string, root bool) []string {
	var files []string
	for _, line := range strings.Split(cgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || (!root && parts[2] == "/") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = append(files, filepath.Join(sysfs, parts[2], v2), filepath.Join(sysfs, "unified", parts[2], v2))
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			files = append(files, filepath.Join(sysfs, "memory", parts[2], v1))
		}
	}
	return files
}

// readOOMKill reads the "oom_kill N" line of memory.events or memory.oom_control.
func readOOMKill(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseOOMKill(string(b))
}

func parseOOMKill(s string) (int64, bool) {
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// OwnCgroupPeak returns the most memory the cgroup of pid ever held
// (cgroup v2 memory.peak, kernel 5.19 and later; v1 memory.max_usage_in_bytes),
// when that cgroup is not the one of parent: a run started in a cgroup of
// its own (systemd-run --scope, a container) is measured as a whole, page
// cache included. ok is false when pid shares its parent's cgroup or the
// figure cannot be read.
func OwnCgroupPeak(pid, parent int) (int64, bool) {
	return ownCgroupPeak("/proc", "/sys/fs/cgroup", pid, parent)
}

func ownCgroupPeak(proc, sysfs string, pid, parent int) (int64, bool) {
	mine, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return 0, false
	}
	theirs, err := os.ReadFile(proc + "/" + strconv.Itoa(parent) + "/cgroup")
	if err != nil || string(theirs) == string(mine) {
		return 0, false
	}
	for _, f := range peakFiles(string(mine), sysfs) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}

// peakFiles lists, from the text of /proc/PID/cgroup, the files that may
// hold the cgroup's peak memory, most likely first.
func peakFiles(cgroup, sysfs string) []string {
	return memoryFiles(cgroup, sysfs, "memory.peak", "memory.max_usage_in_bytes", false)
}

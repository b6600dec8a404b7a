package web

import (
	"fmt"
	"os"
	"syscall"

	"github.com/trainbot/trainbot/internal/procfs"
)

// The process_* families of client_golang's process collector, with its
// names, help and types, read as it reads them on Linux: /proc/self/stat
// (through internal/procfs, the one reader of it), the entries of
// /proc/self/fd, and the process's limits. Its process_network_* are left
// out: they are the network namespace's bytes, not the process's.
var (
	descCPU       = newDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", counterType)
	descOpenFDs   = newDesc("process_open_fds", "Number of open file descriptors.", gaugeType)
	descMaxFDs    = newDesc("process_max_fds", "Maximum number of open file descriptors.", gaugeType)
	descVSize     = newDesc("process_virtual_memory_bytes", "Virtual memory size in bytes.", gaugeType)
	descMaxVSize  = newDesc("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", gaugeType)
	descRSS       = newDesc("process_resident_memory_bytes", "Resident memory size in bytes.", gaugeType)
	descStartTime = newDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", gaugeType)
)

// collectProcess adds the process_* families to a scrape; one that
// cannot be read is left out, and the scrape says why.
func collectProcess(s *scrape) {
	if st, err := procfs.ReadStat(os.Getpid()); err != nil {
		s.fail(fmt.Errorf("process: %w", err))
	} else {
		s.add(descCPU, float64(st.UTime+st.STime)/procfs.ClockTicks)
		s.add(descVSize, float64(st.VSize))
		s.add(descRSS, float64(st.RSS)*float64(os.Getpagesize()))
		if boot, err := procfs.BootTime(); err != nil {
			s.fail(fmt.Errorf("process start time: %w", err))
		} else {
			s.add(descStartTime, float64(boot.Unix())+float64(st.Start)/procfs.ClockTicks)
		}
	}
	if n, err := openFDs(); err != nil {
		s.fail(fmt.Errorf("process open fds: %w", err))
	} else {
		s.add(descOpenFDs, float64(n))
	}
	// The soft limits, as /proc/self/limits says them ("unlimited" is
	// RLIM_INFINITY, 2^64-1, as client_golang writes it).
	if n := openFileLimit(); n > 0 {
		s.add(descMaxFDs, float64(n))
	}
	var as syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &as); err != nil {
		s.fail(fmt.Errorf("process address space limit: %w", err))
	} else {
		s.add(descMaxVSize, float64(as.Cur))
	}
}

// openFDs counts the entries of /proc/self/fd (the one it opens to read
// them included, as client_golang counts).
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	return len(names), err
}

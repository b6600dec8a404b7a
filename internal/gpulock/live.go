package gpulock

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/internal/procfs"
)

// procStart is pid's start time in clock ticks after boot.
func procStart(pid int) (uint64, error) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0, err
	}
	return st.Start, nil
}

// lives reports whether the holder's process pid — the one that started
// at start, when start is not 0 — or a process of its group (the holder's
// PID is the run's process group id) is alive. Only positive evidence
// makes it gone: no such process and no such group, a newer process with
// the pid, a zombie whose group has nobody else alive. A process that
// exists but cannot be looked at (another user's, under hidepid) lives.
//
// A pid that a newer process took says the group is gone too: Linux hands
// out no pid that is still some process group's id.
func lives(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	if st, err := procfs.ReadStat(pid); err == nil {
		switch {
		case start != 0 && st.Start != start:
			return false // reused
		case st.State != 'Z':
			return true
		}
		// A zombie leader (its parent, init in a container, does not reap
		// it): the group lives while another member does.
		procs, err := procfs.ReadProcs()
		return err != nil || procs.GroupSize(pid) > 0
	}
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		return true // it exists, hidden from /proc; whether it is the same cannot be told
	}
	// The leader is gone; its group may live on.
	err := unix.Kill(-pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

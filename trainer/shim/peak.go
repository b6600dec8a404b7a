package shim

import (
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
)

// The main process's peak resident memory (State.MaxRSS).
//
// wait4's ru_maxrss is not always the child's own: Go starts it with
// clone(CLONE_VM|CLONE_VFORK), so until its execve it runs in the shim's
// memory, and at the execve Linux folds the high-water mark of the memory
// it leaves (the shim's) into the child's ru_maxrss. /bin/sleep under the
// shim had a ru_maxrss of 39 MiB, its own peak being 1.6 MiB. A plain
// fork would do the same (the copy counts the shim's pages), and the
// fold stays with the process across any later execve.
//
// So the shim reads its own VmHWM once the child has started (its
// high-water mark then is at least the one folded in), and samples the
// child's own VmHWM (of its new memory, never folded) while it lives.
// A ru_maxrss above the shim's mark is the child's (or that of a
// descendant it waited for): exact, also for a peak no sample saw. One
// at or under it may be the shim's, and the child's samples say its
// peak instead. Sampling stops once a sample passes the shim's mark (the
// rusage will tell), so a training of more than a few tens of MiB is
// sampled a few times at its start and never again.
const (
	hwmFirst = 5 * time.Millisecond   // the first interval between samples, doubling ...
	hwmEvery = 100 * time.Millisecond // ... up to this
	// hwmSlack covers the kernel's approximate RSS counters (per CPU)
	// between the mark it folded in and the one the shim reads.
	hwmSlack = 4 << 20
)

// sampleHWM samples the main process's VmHWM right away, then after
// hwmFirst, doubling up to every hwmEvery, until the main process is
// reaped or its mark passes the shim's (childPeak). It closes done when
// it returns.
func (s *shim) sampleHWM(done chan<- struct{}) {
	defer close(done)
	d := hwmFirst
	for {
		// Under reapMu, unreaped: the pid is still the child's.
		s.reapMu.Lock()
		if s.reaped {
			s.reapMu.Unlock()
			return
		}
		if hwm, ok := procfs.ReadHWM(s.child); ok {
			s.childHWM = max(s.childHWM, hwm)
		}
		told := s.childHWM > s.execHWM+hwmSlack
		s.reapMu.Unlock()
		if told {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.exited:
			t.Stop()
			return
		}
		d = min(2*d, hwmEvery)
	}
}

// childPeak is the main process's peak resident memory, given the
// ru_maxrss of its rusage in bytes (called under reapMu as it is reaped):
// that when it passes the shim's own mark at the start (or the shim could
// not read its mark), else the largest VmHWM sampled; 0 when neither
// tells.
func (s *shim) childPeak(maxrss int64) int64 {
	if s.execHWM == 0 || maxrss > s.execHWM+hwmSlack {
		return maxrss
	}
	return s.childHWM
}

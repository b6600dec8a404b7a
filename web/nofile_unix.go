//go:build unix

package web

import "syscall"

// openFileLimit is the process's open-file limit (RLIMIT_NOFILE's soft
// limit; Go raises it to the hard one at start), 0 when unknown.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}

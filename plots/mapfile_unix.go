//go:build unix

package plots

import (
	"io"
	"os"
	"syscall"
)

// mapFile maps a file read-only into memory: its pages are read when
// they are used and shared with every process that maps it. unmap
// releases it. Where it cannot be mapped, the file is read.
func mapFile(path string) (data []byte, unmap func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if size := st.Size(); size > 0 && size == int64(int(size)) {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			return data, func() { syscall.Munmap(data) }, nil
		}
	}
	data, err = io.ReadAll(f)
	return data, func() {}, err
}

package trainer

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirWatch wakes an observer when files in a run directory change (the
// shim appends to the log, renames its final state into place), so that an
// end or an alert is told within milliseconds rather than at the next
// poll. Polling stays as the fallback (filesystems without inotify).
type dirWatch struct {
	f    *os.File
	wake chan struct{}
	done chan struct{}
}

// watchDir starts watching dir; nil when inotify is not available.
func watchDir(dir string) *dirWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return nil
	}
	w := &dirWatch{f: os.NewFile(uintptr(fd), "inotify:"+dir), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.read()
	return w
}

// read turns events into wake-ups (many become one) until close.
func (w *dirWatch) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// C is the wake-up channel; nil (never ready) without a watch.
func (w *dirWatch) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// close stops the watch and waits for its reader.
func (w *dirWatch) close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}

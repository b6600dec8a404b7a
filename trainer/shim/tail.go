package shim

import (
	"bytes"
	"strings"
	"sync"
)

const (
	tailLines   = 40   // State.StderrTail
	tailLineMax = 2048 // bytes of one tail line
)

// tailRing keeps the last tailLines lines of a stream, each cut at
// tailLineMax bytes with invalid UTF-8 replaced. A line ended by '\r' (a
// progress bar redrawing itself) is replaced by the line after it.
type tailRing struct {
	mu      sync.Mutex
	lines   []string // oldest first, at most tailLines
	partial []byte
	cut     bool // partial was cut at tailLineMax
	cr      bool // the newest line ended with '\r'
}

// feed takes the next bytes of the stream.
func (r *tailRing) feed(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			r.add(p)
			return
		}
		r.add(p[:i])
		r.end(p[i] == '\r')
		p = p[i+1:]
	}
}

// flush ends the last line at the end of the stream.
func (r *tailRing) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end(false)
}

func (r *tailRing) add(p []byte) {
	room := tailLineMax - len(r.partial)
	if len(p) > room {
		p, r.cut = p[:room], true
	}
	r.partial = append(r.partial, p...)
}

func (r *tailRing) end(cr bool) {
	if len(r.partial) == 0 && !r.cut {
		if !cr {
			r.cr = false // "\r\n" ends a carriage-return line
		}
		return
	}
	line := strings.ToValidUTF8(string(r.partial), "\uFFFD") // also a rune split by the cut
	r.partial, r.cut = r.partial[:0], false
	if r.cr && len(r.lines) > 0 {
		r.lines[len(r.lines)-1] = line
	} else {
		if len(r.lines) == tailLines {
			r.lines = append(r.lines[:0], r.lines[1:]...)
		}
		r.lines = append(r.lines, line)
	}
	r.cr = cr
}

// last returns the kept lines, oldest first.
func (r *tailRing) last() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return nil
	}
	return append([]string(nil), r.lines...)
}

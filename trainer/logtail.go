package trainer

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Limits of what the bot reads of a run's log.
const (
	readChunk   = 256 << 10 // bytes read from the log at a time
	tailLineMax = 2048      // a tail line longer than this is cut (the log has it whole)
)

// logTail follows a run's output.log by offset, as its supervisor writes
// it, and cuts it into lines at '\n' and '\r'. A line longer than
// logparse.MaxLineLen is cut; the rest of it, up to the next line end, is
// not parsed. NUL bytes (ranges of a log freed past max_log_bytes) are
// skipped.
type logTail struct {
	f        *os.File
	off      int64 // file offset of the next byte to read
	buf      []byte
	partial  []byte
	overlong bool
	cr       bool // the last line ended with '\r': the next replaces it in the tail ring
}

func openLogTail(path string) (*logTail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &logTail{f: f, buf: make([]byte, readChunk)}, nil
}

func (t *logTail) close() {
	if t != nil && t.f != nil {
		t.f.Close()
	}
}

// line is one complete line of the log.
type line struct {
	// text is the tail's read buffer or its partial line, valid only
	// during the call: no string is made of every line of a burst.
	text []byte
	end  int64 // offset just past its line end
	cr   bool  // it replaces the previous line (a progress bar redrawn with '\r')
}

// read reads what the log has now, at most max bytes, and calls fn for
// every complete line. It returns the bytes read (0 at the end of what is
// written).
func (t *logTail) read(max int, fn func(line)) (int, error) {
	total := 0
	for total < max {
		n, err := t.f.ReadAt(t.buf, t.off)
		if n > 0 {
			t.feed(t.buf[:n], fn)
			total += n
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return total, nil
			}
			return total, err
		}
	}
	return total, nil
}

func (t *logTail) feed(p []byte, fn func(line)) {
	// nl is the index in p of the next '\n' (-1: none in p), found once
	// per '\n', not once per line: a progress bar redrawn with '\r' puts
	// thousands of lines before it.
	nl := bytes.IndexByte(p, '\n')
	for len(p) > 0 {
		i := indexLineEnd(p, nl)
		if i < 0 {
			t.add(p)
			t.off += int64(len(p))
			return
		}
		t.off += int64(i + 1)
		if len(t.partial) == 0 && !t.overlong {
			t.emitFrom(p[:i], p[i] == '\r', fn) // out of the read buffer: no copy
		} else {
			t.add(p[:i])
			t.emit(p[i] == '\r', fn)
		}
		p = p[i+1:]
		if nl >= 0 {
			if nl -= i + 1; nl < 0 {
				nl = bytes.IndexByte(p, '\n')
			}
		}
	}
}

// flush ends the last line, which has no line end (the run is over).
func (t *logTail) flush(fn func(line)) {
	if len(t.partial) > 0 || t.overlong {
		t.emit(false, fn)
	}
}

// indexLineEnd finds the first '\n' or '\r' of p, given nl, the index of
// its first '\n' (-1: none). IndexByte is vectorised.
func indexLineEnd(p []byte, nl int) int {
	seg := p
	if nl >= 0 {
		seg = p[:nl]
	}
	if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
		return cr
	}
	return nl
}

func (t *logTail) add(p []byte) {
	if len(t.partial) == 0 {
		p = bytes.TrimLeft(p, "\x00")
	}
	room := logparse.MaxLineLen - len(t.partial)
	if len(p) > room {
		p = p[:max(room, 0)]
		t.overlong = true
	}
	t.partial = append(t.partial, p...)
}

func (t *logTail) emit(cr bool, fn func(line)) {
	if len(t.partial) == 0 && !t.overlong {
		if !cr {
			t.cr = false // "\r\n" ends the carriage-return line
		}
		return
	}
	l := line{text: t.partial, end: t.off, cr: t.cr}
	t.overlong = false
	t.cr = cr
	fn(l)
	t.partial = t.partial[:0]
	if cap(t.partial) > 1<<20 {
		t.partial = nil
	}
}

// emitFrom is add(p) then emit, for a line that began in p (nothing
// partial): the line is p itself, not a copy.
func (t *logTail) emitFrom(p []byte, cr bool, fn func(line)) {
	p = bytes.TrimLeft(p, "\x00")
	if len(p) > logparse.MaxLineLen {
		p = p[:logparse.MaxLineLen]
	}
	if len(p) == 0 {
		if !cr {
			t.cr = false // "\r\n" ends the carriage-return line
		}
		return
	}
	l := line{text: p, end: t.off, cr: t.cr}
	t.cr = cr
	fn(l)
}

// shown is a line as the tail ring shows it: cut, valid UTF-8.
func shown(text string) string {
	if len(text) > tailLineMax {
		text = text[:tailLineMax] + "…"
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	return text
}

// lineTimes tells when each part of a log was read by the run's
// supervisor, from its output.idx, so that points get the time their line
// was written, not the time the bot got to it (after a restart, or behind
// a backlog).
type lineTimes struct {
	path string
	f    *os.File             // the index, open once it exists (close)
	next int64                // the next record to read
	recs []shimctl.IndexEntry // records not yet passed, in offset order
	last time.Time            // the time given last: times never go back
	read bool                 // the index was read to its end since the last refresh
	// now is the clock read for lines the index does not cover yet, given
	// to nowLeft more of them: a live burst (the bot keeping up with the
	// shim) is 10⁶ such lines a second, and a clock reading per line was
	// 13 % of the bot's CPU on a VM (~60 ns each); 256 lines are parsed in
	// under 0.1 ms.
	now     time.Time
	nowLeft int
}

// nowLines is how many uncovered lines share one clock reading.
const nowLines = 256

// refresh lets at read the index again (once per read of the log: lines
// at the end of a log the index does not cover yet do not each reopen it),
// and the clock.
func (lt *lineTimes) refresh() { lt.read, lt.nowLeft = false, 0 }

// at returns the time the line ending at offset end was read. A line the
// index does not cover yet was read just now.
func (lt *lineTimes) at(end int64) time.Time {
	for len(lt.recs) > 0 && lt.recs[0].Offset < end {
		lt.recs = lt.recs[1:]
	}
	if len(lt.recs) == 0 && !lt.read {
		recs, err := lt.readIndex()
		lt.read = err != nil || len(recs) == 0 || recs[len(recs)-1].Offset < end
		if err == nil && len(recs) > 0 {
			lt.next += int64(len(recs))
			lt.recs = recs
			for len(lt.recs) > 0 && lt.recs[0].Offset < end {
				lt.recs = lt.recs[1:]
			}
		}
	}
	var t time.Time
	if len(lt.recs) > 0 {
		t = lt.recs[0].Time
	} else {
		if lt.nowLeft == 0 { // not once per line, nor for lines the index covers
			lt.now, lt.nowLeft = time.Now(), nowLines
		}
		lt.nowLeft--
		t = lt.now
	}
	if t.Before(lt.last) {
		t = lt.last
	}
	lt.last = t
	return t
}

// readIndex reads the index's records from lt.next on, opening it the
// first time it exists.
func (lt *lineTimes) readIndex() ([]shimctl.IndexEntry, error) {
	if lt.f == nil {
		f, err := os.Open(lt.path)
		if err != nil {
			return nil, err // not written yet, or no descriptor left: the next read tries again
		}
		lt.f = f
	}
	return shimctl.ReadIndexFile(lt.f, lt.next)
}

// close closes the index.
func (lt *lineTimes) close() {
	if lt.f != nil {
		lt.f.Close()
		lt.f = nil
	}
}

// ring keeps the last n lines. Each slot keeps its bytes (the first
// tailLineMax+1 of its line: enough for shown to tell it was cut), reused
// by the lines that follow: a line costs a copy, not an allocation, and
// shown is applied to the few that are asked for. The observer puts lines
// into its own copy, without the lock, and publishes what changed after
// each read of the log (a lock per read, not per line); last reads what
// was published.
type ring struct {
	stage   ringLines // the observer's: put, publish
	changed int       // the newest slots of stage changed since publish

	mu    sync.Mutex
	lines ringLines // what last reads
}

// ringLines is the slots of a ring: next is the next to fill, full says
// that every slot was filled once.
type ringLines struct {
	slots [][]byte
	next  int
	full  bool
}

func newRing(n int) *ring {
	n = max(n, 1)
	return &ring{stage: ringLines{slots: make([][]byte, n)}, lines: ringLines{slots: make([][]byte, n)}}
}

// put adds a line (a copy of it); replace overwrites the newest line
// instead (a progress bar redrawn with '\r'). Only the observer calls it;
// last shows it after the next publish.
func (r *ring) put(b []byte, replace bool) {
	b = b[:min(len(b), tailLineMax+1)]
	st := &r.stage
	if replace && (st.next > 0 || st.full) {
		i := (st.next - 1 + len(st.slots)) % len(st.slots)
		st.slots[i] = append(st.slots[i][:0], b...)
		r.changed = max(r.changed, 1)
		return
	}
	st.slots[st.next] = append(st.slots[st.next][:0], b...)
	st.next++
	if st.next == len(st.slots) {
		st.next, st.full = 0, true
	}
	r.changed = min(r.changed+1, len(st.slots))
}

// publish makes the lines put so far those last returns: it copies the
// slots that changed (every changed slot is among the newest changed
// ones: a line fills the next slot, a replace the newest).
func (r *ring) publish() {
	if r.changed == 0 {
		return
	}
	st := &r.stage
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(st.slots)
	for k := range r.changed {
		i := (st.next - 1 - k + 2*n) % n
		r.lines.slots[i] = append(r.lines.slots[i][:0], st.slots[i]...)
	}
	r.lines.next, r.lines.full = st.next, st.full
	r.changed = 0
}

// last returns up to n of the newest lines published, oldest first.
func (r *ring) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.lines
	size := l.next
	if l.full {
		size = len(l.slots)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]string, 0, n)
	for i := size - n; i < size; i++ {
		j := i
		if l.full {
			j = (l.next + i) % len(l.slots)
		}
		out = append(out, shown(string(l.slots[j])))
	}
	return out
}

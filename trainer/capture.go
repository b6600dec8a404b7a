package trainer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// Capture limits.
const (
	readChunk     = 64 << 10
	parseQueueMax = 64 << 20 // bytes of lines waiting for the parser before lines are dropped
	tailLineMax   = 2048     // a tail line longer than this is cut (the log has it whole)
	stderrKeep    = 40       // stderr lines kept for the failure detail
	// lineOverhead is what a queued line costs beside its text: its outLine
	// in the queue's slice and the rounding of its text's allocation.
	lineOverhead = 48
)

// outLine is one line handed to the parser.
type outLine struct {
	text   string
	stderr bool
}

// capture reads a child's stdout and stderr so that the child never waits
// on us: each stream has a reader goroutine that copies chunks to the run
// log and splits lines; parsing happens on another goroutine fed through a
// queue bounded in bytes (64 MiB) that drops lines (counted) rather than
// block the reader.
type capture struct {
	logMu   sync.Mutex
	logFile *os.File
	logBuf  *bufio.Writer
	logged  int64
	maxLog  int64
	capped  bool
	logErr  error

	tail    *ring
	errTail *ring

	lines   *lineQueue
	dropped atomic.Int64
	start   time.Time    // when the capture began, with its monotonic clock reading
	last    atomic.Int64 // nanoseconds from start to the last output (monotonic)
	readers sync.WaitGroup
	eof     chan struct{} // closed when both readers have ended
}

func newCapture(logFile *os.File, maxLog int64, tailLines int) *capture {
	c := &capture{
		logFile: logFile,
		logBuf:  bufio.NewWriterSize(logFile, 256<<10),
		maxLog:  maxLog,
		tail:    newRing(tailLines),
		errTail: newRing(stderrKeep),
		lines:   newLineQueue(parseQueueMax),
		eof:     make(chan struct{}),
	}
	c.start = time.Now()
	return c
}

// read starts the reader goroutine for one stream.
func (c *capture) read(r io.Reader, stderr bool) {
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		sp := splitter{stderr: stderr, c: c}
		buf := make([]byte, readChunk)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				c.last.Store(int64(time.Since(c.start)))
				c.writeLog(buf[:n])
				sp.feed(buf[:n])
			}
			if err != nil {
				sp.flush()
				return
			}
		}
	}()
}

// lastOutput is when the child last printed (when the capture began, if it
// has not), on the monotonic clock.
func (c *capture) lastOutput() time.Time {
	return c.start.Add(time.Duration(c.last.Load()))
}

// done closes the parse queue once both readers have ended.
func (c *capture) done() {
	c.readers.Wait()
	close(c.eof)
	c.lines.close()
}

func (c *capture) writeLog(p []byte) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.capped || c.logErr != nil {
		return
	}
	if c.maxLog > 0 && c.logged+int64(len(p)) > c.maxLog {
		keep := c.maxLog - c.logged
		if keep > 0 {
			c.logBuf.Write(p[:keep])
		}
		c.capped = true
		fmt.Fprintf(c.logBuf, "\n[trainbot] the log reached its limit of %d bytes; further output is not written to this file (it is still parsed)\n", c.maxLog)
		return
	}
	if _, err := c.logBuf.Write(p); err != nil {
		c.logErr = err
	}
	c.logged += int64(len(p))
}

// note writes a trainbot line into the log.
func (c *capture) note(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	fmt.Fprintf(c.logBuf, "[trainbot] "+format+"\n", args...)
}

func (c *capture) flushLog() error {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if err := c.logBuf.Flush(); err != nil && c.logErr == nil {
		c.logErr = err
	}
	return c.logErr
}

func (c *capture) closeLog() error {
	err := c.flushLog()
	return errors.Join(err, c.logFile.Close())
}

// splitter cuts a stream into lines at '\n' and '\r'. A line longer than
// logparse.MaxLineLen is cut; the rest of it, up to the next newline, is not
// parsed.
type splitter struct {
	c        *capture
	stderr   bool
	partial  []byte
	overlong bool
	cr       bool // the last line ended with '\r': the next replaces it in the tail
}

func (sp *splitter) feed(p []byte) {
	for len(p) > 0 {
		i := indexLineEnd(p)
		if i < 0 {
			sp.add(p)
			return
		}
		sp.add(p[:i])
		sp.emit(p[i] == '\r')
		p = p[i+1:]
	}
}

// indexLineEnd finds the first '\n' or '\r' (IndexByte is vectorised).
func indexLineEnd(p []byte) int {
	nl := bytes.IndexByte(p, '\n')
	seg := p
	if nl >= 0 {
		seg = p[:nl]
	}
	if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
		return cr
	}
	return nl
}

func (sp *splitter) add(p []byte) {
	room := logparse.MaxLineLen - len(sp.partial)
	if len(p) > room {
		p = p[:max(room, 0)]
		sp.overlong = true
	}
	sp.partial = append(sp.partial, p...)
}

func (sp *splitter) emit(cr bool) {
	if len(sp.partial) == 0 && !sp.overlong {
		if !cr {
			sp.cr = false // "\r\n" ends the carriage-return line
		}
		return
	}
	text := string(sp.partial)
	sp.partial = sp.partial[:0]
	if cap(sp.partial) > 1<<20 {
		sp.partial = nil
	}
	sp.overlong = false
	c := sp.c
	shown := text
	if len(shown) > tailLineMax {
		shown = shown[:tailLineMax] + "…"
	}
	if !utf8.ValidString(shown) {
		shown = strings.ToValidUTF8(shown, "\uFFFD")
	}
	c.tail.put(shown, sp.cr)
	if sp.stderr {
		c.errTail.put(shown, sp.cr)
	}
	sp.cr = cr
	if !c.lines.push(outLine{text: text, stderr: sp.stderr}) {
		c.dropped.Add(1)
	}
}

func (sp *splitter) flush() {
	if len(sp.partial) > 0 || sp.overlong {
		sp.emit(false)
	}
}

// ring keeps the last n lines.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, max(n, 1))} }

// put adds a line; replace overwrites the newest line instead (a progress
// bar redrawn with '\r').
func (r *ring) put(s string, replace bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if replace && (r.next > 0 || r.full) {
		i := (r.next - 1 + len(r.lines)) % len(r.lines)
		r.lines[i] = s
		return
	}
	r.lines[r.next] = s
	r.next++
	if r.next == len(r.lines) {
		r.next, r.full = 0, true
	}
}

// last returns up to n of the newest lines, oldest first.
func (r *ring) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = len(r.lines)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]string, 0, n)
	for i := size - n; i < size; i++ {
		j := i
		if r.full {
			j = (r.next + i) % len(r.lines)
		}
		out = append(out, r.lines[j])
	}
	return out
}

// lineQueue hands lines from the readers to the parser. push never blocks;
// it refuses a line when the queue would hold more than max bytes, counting
// each line's overhead as well as its text.
type lineQueue struct {
	mu     sync.Mutex
	lines  []outLine
	bytes  int
	max    int
	closed bool
	ready  chan struct{} // signalled when lines arrive or the queue closes
}

func newLineQueue(max int) *lineQueue {
	return &lineQueue{max: max, ready: make(chan struct{}, 1)}
}

func (q *lineQueue) push(l outLine) bool {
	cost := len(l.text) + lineOverhead
	q.mu.Lock()
	if q.bytes+cost > q.max {
		q.mu.Unlock()
		return false
	}
	q.lines = append(q.lines, l)
	q.bytes += cost
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take waits for lines and returns all of them, reusing buf; ok is false
// once the queue is closed and empty.
func (q *lineQueue) take(buf []outLine) (lines []outLine, ok bool) {
	for {
		q.mu.Lock()
		if len(q.lines) > 0 {
			lines, q.lines = q.lines, buf[:0]
			q.bytes = 0
			q.mu.Unlock()
			return lines, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

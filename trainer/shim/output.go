package shim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// The output path. The child writes into two pipes; one reader goroutine
// per pipe moves what it reads into a bounded queue in memory; one writer
// goroutine moves the queue to output.log. The queue's mutex is never held
// during disk I/O, and a reader never waits for the writer: when the queue
// is full it drops (and counts) what it read. So whatever the disk does
// (slow, stalled, full), the child's writes only ever wait for a reader's
// memmove.

const (
	pipeBytes    = 1 << 20   // the capacity asked for the child's pipes
	readChunk    = 256 << 10 // one read from a pipe
	maxPartial   = 64 << 10  // a line longer than this is queued in pieces
	retryEvery   = time.Second
	indexEvery   = 100 * time.Millisecond
	indexBytes   = 1 << 20
	punchStep    = 1 << 20 // the log is freed in whole, aligned MiB
	maxCapHead   = 8 << 20 // the start of the log that is never freed
	trimCapacity = 4 << 20 // buffers grown past this are let go once empty
)

// Reasons for dropped output.
const (
	reasonStalled = "the disk did not keep up (stalled)"
	reasonCap     = "log reached max_log_bytes"
)

// mark is where a chunk ends in a queued buffer and when it was read.
type mark struct {
	end  int
	read int64 // Unix nanoseconds
}

// queue is the bounded buffer between the pipe readers and the writer.
type queue struct {
	mu       sync.Mutex
	pending  []byte // whole lines and notes, in log order
	marks    []mark
	buffered int64 // pending plus what the writer took but has not written
	limit    int64
	closed   bool

	read       int64 // output read from the pipes
	dropped    int64
	unmarked   int64  // dropped since the last marker line
	reason     string // why output was last dropped
	writeErr   error  // the writer's last write error, nil after a success
	refuse     string // output is no longer written at all (the log cap cannot be kept)
	lastOutput time.Time
	midLine    bool // the last byte queued was not a newline (a last line without one)

	wake chan struct{} // cap 1: the writer has something to do
}

func newQueue(limit int64) *queue {
	if limit <= 0 {
		limit = shimctl.DefaultBufferBytes
	}
	return &queue{limit: limit, wake: make(chan struct{}, 1)}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// put queues output read at t, or drops it when the queue is full. It
// never blocks on anything but the mutex. An empty queue takes any chunk,
// so the queue may exceed its limit by one chunk (at most readChunk +
// maxPartial, 320 KiB).
func (q *queue) put(p []byte, t time.Time) {
	q.mu.Lock()
	q.read += int64(len(p))
	q.lastOutput = t
	switch {
	case q.closed:
		q.drop(len(p), "the run's output was no longer read")
	case q.refuse != "":
		q.drop(len(p), q.refuse)
	case q.buffered > 0 && q.buffered+int64(len(p)) > q.limit:
		reason := reasonStalled
		if q.writeErr != nil {
			reason = errText(q.writeErr)
		}
		q.drop(len(p), reason)
	default:
		q.markDropsLocked()
		q.appendLocked(p, t.UnixNano())
	}
	q.mu.Unlock()
}

func (q *queue) drop(n int, reason string) {
	q.dropped += int64(n)
	q.unmarked += int64(n)
	q.reason = reason
}

// note queues a "[trainbot] " line; notes are never dropped.
func (q *queue) note(format string, args ...any) {
	q.mu.Lock()
	q.markDropsLocked()
	q.noteLocked(fmt.Sprintf(format, args...))
	q.mu.Unlock()
}

// noteLocked queues a "[trainbot] " line on a line of its own: after a last
// output line without a newline, a newline first.
func (q *queue) noteLocked(text string) {
	line := "[trainbot] " + text + "\n"
	if q.midLine {
		line = "\n" + line
	}
	q.appendLocked([]byte(line), time.Now().UnixNano())
}

// markDropsLocked queues the marker line for output dropped since the
// last one, at the place of the gap.
func (q *queue) markDropsLocked() {
	if q.unmarked == 0 {
		return
	}
	text := fmt.Sprintf("%d bytes of output were dropped: %s", q.unmarked, q.reason)
	q.unmarked = 0
	q.noteLocked(text)
}

func (q *queue) appendLocked(p []byte, read int64) {
	if len(p) > 0 {
		q.midLine = p[len(p)-1] != '\n'
	}
	q.pending = append(q.pending, p...)
	q.marks = append(q.marks, mark{end: len(q.pending), read: read})
	q.buffered += int64(len(p))
	q.signal()
}

// close queues the marker of the last drops and a last note, and tells
// the writer to finish.
func (q *queue) close(lastNote string) {
	q.mu.Lock()
	q.markDropsLocked()
	if lastNote != "" {
		q.noteLocked(lastNote)
	}
	q.closed = true
	q.signal()
	q.mu.Unlock()
}

// outputStats is what State reports of the output.
type outputStats struct {
	read, dropped, buffered int64
	reason                  string
	lastOutput              time.Time
}

func (q *queue) stats() outputStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return outputStats{read: q.read, dropped: q.dropped, buffered: q.buffered, reason: q.reason, lastOutput: q.lastOutput}
}

func errText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error() // "no space left on device", without the path
	}
	return err.Error()
}

// growPipe asks for a pipe of pipeBytes (Linux's default is 64 KiB, its
// default limit for unprivileged users 1 MiB). A child that prints in
// bursts fills 64 KiB in well under a millisecond and then waits until the
// shim is scheduled to read; with 1 MiB it goes on printing meanwhile.
// Where the limit is lower, the pipe keeps the size it has.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		for size := pipeBytes; size > 64<<10; size /= 2 {
			if _, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size); err == nil {
				return
			}
		}
	})
}

// lastLineEnd is the index of the last '\n' or '\r' in p, -1 when none.
func lastLineEnd(p []byte) int {
	return max(bytes.LastIndexByte(p, '\n'), bytes.LastIndexByte(p, '\r'))
}

// readPipe reads one of the child's pipes until EOF (or until its read
// deadline is set: the end stops reading a pipe that something it could
// not kill holds open) and queues whole lines: the partial line after the
// last line end waits for the rest, unless it grows past maxPartial (then
// it is queued as it is) or the stream ends (then it is queued with a '\n'
// added). tail, when not nil, sees every byte (stderr).
func readPipe(f *os.File, q *queue, tail *tailRing) {
	buf := make([]byte, readChunk)
	partial := make([]byte, 0, maxPartial)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			now := time.Now()
			data := buf[:n]
			if tail != nil {
				tail.feed(data)
			}
			if i := lastLineEnd(data); i < 0 {
				partial = append(partial, data...)
			} else if len(partial) == 0 {
				q.put(data[:i+1], now)
				partial = append(partial, data[i+1:]...)
			} else {
				partial = append(partial, data[:i+1]...)
				q.put(partial, now)
				partial = append(partial[:0], data[i+1:]...)
			}
			if len(partial) > maxPartial {
				q.put(partial, now)
				partial = partial[:0]
			}
		}
		if err != nil {
			if len(partial) > 0 {
				// The stream ended inside a line: end it, so that what
				// follows in the log (a note, the other stream) starts a line.
				q.put(append(partial, '\n'), time.Now())
			}
			if tail != nil {
				tail.flush()
			}
			return
		}
	}
}

// writer moves the queue to output.log and appends index records.
type writer struct {
	q     *queue
	out   io.Writer // output.log, or a test's wrapper of it
	logFD int       // output.log itself (punching holes)
	idx   *os.File
	capB  int64 // Spec.MaxLogBytes
	notef func(format string, args ...any)
	errf  func(msg string, err error) // the shim's own log

	size    atomic.Int64 // bytes in output.log
	cur     []byte       // taken from the queue, not yet written
	marks   []mark
	newest  int64 // read time of the newest chunk written
	recOff  int64 // offset of the last index record
	recAt   time.Time
	idxBuf  []byte       // records not yet written
	punched atomic.Int64 // the log is freed from capHead up to here
	capSaid bool

	abandon atomic.Bool // the end gave up waiting: drop the rest
}

func newWriter(q *queue, out io.Writer, log, idx *os.File, capBytes int64) (*writer, error) {
	st, err := log.Stat()
	if err != nil {
		return nil, err
	}
	w := &writer{q: q, out: out, logFD: int(log.Fd()), idx: idx, capB: capBytes, recAt: time.Now()}
	w.size.Store(st.Size())
	w.recOff = st.Size()
	return w, nil
}

// run writes until the queue is closed and empty (or the end abandons it
// after a write error), then writes the last index record.
func (w *writer) run(done chan<- struct{}) {
	defer close(done)
	for {
		if len(w.cur) == 0 && !w.take() {
			break
		}
		if len(w.cur) == 0 {
			continue
		}
		n, err := w.out.Write(w.cur)
		w.wrote(n, err)
		if err != nil {
			if w.abandon.Load() {
				w.dropRest()
				break
			}
			w.pause()
			continue
		}
		w.afterWrite()
	}
	w.record(time.Now())
	w.flushIndex()
}

// take waits for queued output and swaps it in; false when the queue is
// closed and empty. While it waits, an index record falls due 100 ms
// after output was written.
func (w *writer) take() bool {
	for {
		w.q.mu.Lock()
		if len(w.q.pending) > 0 {
			spare, spareMarks := w.cur[:0], w.marks[:0]
			if cap(spare) > trimCapacity { // grown by a stall: let it go
				spare, spareMarks = nil, nil
			}
			w.cur, w.q.pending = w.q.pending, spare
			w.marks, w.q.marks = w.q.marks, spareMarks
			w.q.mu.Unlock()
			return true
		}
		closed := w.q.closed
		w.q.mu.Unlock()
		if closed {
			return false
		}
		if cap(w.cur) > trimCapacity {
			w.cur, w.marks = nil, nil
		}
		if w.size.Load() == w.recOff {
			<-w.q.wake
			continue
		}
		t := time.NewTimer(max(time.Until(w.recAt.Add(indexEvery)), 0))
		select {
		case <-w.q.wake:
		case now := <-t.C:
			w.record(now)
			w.flushIndex()
		}
		t.Stop()
	}
}

// wrote accounts for n bytes written out of w.cur.
func (w *writer) wrote(n int, err error) {
	if n > 0 {
		w.size.Add(int64(n))
		i := 0
		for i < len(w.marks) && w.marks[i].end <= n {
			w.newest = w.marks[i].read
			i++
		}
		if i < len(w.marks) && (i == 0 || w.marks[i-1].end < n) {
			w.newest = w.marks[i].read // a chunk written in part
		}
		w.marks = w.marks[i:]
		for j := range w.marks {
			w.marks[j].end -= n
		}
		w.cur = w.cur[n:]
	}
	w.q.mu.Lock()
	w.q.buffered -= int64(n)
	prev := w.q.writeErr
	w.q.writeErr = err
	if err == nil {
		// The writer has written again: the marker goes where the gap is,
		// which is the end of the queue (a chunk queued after the gap
		// would have placed it already).
		w.q.markDropsLocked()
	}
	w.q.mu.Unlock()
	switch {
	case err != nil && (prev == nil || prev.Error() != err.Error()):
		w.errf("write output.log (retried every second)", err)
	case err == nil && prev != nil:
		w.errf("output.log is written again after an error", prev)
	}
}

// pause waits a second before the writer retries a failed write.
func (w *writer) pause() {
	t := time.NewTimer(retryEvery)
	defer t.Stop()
	<-t.C
}

// dropRest counts what could not be written as dropped (the end gave up
// on a disk that did not come back).
func (w *writer) dropRest() {
	w.q.mu.Lock()
	rest := int64(len(w.cur)) + int64(len(w.q.pending))
	w.q.dropped += rest
	w.q.buffered -= rest
	if w.q.writeErr != nil {
		w.q.reason = errText(w.q.writeErr)
	} else {
		w.q.reason = reasonStalled
	}
	w.q.pending = w.q.pending[:0]
	w.q.mu.Unlock()
	w.cur, w.marks = nil, nil
}

// afterWrite appends an index record when one is due and keeps the log
// under its cap.
func (w *writer) afterWrite() {
	now := time.Now()
	size := w.size.Load()
	if now.Sub(w.recAt) >= indexEvery || size-w.recOff >= indexBytes {
		w.record(now)
		w.flushIndex()
	}
	w.keepCap(size)
}

// record queues an index record for everything written so far.
func (w *writer) record(now time.Time) {
	size := w.size.Load()
	read := w.newest
	if read == 0 {
		read = now.UnixNano()
	}
	var rec [shimctl.IndexRecordSize]byte
	binary.LittleEndian.PutUint64(rec[0:8], uint64(size))
	binary.LittleEndian.PutUint64(rec[8:16], uint64(read))
	w.idxBuf = append(w.idxBuf, rec[:]...)
	w.recOff, w.recAt = size, now
}

// flushIndex writes the queued records; what a full disk refuses is kept
// (a partial record too, so records stay aligned) and tried again later.
func (w *writer) flushIndex() {
	if len(w.idxBuf) == 0 {
		return
	}
	n, err := w.idx.Write(w.idxBuf)
	w.idxBuf = w.idxBuf[:copy(w.idxBuf, w.idxBuf[n:])]
	if err != nil {
		w.errf("write output.idx", err)
	}
}

// capHead is the start of the log that the cap never frees: 8 MiB, less
// for a cap under 16 MiB (half the cap, whole MiB).
func capHead(capBytes int64) int64 {
	return min(maxCapHead, capBytes/2/punchStep*punchStep)
}

// keepCap frees the oldest output after the cap's head so that the log
// takes at most capB of disk while its offsets keep growing.
func (w *writer) keepCap(size int64) {
	if w.capB <= 0 || size <= w.capB {
		return
	}
	head := capHead(w.capB)
	from := max(w.punched.Load(), head)
	end := (size - w.capB + head + punchStep - 1) / punchStep * punchStep
	end = min(end, size/punchStep*punchStep)
	if end <= from {
		return
	}
	err := unix.Fallocate(w.logFD, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, end-from)
	switch {
	case err == nil:
		w.punched.Store(end)
		if !w.capSaid {
			w.capSaid = true
			w.notef("the log passed max_log_bytes (%d): older output after the first %s is freed as it grows", w.capB, mib(head))
		}
	case errors.Is(err, unix.EOPNOTSUPP):
		w.q.mu.Lock()
		first := w.q.refuse == ""
		w.q.refuse = reasonCap
		w.q.mu.Unlock()
		if first {
			w.notef("the log passed max_log_bytes (%d) and its filesystem cannot free older output: output from now on is not written", w.capB)
		}
	default:
		w.errf("free old output", err) // tried again after the next write
	}
}

func mib(n int64) string {
	if n%punchStep == 0 {
		return fmt.Sprintf("%d MiB", n/punchStep)
	}
	return fmt.Sprintf("%d bytes", n)
}

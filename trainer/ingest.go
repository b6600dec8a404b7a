package trainer

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/shimctl"
	"github.com/trainbot/trainbot/trainer/tfevents"
)

// The ingestion of a run: its log (output.log by offset, with the index's
// times), its metrics file and its TensorBoard event files, parsed into
// points that go to the Recorder with the offsets they were read to. Only
// the observer goroutine calls these.

// notePrefix starts the lines the run's supervisor writes into the log
// (start, stop, drops, end): they are shown, never parsed.
const notePrefix = "[trainbot] "

// handleOutput takes one line of the log. l.text is the log tail's
// buffer: what is kept of it is copied (the tail ring's slot, an OOM's
// line), and the parser keeps nothing of it.
func (a *active) handleOutput(l line, lt *lineTimes) {
	a.tail.put(l.text, l.cr)
	text := unsafe.String(unsafe.SliceData(l.text), len(l.text)) // valid during this call only
	if strings.HasPrefix(text, notePrefix) {
		note := text[len(notePrefix):]
		a.ending = a.ending || note == shimctl.EndNote || strings.HasPrefix(note, shimctl.EndNote+": ")
		return
	}
	replay := l.end <= a.stored
	if !replay && a.stored > 0 && !a.caughtUp {
		// Past what an earlier trainbot stored: its last thinnings may
		// not have run; they change nothing if they did.
		a.caughtUp = true
		for name := range a.names {
			if w := a.thin.width(name); w > 1 {
				a.thinPoints(name, w)
			}
		}
	}
	at := lt.at(l.end)
	a.handleLine(at, l.text, false, replay)
}

// storeOffsets queues the read offsets after the points they cover.
func (a *active) storeOffsets(logOff int64) {
	if logOff <= a.stored && a.metrics.off <= a.metrics.stored {
		return
	}
	a.stored = max(a.stored, logOff)
	a.metrics.stored = max(a.metrics.stored, a.metrics.off)
	a.queuePoints()
	a.sup.opts.Recorder.SetOffsets(a.run.ID, a.stored, a.metrics.stored)
}

// Bounds on the reads of one readEvents, readBudget each: while the run
// goes on (the loop looks at its control channels between two), and at its
// end (everything the files have: 16 GiB).
const (
	eventsRounds    = 16
	eventsEndRounds = 4096
)

// readEvents reads what the run's event files gained, and queues the
// offsets they are read to after the points read from them; at the end
// of the run (final), all of it.
func (a *active) readEvents(final bool) {
	if a.events == nil {
		return
	}
	rounds := eventsRounds
	if final {
		rounds = eventsEndRounds
	}
	for range rounds {
		n := a.events.Poll(readBudget, a.handleEventRecord)
		for rel, f := range a.events.Files {
			if f.Off > a.eventOff[rel] {
				a.eventOff[rel] = f.Off
				a.queuePoints()
				a.sup.opts.Recorder.SetEventOffset(a.run.ID, rel, f.Off)
			}
		}
		if n < readBudget {
			return
		}
	}
}

// reportTorn logs, at the end of a run, the event files whose last record
// was never completed (their writer died mid-record).
func (a *active) reportTorn() {
	if a.events == nil {
		return
	}
	for _, f := range a.events.TornAtEnd() {
		a.log.Warn("event file ends with an incomplete record: left out", "file", f.Path, "bytes", f.Torn)
	}
}

// handleEventRecord takes the scalars of one event file record.
func (a *active) handleEventRecord(r tfevents.DirRecord) {
	pts := make([]logparse.Point, 0, len(r.Scalars))
	var step int64
	for _, s := range r.Scalars {
		pts = append(pts, logparse.Point{Step: s.Step, Epoch: math.NaN(), Name: tfevents.MetricName(r.File.Sub(), s.Tag), Value: s.Value})
		step = max(step, s.Step)
	}
	pts = a.limitNames(pts, r.Replay)
	if len(pts) == 0 {
		return
	}
	for _, p := range pts {
		a.eventNames[p.Name] = true
	}
	at := time.Now()
	if w := r.Scalars[0].WallTime; w > 0 {
		at = time.Unix(0, int64(w*1e9))
	}
	a.mu.Lock()
	a.eventStep = max(a.eventStep, step)
	a.mu.Unlock()
	a.keepPoints(at, pts, SourceEvents, r.Replay)
	a.observePoints(at, pts, "", r.Replay, a.parser.Progress())
}

// handleLine parses one line (of output, or of the metrics file) read at
// time at. A replayed line (stored before a restart) only rebuilds state.
// b is the caller's buffer (the log tail's): nothing of it is kept
// uncopied.
func (a *active) handleLine(at time.Time, b []byte, fromMetricsFile, replay bool) {
	text := unsafe.String(unsafe.SliceData(b), len(b)) // valid during this call only
	pts, rd := a.parser.AppendRead(a.lineBuf[:0], b)
	if !fromMetricsFile {
		// Where a traceback says the script was: the OOM that ends it
		// names the user's line (train.py:28).
		if strings.IndexByte(text, '"') >= 0 && strings.Contains(text, "File \"") { // most lines have no '"': one vectorised pass
			if f, user, ok := tracebackFrame(text); ok && user {
				a.frame = f
			}
		} else if strings.HasPrefix(text, "Traceback (most recent call last)") {
			a.frame = ""
		}
		if o, ok := a.detectOOM(text, rd.Layout); ok {
			o.Line = strings.Clone(o.Line) // of text: the tail's buffer
			if o.Frame == "" {
				o.Frame = a.frame
			}
			if o.Kind == "host" && o.TotalBytes == 0 && a.run.Host == "" && a.run.Runner != RunnerSlurm {
				o.TotalBytes = hostMemTotal()
			}
			a.mu.Lock()
			first := a.oom == nil
			if first || (a.oom.TriedBytes == 0 && o.TriedBytes > 0) {
				a.oom = o
			}
			a.mu.Unlock()
			if first && !replay {
				a.queuePoints() // the points read before it are in the store's queue, as the alert goes out
				a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeOOM, Text: o.Summary(), OOM: o},
					Fit: a.sup.MemoryFit(a.job, a.snapshot(), o)})
			}
		}
	}
	pts = a.limitNames(pts, replay)
	a.lineBuf = pts[:0] // the next line's: nothing below keeps pts
	if len(pts) == 0 {
		if a.nanW.watching() {
			a.observePoints(at, nil, text, replay, rd.Progress) // a progress bar may show the NaN loss again
		}
		return
	}
	a.keepPoints(at, pts, SourceOutput, replay)
	a.observePoints(at, pts, text, replay, rd.Progress)
}

// maxOOMFree bounds active.oomFree: a script prints a few layouts.
const maxOOMFree = 64

// detectOOM is DetectOOM(line), decided once for the lines of a layout
// the parser read line by (LineRead.Layout, 0 for none) that are no
// out-of-memory error: they differ from each other only in digits, which
// none of the words DetectOOM looks for has (the lines of
// "step=N loss=X" never say "memory" however their numbers read).
func (a *active) detectOOM(line string, layout uint64) (*OOM, bool) {
	if layout != 0 && (layout == a.lastOOMFree || a.oomFree[layout]) {
		a.lastOOMFree = layout // most lines are of the layout before them: no map lookup
		return nil, false
	}
	o, ok := DetectOOM(line)
	if !ok && layout != 0 {
		if a.oomFree == nil || len(a.oomFree) >= maxOOMFree {
			a.oomFree = make(map[uint64]bool)
		}
		a.oomFree[layout] = true
		a.lastOOMFree = layout
	}
	return o, ok
}

// pendMax is how many points wait in active.pend, at most, before they
// are queued for the store.
const pendMax = 4096

// keepPoints passes the points of one line or record, read from src at
// time at, through the thinner, and gathers those to store in a.pend
// (none for a replayed line), and asks the store for the thinnings they
// need after them.
func (a *active) keepPoints(at time.Time, pts []logparse.Point, src Source, replay bool) {
	n := len(a.pend)
	var thin []string
	a.pend, thin = a.thin.appendKeep(a.pend, at, pts, src)
	if replay {
		a.pend = a.pend[:n]
		return
	}
	a.markBehindEvents(a.pend[n:])
	for _, name := range thin {
		a.thinPoints(name, a.thin.width(name))
	}
	if len(a.pend) >= pendMax {
		a.queuePoints()
	}
}

// markBehindEvents marks the output points of a metric the event files
// report too: they yield to theirs (SourceOutputBehindEvents). It is
// decided when they are read (the event files may name the metric later).
func (a *active) markBehindEvents(pts []TimedPoint) {
	if len(a.eventNames) == 0 {
		return
	}
	for i := range pts {
		if pts[i].Source == SourceOutput && a.eventNames[pts[i].Name] {
			pts[i].Source = SourceOutputBehindEvents
		}
	}
}

// addPoints gathers points to store, as keepPoints does.
func (a *active) addPoints(pts []TimedPoint) {
	n := len(a.pend)
	a.pend = append(a.pend, pts...)
	a.markBehindEvents(a.pend[n:])
	if len(a.pend) >= pendMax {
		a.queuePoints()
	}
}

// queuePoints queues the gathered points for the store, at once: one
// AddPoints (one take of the store's lock) for many lines. Whatever else
// is asked of the store (a thinning, read offsets, a flush) is asked after
// it, so that it comes after the points read before it, as it would have
// had every line queued its points itself. It publishes what the observer
// has seen first (publishSeen): status is never behind the store by more
// than the line being read (its points may be queued before it is
// observed).
func (a *active) queuePoints() {
	a.publishSeen()
	if len(a.pend) == 0 {
		return
	}
	a.sup.opts.Recorder.AddPoints(a.run.ID, a.pend)
	a.pend = a.pend[:0]
	if cap(a.pend) > 4*pendMax {
		a.pend = nil
	}
}

// thinPoints asks the store to thin a metric's points to width, after the
// points read so far.
func (a *active) thinPoints(name string, width int64) {
	a.queuePoints()
	a.sup.opts.Recorder.ThinPoints(a.run.ID, name, width)
}

// Bounds on the metric names a run records. A script that prints a name
// per line ("img_0001.jpg: 0.93", a score per image) would otherwise have
// trainbot keep a metric per line, in memory and in the store, for days.
// Past maxMetricNames, only names that look like a loss are still taken,
// up to maxLossNames more.
const (
	maxMetricNames = 1000
	maxLossNames   = 100
)

// limitNames drops, in place, the points of new metrics once the run has
// too many. Most lines have only names seen before: they are looked at in
// place, and copied only from the first point dropped on.
func (a *active) limitNames(pts []logparse.Point, replay bool) []logparse.Point {
	for i := range pts {
		if pts[i].Name != a.lastName && !a.admitName(pts[i].Name, replay) {
			keep := pts[:i]
			for _, p := range pts[i+1:] {
				if p.Name == a.lastName || a.admitName(p.Name, replay) {
					keep = append(keep, p)
				}
			}
			return keep
		}
	}
	return pts
}

// admitName reports whether the points of a metric are recorded, and makes
// it the last name admitted (the name of the point before is the parser's
// copy, so mostly the same string: no lookup).
func (a *active) admitName(name string, replay bool) bool {
	if !a.names[name] {
		n := len(a.names)
		if n >= maxMetricNames+maxLossNames || (n >= maxMetricNames && !IsLossName(name)) {
			if !a.full {
				a.full = true
				if !replay {
					a.log.Warn("the output names too many metrics: points of further metric names are not recorded (the log has them)", "max", maxMetricNames)
				}
			}
			return false
		}
		a.names[name] = true
	}
	a.lastName = name
	return true
}

// readMetricsFile reads the JSON lines a script appends to
// TRAINBOT_METRICS_FILE since the last read.
func (a *active) readMetricsFile() {
	m := &a.metrics
	f, err := os.Open(m.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, m.off)
		p := buf[:n]
		for len(p) > 0 {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				if len(m.part)+len(p) <= logparse.MaxLineLen {
					m.part = append(m.part, p...)
				}
				m.off += int64(len(p))
				break
			}
			if len(m.part)+i <= logparse.MaxLineLen {
				m.part = append(m.part, p[:i]...)
			}
			m.off += int64(i + 1)
			a.handleLine(time.Now(), m.part, true, m.off <= m.stored)
			m.part = m.part[:0]
			p = p[i+1:]
		}
		if err != nil || n == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				a.log.Warn("read metrics file", "err", err)
			}
			return
		}
	}
}

// finishMetricsFile parses the metrics file's last line, which will not be
// ended (the run is over).
func (a *active) finishMetricsFile() {
	if m := &a.metrics; len(m.part) > 0 {
		a.handleLine(time.Now(), m.part, true, false)
		m.part = nil
	}
}

// logPath is the run's log: the one its supervisor or Slurm writes in the
// run's directory, or the file a watched run writes.
func (a *active) logPath() string {
	if a.run.Runner == RunnerWatch && a.run.LogPath != "" {
		return a.run.LogPath
	}
	return filepath.Join(a.runDir, shimctl.LogFile)
}

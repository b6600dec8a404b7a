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

// handleOutput takes one line of the log.
func (a *active) handleOutput(l line, lt *lineTimes) {
	a.tail.put(shown(l.text), l.cr)
	if strings.HasPrefix(l.text, notePrefix) {
		note := l.text[len(notePrefix):]
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
				a.sup.opts.Recorder.ThinPoints(a.run.ID, name, w)
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
	keep, thin := a.thin.keepFrom(at, pts, SourceEvents)
	if !r.Replay {
		a.addPoints(keep)
		for _, name := range thin {
			a.sup.opts.Recorder.ThinPoints(a.run.ID, name, a.thin.width(name))
		}
	}
	a.observePoints(at, pts, "", r.Replay)
}

// handleLine parses one line (of output, or of the metrics file) read at
// time at. A replayed line (stored before a restart) only rebuilds state.
func (a *active) handleLine(at time.Time, text string, fromMetricsFile, replay bool) {
	if !fromMetricsFile {
		// Where a traceback says the script was: the OOM that ends it
		// names the user's line (train.py:28).
		if strings.Contains(text, "File \"") { // cheap: most lines are no frame
			if f, user, ok := tracebackFrame(text); ok && user {
				a.frame = f
			}
		} else if strings.HasPrefix(text, "Traceback (most recent call last)") {
			a.frame = ""
		}
		if o, ok := DetectOOM(text); ok {
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
				a.publish(Event{Kind: EventAlert, Run: a.snapshot(), Alert: &Alert{Kind: OutcomeOOM, Text: o.Summary(), OOM: o},
					Fit: a.sup.MemoryFit(a.job, a.snapshot(), o)})
			}
		}
	}
	// The points are this line's only: nothing below keeps the slice
	// (thin.keep copies them), so the next line reuses it.
	a.pts = a.parser.AppendString(a.pts[:0], text)
	pts := a.limitNames(a.pts, replay)
	if len(pts) == 0 {
		if a.nanW.watching() {
			a.observePoints(at, nil, text, replay) // a progress bar may show the NaN loss again
		}
		return
	}
	keep, thin := a.thin.keep(at, pts)
	if !replay {
		a.addPoints(keep)
		for _, name := range thin {
			a.sup.opts.Recorder.ThinPoints(a.run.ID, name, a.thin.width(name))
		}
	}
	a.observePoints(at, pts, text, replay)
}

// addPoints queues points for the store. Output points of a metric the
// event files report too yield to theirs (SourceOutputBehindEvents).
func (a *active) addPoints(pts []TimedPoint) {
	if len(pts) == 0 {
		return
	}
	for i := range pts {
		if pts[i].Source == SourceOutput && a.eventNames[pts[i].Name] {
			pts[i].Source = SourceOutputBehindEvents
		}
	}
	a.sup.opts.Recorder.AddPoints(a.run.ID, pts)
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
// too many.
func (a *active) limitNames(pts []logparse.Point, replay bool) []logparse.Point {
	keep := pts[:0]
	for _, p := range pts {
		if !a.names[p.Name] {
			n := len(a.names)
			if n >= maxMetricNames+maxLossNames || (n >= maxMetricNames && !IsLossName(p.Name)) {
				if !a.full {
					a.full = true
					if !replay {
						a.log.Warn("the output names too many metrics: points of further metric names are not recorded (the log has them)", "max", maxMetricNames)
					}
				}
				continue
			}
			a.names[p.Name] = true
		}
		keep = append(keep, p)
	}
	return keep
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
			a.handleLine(time.Now(), string(m.part), true, m.off <= m.stored)
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
		a.handleLine(time.Now(), string(m.part), true, false)
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

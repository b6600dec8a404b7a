package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/nice"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

type pendingPoint struct {
	run int64
	t   int64
	p   logparse.Point
	// seq, once given (by a batch that was cut short before writing the
	// point), is kept when the point is written later: the order of a
	// step's points, and what a replay stores, do not depend on when the
	// writer yielded.
	seq int64
	// mark makes the entry a read position instead of a point: the run's
	// log (mark.logOff) and metrics-file (t) offsets, or how far an event
	// file is read; written in the transaction of the points queued
	// before it. A pointer, rare and apart: a burst queues 10⁵ points,
	// and each byte of an entry is 100 kB of the bot's memory then.
	mark *readMark
	src  trainer.Source
}

// readMark is the read position a queue entry marks.
type readMark struct {
	logOff int64
	// eventFile, when set, makes it how far that event file of the run
	// is read (logOff) instead.
	eventFile string
}

// droppedMsg is logged when points start to be dropped.
const droppedMsg = "metric points dropped: the write queue is full (the disk is slow or stuck); the run logs still have them"

// batchSize is the most points written in one transaction, and the queue
// length at which the writer is woken before its next tick: below it,
// points wait up to FlushEvery, so that the thinning of a burst (10⁶
// lines in a second) is decided on the queue, before SQLite (thin.go).
const batchSize = 100_000

// AddPoints queues points for the background writer; it never waits for the
// disk. When the queue is full (the disk is stuck), points are dropped,
// counted in DroppedPoints and logged (once until points are written again).
func (s *Store) AddPoints(runID int64, pts []trainer.TimedPoint) {
	if len(pts) == 0 {
		return
	}
	s.pmu.Lock()
	if need := min(len(s.pending)+len(pts), s.maxPending); need > cap(s.pending) && len(pts) >= burstChunk {
		// A burst's chunk: room for a whole batch and what comes while it
		// is written, at once, not by doubling (which allocates and
		// faults in twice the queue on the way); never past MaxPending,
		// beyond which points are dropped, not queued.
		grown := make([]pendingPoint, len(s.pending), min(max(need, 2*cap(s.pending), s.batchSize+s.batchSize/4), s.maxPending))
		copy(grown, s.pending)
		s.pending = grown
	}
	started := false
	for _, p := range pts {
		if len(s.pending) >= s.maxPending {
			s.dropped++
			started = started || !s.dropping
			s.dropping = true
			continue
		}
		s.pending = append(s.pending, pendingPoint{run: runID, t: ms(p.At), p: p.Point, src: p.Source})
		s.queued++
	}
	n := len(s.pending)
	s.pmu.Unlock()
	if started {
		s.log.Warn(droppedMsg, "run", runID, "queued", n)
	}
	if n >= s.batchSize {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// burstChunk is the size of an AddPoints that marks a burst: the queue
// grows to a whole batch at once.
const burstChunk = 256

// SetOffsets queues how far the run's log and metrics file have been read:
// it is written in the same transaction as the points queued before it, so
// that after a restart the bot resumes reading exactly after the last
// stored point. A full queue does not drop it.
func (s *Store) SetOffsets(runID, logOffset, metricsOffset int64) {
	s.pmu.Lock()
	s.pending = append(s.pending, pendingPoint{run: runID, mark: &readMark{logOff: logOffset}, t: metricsOffset})
	s.queued++ // an entry of the queue like a point: thinnings count it
	s.pmu.Unlock()
}

// SetEventOffset queues how far an event file of the run (its path under
// the run's TensorBoard directory) has been read, written in the same
// transaction as the points queued before it, as SetOffsets.
func (s *Store) SetEventOffset(runID int64, file string, off int64) {
	s.pmu.Lock()
	s.pending = append(s.pending, pendingPoint{run: runID, mark: &readMark{eventFile: file, logOff: off}})
	s.queued++
	s.pmu.Unlock()
}

// EventOffsets returns how far each event file of a run was read, by its
// path under the run's TensorBoard directory.
func (s *Store) EventOffsets(ctx context.Context, runID int64) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT path, offset FROM event_files WHERE run_id = ?`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var p string
		var off int64
		if err := rows.Scan(&p, &off); err != nil {
			return nil, err
		}
		out[p] = off
	}
	return out, rows.Err()
}

// DroppedPoints returns how many points were dropped because the queue was full.
func (s *Store) DroppedPoints() int64 {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.dropped
}

// Flush waits until every point queued before the call is written. It
// writes them itself, on the caller's thread: the background writer runs
// niced, and on a host whose every core the training holds it would keep
// a chart, or a run's final report, waiting behind it. The background
// writer yields to it between batches; a batch in flight is waited for.
func (s *Store) Flush(ctx context.Context) error {
	select {
	case <-s.stopped:
		return errors.New("flush: store is closed")
	default:
	}
	s.flushing.Add(1)
	defer s.flushing.Add(-1)
	return s.writeQueued(ctx, false)
}

// writer writes the queued points on a timer and when the queue grows.
// Its thread runs at nice.Background: a burst of points (inserts, and the
// deletes of thinning) must not take CPU time from the training that
// printed them.
func (s *Store) writer(ctx context.Context, every time.Duration) {
	defer s.wg.Done()
	nice.LowerThread()
	defer close(s.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.writeQueued(ctx, true)
		case <-s.kick:
			s.writeQueued(ctx, true)
		}
	}
}

// writeQueued writes what was queued when it began, in batches, and does
// each thinning in the transaction of the batch that holds the last point
// queued before it. Points queued while it writes wait for the next call:
// under a stream faster than the writer it still ends (a loop until the
// queue was empty never did, and a chart asked for under load waited for
// ever). The background writer (yield) stops between batches while a
// Flush waits. A batch that failed because the disk is full or failing,
// the database is busy or its file was replaced goes back to the head of
// the queue (with its thinnings), to be tried again on the next tick; any
// other failing batch is logged and dropped, so that one bad write never
// wedges the queue. ctx bounds the wait for a batch in flight, not a
// batch begun.
func (s *Store) writeQueued(ctx context.Context, yield bool) error {
	var firstErr error
	s.pmu.Lock()
	// The entries of this call: taken+pending counts every entry queued
	// so far whoever holds it (a batch cut short or failed goes back to
	// the head and out of taken).
	target := s.taken + int64(len(s.pending))
	s.pmu.Unlock()
	for {
		if yield && s.flushing.Load() > 0 {
			return nil // the Flush writes them
		}
		select {
		case s.writing <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		more, err := s.writeOne(target, yield)
		<-s.writing
		if err != nil && firstErr == nil {
			firstErr = err
		}
		var rq *requeuedError
		if !more || errors.As(err, &rq) {
			return firstErr
		}
	}
}

// requeuedError is the failure of a batch that went back to the queue.
type requeuedError struct{ err error }

func (e *requeuedError) Error() string { return "write metric points: " + e.err.Error() }
func (e *requeuedError) Unwrap() error { return e.err }

// writeOne takes the next batch of the entries up to the target-th and
// writes it, with the thinnings due with it; more: there may be more to
// write. The caller holds s.writing.
func (s *Store) writeOne(target int64, yield bool) (more bool, err error) {
	s.pmu.Lock()
	n := int(min(int64(len(s.pending)), int64(s.batchSize), max(target-s.taken, 0)))
	batch := s.pending[:n:n]
	// The rest (points queued during a write) goes to the spare array;
	// the batch's array becomes the spare once written (keepSpare). Idle,
	// the ticks with nothing queued let the arrays go: the first moves the
	// empty queue to the spare's array, the second to none.
	s.pending = append(s.spare[:0], s.pending[n:]...)
	s.spare = nil
	s.taken += int64(len(batch))
	more = len(batch) > 0 && s.taken < target
	recovered := len(s.pending) == 0 && s.dropping // drained: room again
	s.dropping = s.dropping && !recovered
	dropped := s.dropped
	// The thinnings due once this batch is written are done with it.
	var thins []pendingThin
	s.thins = slices.DeleteFunc(s.thins, func(th pendingThin) bool {
		if th.after <= s.taken {
			thins = append(thins, th)
			return true
		}
		return false
	})
	s.pmu.Unlock()
	if recovered {
		s.log.Warn("metric points are queued again", "dropped", dropped)
	}
	if len(batch) == 0 && len(thins) == 0 {
		return more, nil
	}
	rest, err := s.writeBatch(batch, thins, yield)
	s.health.note(err)
	if len(rest) > 0 {
		s.pmu.Lock()
		s.taken -= int64(len(rest))
		s.pending = append(rest, s.pending...)
		s.pmu.Unlock()
		return true, nil // after the write that waited: the connection is handed to it
	}
	if err == nil {
		s.keepSpare(batch)
	}
	switch {
	case err != nil && retryable(err):
		s.requeue(batch, thins, err)
		return false, &requeuedError{err}
	case err != nil:
		s.log.Error("write metric points", "points", len(batch), "thinnings", len(thins), "err", err)
		return more, err
	case s.retrying:
		s.retrying = false
		s.log.Info("metric points written again")
	}
	return more, nil
}

// keepSpare keeps the array of a whole batch written, cleared (its names
// would pin strings), for the queue to fill next, when it was a burst's
// (at least a quarter of batchSize): a trickle's small batches are left
// to the collector, and an idle bot holds no 10 MB array for nothing.
func (s *Store) keepSpare(batch []pendingPoint) {
	if len(batch) < s.batchSize/4 {
		return
	}
	all := batch[:cap(batch)]
	clear(all)
	s.pmu.Lock()
	if s.spare == nil && cap(s.pending) < cap(all) {
		s.spare = all[:0]
	}
	s.pmu.Unlock()
}

// requeue puts a batch that could not be written back at the head of the
// queue. Beyond MaxPending the newest points are dropped and counted, as
// AddPoints drops them.
func (s *Store) requeue(batch []pendingPoint, thins []pendingThin, err error) {
	s.pmu.Lock()
	s.taken -= int64(len(batch)) // not written: thinnings after it wait for it
	s.pending = append(batch, s.pending...)
	s.thins = append(thins, s.thins...)
	over := len(s.pending) - s.maxPending
	started := false
	if over > 0 {
		s.pending = s.pending[:s.maxPending]
		s.dropped += int64(over)
		started = !s.dropping
		s.dropping = true
	}
	n := len(s.pending)
	s.pmu.Unlock()
	if !s.retrying {
		s.retrying = true
		s.log.Warn("metric points kept in memory to write again", "queued", n, "err", err)
	}
	if started {
		s.log.Warn(droppedMsg, "queued", n)
	}
}

// pendingThin is a queued ThinPoints.
type pendingThin struct {
	run   int64
	name  string
	width int64
	after int64 // run it once this many points were taken for writing
}

// ThinPoints queues the thinning of a metric's stored points to buckets of
// width steps (trainer.Recorder): of each bucket only the first, minimum,
// maximum and last finite points stay, and the first and last NULL (NaN),
// +Inf and -Inf values (eachDrop). It is done in the transaction that
// writes the points queued before it, over those and the points stored
// (what it drops of the batch is not written). A thinning of the same
// metric that is still queued is merged into this one.
func (s *Store) ThinPoints(runID int64, name string, width int64) {
	if width <= 1 {
		width = 1
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	s.queueThinLocked(runID, name, width, s.queued)
}

// queueThinLocked queues a thinning due once after points were taken for
// writing, merged into one of the same metric still queued (the wider,
// the later). Call with s.pmu held.
func (s *Store) queueThinLocked(runID int64, name string, width, after int64) {
	for i := range s.thins {
		if th := &s.thins[i]; th.run == runID && th.name == name {
			th.width, th.after = max(th.width, width), max(th.after, after)
			return
		}
	}
	s.thins = append(s.thins, pendingThin{run: runID, name: name, width: width, after: after})
}

// writeBatch writes a batch of points and offsets, and does the thinnings
// due with it, in one transaction. With yield, it stops inserting between
// two statements once another write waits for the one write connection
// (an answer's outbox row, a memory sample) or a Flush waits: the writer
// runs niced, and a long batch on a host whose cores the training holds
// kept those waiting for minutes. What it wrote is committed; rest is the
// points and read offsets not written, for the head of the queue.
func (s *Store) writeBatch(batch []pendingPoint, thins []pendingThin, yield bool) (rest []pendingPoint, err error) {
	ctx := context.Background()
	// Name ids first, outside the points transaction (one connection).
	var offsets []pendingPoint
	points := make([]pendingPoint, 0, len(batch)) // a copy: a batch requeued must stay whole
	for _, pp := range batch {
		if pp.mark != nil {
			offsets = append(offsets, pp)
		} else {
			points = append(points, pp)
		}
	}
	batch = points
	ids := make([]int64, len(batch))
	for i, pp := range batch {
		id, err := s.nameID(ctx, pp.p.Name)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	widths := map[[2]int64]int64{} // the thinnings by (run, name id): merged, the widest
	thinNames := map[[2]int64]string{}
	for _, th := range thins {
		id, err := s.nameID(ctx, th.name)
		if err != nil {
			return nil, err
		}
		k := [2]int64{th.run, id}
		widths[k], thinNames[k] = max(widths[k], th.width), th.name
	}
	var unfinished []pendingThin // thinnings whose deletes yielded: again with the next batch
	var stop func() bool
	if yield {
		// Counted from before the transaction: a write that came while
		// it began waits too (the writer's own wait for the connection,
		// counted as well, costs a transaction more at most).
		waits := s.w.Stats().WaitCount
		stop = func() bool { return s.w.Stats().WaitCount > waits || s.flushing.Load() > 0 }
	}
	// The seqs in arrival order, then the thinnings (which may drop points
	// of the batch): what stays is written with the seq it had. A thinning
	// is decided before the transaction, over the rows the read pool sees
	// (only this writer changes a run's points), so that the write lock is
	// held for its deletes alone, which yield as the inserts do; a batch
	// whose sources are merged (mergeSources deletes rows) decides in the
	// transaction, after the merge.
	var seqs []int64
	var drop []bool
	dels := map[[2]int64][][2]int64{}
	plan := func(q querier) error {
		seqs = make([]int64, len(batch))
		for i := range batch {
			if batch[i].seq == 0 {
				s.seq++
				batch[i].seq = s.seq
			}
			seqs[i] = batch[i].seq
		}
		if len(widths) == 0 {
			return nil
		}
		idx := map[[2]int64][]int{}
		for i, pp := range batch {
			if k := [2]int64{pp.run, ids[i]}; widths[k] > 0 {
				idx[k] = append(idx[k], i)
			}
		}
		drop = make([]bool, len(batch))
		var scratch []thinRow
		for k, w := range widths {
			del, err := thinPlan(ctx, q, k[0], k[1], w, batch, seqs, idx[k], drop, &scratch)
			if err != nil {
				return fmt.Errorf("thin metric points: %w", err)
			}
			dels[k] = del
		}
		return nil
	}
	merge := needsMerge(batch)
	if !merge {
		if err := plan(s.r); err != nil {
			return nil, err
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if merge {
		if batch, ids, err = mergeSources(ctx, tx, batch, ids); err != nil {
			return nil, err
		}
		if err := plan(tx); err != nil {
			return nil, err
		}
	}
	if len(widths) > 0 {
		for k, del := range dels {
			done, err := deleteRows(ctx, tx, k[0], k[1], del, stop)
			if err != nil {
				return nil, fmt.Errorf("thin metric points: %w", err)
			}
			if done < len(del) {
				unfinished = append(unfinished, pendingThin{run: k[0], name: thinNames[k], width: widths[k]})
			}
		}
		keep := 0
		for i := range batch {
			if !drop[i] {
				batch[keep], ids[keep], seqs[keep] = batch[i], ids[i], seqs[i]
				keep++
			}
		}
		batch, ids, seqs = batch[:keep], ids[:keep], seqs[:keep]
	}
	// Each new (run, name) once per transaction: s.runNames learns them
	// only once it commits, and a first batch holds thousands of points of
	// the same few names.
	var named map[[2]int64]bool
	for i, pp := range batch {
		key := [2]int64{pp.run, ids[i]}
		if s.runNames[key] || named[key] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO run_metric_names(run_id, name_id) VALUES(?, ?)`, pp.run, ids[i]); err != nil {
			return nil, fmt.Errorf("record metric name: %w", err)
		}
		if named == nil {
			named = map[[2]int64]bool{}
		}
		named[key] = true
	}
	if len(named) > 0 {
		defer func() { // only once the transaction commits
			if err == nil {
				maps.Copy(s.runNames, named)
			}
		}()
	}
	// Many rows per statement: the per-statement cost dominates otherwise.
	args := make([]any, 0, rowsPerInsert*8)
	done, err := execInChunks(ctx, tx, len(batch), rowsPerInsert, insertMetrics, stop, func(start, end int) []any {
		args = args[:0]
		for i := start; i < end; i++ {
			pp := batch[i]
			var epoch, value any
			if !math.IsNaN(pp.p.Epoch) {
				epoch = pp.p.Epoch
			}
			if !math.IsNaN(pp.p.Value) {
				value = pp.p.Value
			}
			src := 0
			if pp.src == trainer.SourceEvents {
				src = 1
			}
			args = append(args, pp.run, ids[i], pp.p.Step, seqs[i], epoch, value, pp.t, src)
		}
		return args
	})
	if err != nil {
		return nil, fmt.Errorf("insert points: %w", err)
	}
	if done < len(batch) {
		// Cut short: the read offsets wait for the points before them.
		rest = append(slices.Clip(batch[done:]), offsets...)
		offsets = nil
	}
	for _, o := range offsets {
		if m := o.mark; m.eventFile != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO event_files(run_id, path, offset) VALUES(?, ?, ?)
				ON CONFLICT(run_id, path) DO UPDATE SET offset = excluded.offset`, o.run, m.eventFile, m.logOff); err != nil {
				return nil, fmt.Errorf("record event file offset: %w", err)
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET log_offset = ?, metrics_offset = ? WHERE id = ?`, o.mark.logOff, o.t, o.run); err != nil {
			return nil, fmt.Errorf("record read offsets: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return nil, err
	}
	if len(unfinished) > 0 {
		// What they did is committed (rows the rule drops, deleted); the
		// rest of each is done by the same rule over what is stored then,
		// which keeps the same rows.
		s.pmu.Lock()
		for _, th := range unfinished {
			s.queueThinLocked(th.run, th.name, th.width, s.taken)
		}
		s.pmu.Unlock()
	}
	return rest, nil
}

// execInChunks runs the statement stmt(rows) for rows [0, n) in chunks of
// per rows, each with the arguments args(start, end); the statement of a
// whole chunk is prepared once. It stops early, between two chunks, once
// stop (nil: never) says so; done is how many rows it did.
func execInChunks(ctx context.Context, tx *sql.Tx, n, per int, stmt func(rows int) string, stop func() bool, args func(start, end int) []any) (done int, err error) {
	var full *sql.Stmt
	for start := 0; start < n; start += per {
		if start > 0 && stop != nil && stop() {
			return start, nil
		}
		end := min(start+per, n)
		if end-start == per {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, stmt(per)); err != nil {
					return start, err
				}
				defer full.Close()
			}
			_, err = full.ExecContext(ctx, args(start, end)...)
		} else {
			_, err = tx.ExecContext(ctx, stmt(end-start), args(start, end)...)
		}
		if err != nil {
			return start, err
		}
	}
	return n, nil
}

// rowsPerInsert is how many points one INSERT statement carries.
const rowsPerInsert = 200

func insertMetrics(rows int) string {
	return "INSERT INTO metrics(run_id, name_id, step, seq, epoch, value, t, src) VALUES " + repeatTuple("(?,?,?,?,?,?,?,?)", rows)
}

// repeatTuple is rows copies of tuple, comma-separated.
func repeatTuple(tuple string, rows int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+",", rows), ",")
}

// pointKey is a metric's step in a run.
type pointKey struct{ run, name, step int64 }

// mergeSources applies "event files win" to a batch, in its transaction:
// an event file's point deletes the output's points of its metric and
// step stored before, and drops those of the batch; an output point of a
// metric the event files report too (SourceOutputBehindEvents) is dropped
// where an event file's point of its step is stored or in the batch.
// Output points of metrics without event files cost nothing here.
func mergeSources(ctx context.Context, tx *sql.Tx, batch []pendingPoint, ids []int64) ([]pendingPoint, []int64, error) {
	if !needsMerge(batch) {
		return batch, ids, nil
	}
	events := map[pointKey]bool{}
	for i, pp := range batch {
		if pp.src == trainer.SourceEvents {
			events[pointKey{pp.run, ids[i], pp.p.Step}] = true
		}
	}
	var check *sql.Stmt
	keepP, keepIDs := batch[:0:0], ids[:0:0]
	for i, pp := range batch {
		k := pointKey{pp.run, ids[i], pp.p.Step}
		if pp.src != trainer.SourceEvents && events[k] {
			continue
		}
		if pp.src == trainer.SourceOutputBehindEvents {
			if check == nil {
				var err error
				if check, err = tx.PrepareContext(ctx, `SELECT EXISTS(SELECT 1 FROM metrics WHERE run_id = ? AND name_id = ? AND step = ? AND src = 1)`); err != nil {
					return nil, nil, err
				}
				defer check.Close()
			}
			var shadowed bool
			if err := check.QueryRowContext(ctx, k.run, k.name, k.step).Scan(&shadowed); err != nil {
				return nil, nil, fmt.Errorf("merge points: %w", err)
			}
			if shadowed {
				continue
			}
		}
		keepP, keepIDs = append(keepP, pp), append(keepIDs, ids[i])
	}
	if len(events) > 0 {
		del, err := tx.PrepareContext(ctx, `DELETE FROM metrics WHERE run_id = ? AND name_id = ? AND step = ? AND src = 0`)
		if err != nil {
			return nil, nil, err
		}
		defer del.Close()
		for k := range events {
			if _, err := del.ExecContext(ctx, k.run, k.name, k.step); err != nil {
				return nil, nil, fmt.Errorf("merge points: %w", err)
			}
		}
	}
	return keepP, keepIDs, nil
}

// needsMerge reports whether a batch holds points of another source than
// the output (mergeSources has work).
func needsMerge(batch []pendingPoint) bool {
	return slices.ContainsFunc(batch, func(pp pendingPoint) bool { return pp.src != trainer.SourceOutput })
}

// nameID returns the id of a metric name, creating it.
func (s *Store) nameID(ctx context.Context, name string) (int64, error) {
	if v, ok := s.names.Load(name); ok {
		return v.(int64), nil
	}
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	if v, ok := s.names.Load(name); ok {
		return v.(int64), nil
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO metric_names(name) VALUES(?) ON CONFLICT(name) DO NOTHING`, name); err != nil {
		return 0, err
	}
	var id int64
	if err := s.w.QueryRowContext(ctx, `SELECT id FROM metric_names WHERE name = ?`, name).Scan(&id); err != nil {
		return 0, err
	}
	s.names.Store(name, id)
	return id, nil
}

// lookupName returns a name's id without creating it.
func (s *Store) lookupName(ctx context.Context, name string) (int64, bool, error) {
	if v, ok := s.names.Load(name); ok {
		return v.(int64), true, nil
	}
	var id int64
	err := s.r.QueryRowContext(ctx, `SELECT id FROM metric_names WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return id, true, nil
}

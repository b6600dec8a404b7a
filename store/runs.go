package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

var _ trainer.Recorder = (*Store)(nil)

const runColumns = `id, job, params, command, state, outcome, detail, exit_code, pid, supervisor_pid,
	started_at, ended_at, log_path, started_by, origin, stopped_by, steps, total_steps,
	peak_gpu_mem_bytes, peak_host_mem_bytes, retry_of, runner, log_offset, metrics_offset, slurm_job_id, node, note, peak_host_how, end_facts, gpus, host, remote_dir, boot_id, resumed_from, param_ranges`

// CreateRun inserts a run and returns its id.
func (s *Store) CreateRun(ctx context.Context, r *trainer.Run) (int64, error) {
	return s.insertRun(ctx, r, false)
}

// RestoreRun stores a run found in its directory under its own id, unless
// a run of that id is recorded (trainer.RunRestorer); restored says
// whether it was stored.
func (s *Store) RestoreRun(ctx context.Context, r *trainer.Run) (restored bool, err error) {
	if r.ID <= 0 {
		return false, fmt.Errorf("restore run: no id")
	}
	id, err := s.insertRun(ctx, r, true)
	return id != 0, err
}

// insertRun inserts r: under the lowest id above every recorded one and
// not below r.ID (CreateRun), or under r.ID exactly unless it is taken
// (restore; then it returns 0).
func (s *Store) insertRun(ctx context.Context, r *trainer.Run, restore bool) (int64, error) {
	params, command, err := encodeRun(r)
	if err != nil {
		return 0, err
	}
	verb, id := `INSERT INTO`, `(SELECT max(coalesce(max(id), 0) + 1, ?) FROM runs)`
	if restore {
		verb, id = `INSERT OR IGNORE INTO`, `?`
	}
	res, err := s.w.ExecContext(ctx, verb+` runs(id, job, params, command, state, outcome, detail, exit_code, pid,
		supervisor_pid, started_at, ended_at, log_path, started_by, origin, stopped_by, steps, total_steps,
		peak_gpu_mem_bytes, peak_host_mem_bytes, retry_of, runner, slurm_job_id, node, note, peak_host_how, end_facts, gpus, host, remote_dir, boot_id, resumed_from, param_ranges) VALUES(`+id+`,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.ID, r.Job, params, command, string(r.State), string(r.Outcome), r.Detail, r.ExitCode, r.PID,
		r.Supervisor, ms(r.StartedAt), nullTime(r), r.LogPath, r.StartedBy, r.Origin, r.StoppedBy, r.Steps, r.Total,
		r.PeakGPUMem, r.PeakHostMem, nullID(r.RetryOf), r.Runner, nullText(r.SlurmJobID), r.Node, r.Note, r.PeakHostHow, endFacts(r), runGPUs(r), r.Host, r.RemoteDir, r.BootID, nullID(r.ResumedFrom), paramRanges(r))
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	if restore {
		if n, _ := res.RowsAffected(); n == 0 {
			return 0, nil
		}
		return r.ID, nil
	}
	return res.LastInsertId()
}

// SetNote sets a run's note ("" removes it).
func (s *Store) SetNote(ctx context.Context, id int64, note string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET note = ? WHERE id = ?`, note, id)
	if err != nil {
		return fmt.Errorf("note run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("note run %d: %w", id, history.ErrNotFound)
	}
	return nil
}

// endFacts is r.End as stored (JSON), NULL without facts.
func endFacts(r *trainer.Run) any {
	if r.End == nil {
		return nil
	}
	b, err := json.Marshal(r.End)
	if err != nil {
		return nil
	}
	return string(b)
}

// runGPUs is r.GPUs as stored (JSON), NULL when the run was given none.
func runGPUs(r *trainer.Run) any {
	if len(r.GPUs) == 0 {
		return nil
	}
	b, err := json.Marshal(r.GPUs)
	if err != nil {
		return nil
	}
	return string(b)
}

// paramRanges is r.ParamRanges as stored (JSON), NULL when it has none.
func paramRanges(r *trainer.Run) any {
	if len(r.ParamRanges) == 0 {
		return nil
	}
	b, err := json.Marshal(r.ParamRanges)
	if err != nil {
		return nil
	}
	return string(b)
}

// UpdateRun writes every field of an existing run but its read offsets
// (SetOffsets keeps those, in step with the points) and its note (SetNote).
func (s *Store) UpdateRun(ctx context.Context, r *trainer.Run) error {
	params, command, err := encodeRun(r)
	if err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET job=?, params=?, command=?, state=?, outcome=?, detail=?,
		exit_code=?, pid=?, supervisor_pid=?, started_at=?, ended_at=?, log_path=?, started_by=?, origin=?, stopped_by=?,
		steps=?, total_steps=?, peak_gpu_mem_bytes=?, peak_host_mem_bytes=?, retry_of=?, runner=?, slurm_job_id=?, node=?, peak_host_how=?, end_facts=?, gpus=?, host=?, remote_dir=?, boot_id=?, resumed_from=?, param_ranges=? WHERE id=?`,
		r.Job, params, command, string(r.State), string(r.Outcome), r.Detail, r.ExitCode, r.PID,
		r.Supervisor, ms(r.StartedAt), nullTime(r), r.LogPath, r.StartedBy, r.Origin, r.StoppedBy, r.Steps, r.Total,
		r.PeakGPUMem, r.PeakHostMem, nullID(r.RetryOf), r.Runner, nullText(r.SlurmJobID), r.Node, r.PeakHostHow, endFacts(r), runGPUs(r), r.Host, r.RemoteDir, r.BootID, nullID(r.ResumedFrom), paramRanges(r), r.ID)
	if err != nil {
		return fmt.Errorf("update run %d: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("update run %d: %w", r.ID, history.ErrNotFound)
	}
	return nil
}

func encodeRun(r *trainer.Run) (params, command string, err error) {
	pb, err := json.Marshal(r.TypedParams())
	if err != nil {
		return "", "", err
	}
	c := r.Command
	if c == nil {
		c = []string{}
	}
	cb, err := json.Marshal(c)
	if err != nil {
		return "", "", err
	}
	return string(pb), string(cb), nil
}

func nullTime(r *trainer.Run) any {
	if r.EndedAt.IsZero() {
		return nil
	}
	return ms(r.EndedAt)
}

type scanner interface{ Scan(dest ...any) error }

// decodeParams reads the params column: an object of strings (runs
// recorded before parameter types), numbers and booleans.
func decodeParams(text string, r *trainer.Run) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	r.Params = make(map[string]string, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			r.Params[k] = x
		case json.Number:
			r.Params[k] = string(x)
		case bool:
			r.Params[k] = strconv.FormatBool(x)
		default:
			return fmt.Errorf("parameter %s: unexpected value %v", k, v)
		}
		if _, typed := v.(string); !typed {
			if r.ParamTypes == nil {
				r.ParamTypes = map[string]trainer.ParamType{}
			}
			r.ParamTypes[k] = trainer.ParamTypeOf(v)
		}
	}
	return nil
}

func scanRun(sc scanner) (*trainer.Run, error) {
	var (
		r               trainer.Run
		params, command string
		state, outcome  string
		exit            sql.NullInt64
		started         int64
		ended           sql.NullInt64
		peakGPU, peakH  sql.NullInt64
		retryOf         sql.NullInt64
		slurmJob        sql.NullString
		end, gpus       sql.NullString
		ranges          sql.NullString
		resumedFrom     sql.NullInt64
	)
	err := sc.Scan(&r.ID, &r.Job, &params, &command, &state, &outcome, &r.Detail, &exit, &r.PID, &r.Supervisor,
		&started, &ended, &r.LogPath, &r.StartedBy, &r.Origin, &r.StoppedBy, &r.Steps, &r.Total, &peakGPU, &peakH, &retryOf,
		&r.Runner, &r.LogOffset, &r.MetricsOffset, &slurmJob, &r.Node, &r.Note, &r.PeakHostHow, &end, &gpus, &r.Host, &r.RemoteDir, &r.BootID, &resumedFrom, &ranges)
	if err != nil {
		return nil, err
	}
	if end.Valid && end.String != "" {
		r.End = &trainer.EndFacts{}
		if err := json.Unmarshal([]byte(end.String), r.End); err != nil {
			r.End = nil // a record from a newer trainbot, say: its Detail still says it
		}
	}
	if gpus.Valid && gpus.String != "" {
		if err := json.Unmarshal([]byte(gpus.String), &r.GPUs); err != nil {
			r.GPUs = nil
		}
	}
	if ranges.Valid && ranges.String != "" {
		if err := json.Unmarshal([]byte(ranges.String), &r.ParamRanges); err != nil {
			r.ParamRanges = nil
		}
	}
	r.SlurmJobID = slurmJob.String
	r.ResumedFrom = resumedFrom.Int64
	r.State, r.Outcome = trainer.State(state), trainer.Outcome(outcome)
	if err := decodeParams(params, &r); err != nil {
		return nil, fmt.Errorf("run %d params: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(command), &r.Command); err != nil {
		return nil, fmt.Errorf("run %d command: %w", r.ID, err)
	}
	if exit.Valid {
		v := int(exit.Int64)
		r.ExitCode = &v
	}
	r.StartedAt = fromMS(started)
	if ended.Valid {
		r.EndedAt = fromMS(ended.Int64)
	}
	if peakGPU.Valid {
		v := peakGPU.Int64
		r.PeakGPUMem = &v
	}
	if peakH.Valid {
		v := peakH.Int64
		r.PeakHostMem = &v
	}
	r.RetryOf = retryOf.Int64
	return &r, nil
}

// Run returns one run, or history.ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (*trainer.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, history.ErrNotFound)
	}
	return r, err
}

// LatestRun returns the newest run, of the job when job is not "", or
// history.ErrNotFound.
func (s *Store) LatestRun(ctx context.Context, job string) (*trainer.Run, error) {
	runs, err := s.Runs(ctx, history.RunFilter{Job: job, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("latest run: %w", history.ErrNotFound)
	}
	return runs[0], nil
}

// Runs returns runs, newest first.
func (s *Store) Runs(ctx context.Context, f history.RunFilter) ([]*trainer.Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs`
	var args []any
	if f.Job != "" {
		q += ` WHERE job = ?`
		args = append(args, f.Job)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	return s.queryRuns(ctx, q, args...)
}

// fitRuns is how many of a job's latest runs JobRuns returns.
const fitRuns = 200

// JobRuns returns a job's latest runs, newest first (for the memory fit).
func (s *Store) JobRuns(ctx context.Context, job string) ([]*trainer.Run, error) {
	return s.Runs(ctx, history.RunFilter{Job: job, Limit: fitRuns})
}

var _ trainer.JobHistory = (*Store)(nil)

// RunningRuns returns the runs recorded as running.
func (s *Store) RunningRuns(ctx context.Context) ([]*trainer.Run, error) {
	return s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs WHERE state = ? ORDER BY id`, string(trainer.StateRunning))
}

func (s *Store) queryRuns(ctx context.Context, q string, args ...any) (runs []*trainer.Run, err error) {
	defer func() { s.health.noteRead(err) }()
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*trainer.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// LastValues returns the latest value (highest step, then last written)
// of each metric of a run.
func (s *Store) LastValues(ctx context.Context, runID int64) (map[string]float64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT n.name, (SELECT m.value FROM metrics m WHERE m.run_id = ? AND m.name_id = n.id
		ORDER BY m.step DESC, m.seq DESC LIMIT 1) FROM metric_names n
		WHERE n.id IN (SELECT name_id FROM run_metric_names WHERE run_id = ?)`, runID, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var name string
		var v sql.NullFloat64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		out[name] = nanIfNull(v)
	}
	return out, rows.Err()
}

func nanIfNull(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

// MetricNames returns the names of the metrics a run logged, sorted, with
// losses first.
func (s *Store) MetricNames(ctx context.Context, runID int64) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT n.name FROM metric_names n WHERE n.id IN
		(SELECT name_id FROM run_metric_names WHERE run_id = ?)`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := strings.Contains(out[i], "loss"), strings.Contains(out[j], "loss")
		if li != lj {
			return li
		}
		return out[i] < out[j]
	})
	return out, rows.Err()
}

// Series returns every point of one metric of a run, in step order.
func (s *Store) Series(ctx context.Context, runID int64, name string) ([]history.Point, error) {
	id, ok, err := s.lookupName(ctx, name)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT step, epoch, value, t FROM metrics WHERE run_id = ? AND name_id = ?
		ORDER BY step, seq`, runID, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Point
	for rows.Next() {
		var p history.Point
		var epoch, v sql.NullFloat64
		if err := rows.Scan(&p.Step, &epoch, &v, &p.T); err != nil {
			return nil, err
		}
		p.Epoch, p.Value = nanIfNull(epoch), nanIfNull(v)
		out = append(out, p)
	}
	return out, rows.Err()
}

// PointCount returns how many metric points a run has.
func (s *Store) PointCount(ctx context.Context, runID int64) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM metrics WHERE run_id = ?`, runID).Scan(&n)
	return n, err
}

// StepValues returns the steps and values of one metric of a run whose
// steps lie in [from, to], in step order, reading only those two columns
// of the metric's range of the primary key (the web page's charts; a
// thinned 10⁷-step metric is at most ~40,000 rows). A value is NaN where
// the script printed NaN.
func (s *Store) StepValues(ctx context.Context, runID int64, name string, from, to int64) (steps []int64, values []float64, err error) {
	id, ok, err := s.lookupName(ctx, name)
	if err != nil || !ok {
		return nil, nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT step, value FROM metrics WHERE run_id = ? AND name_id = ? AND step BETWEEN ? AND ?
		ORDER BY step, seq`, runID, id, from, to)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var step int64
		var v sql.NullFloat64
		if err := rows.Scan(&step, &v); err != nil {
			return nil, nil, err
		}
		steps, values = append(steps, step), append(values, nanIfNull(v))
	}
	return steps, values, rows.Err()
}

// maxChain bounds the runs ChainSeries follows back.
const maxChain = 200

// ChainSeries is Series of a run and of the runs it resumes (on_failure:
// resumed_from, back to the first), as one curve: each earlier run's
// points up to the step where the next one took over, then the next's.
// A run that resumes none has its own Series.
func (s *Store) ChainSeries(ctx context.Context, runID int64, name string) ([]history.Point, error) {
	ids := []int64{runID}
	for len(ids) < maxChain {
		var prev sql.NullInt64
		err := s.r.QueryRowContext(ctx, `SELECT resumed_from FROM runs WHERE id = ?`, ids[len(ids)-1]).Scan(&prev)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !prev.Valid) {
			break
		}
		if err != nil {
			return nil, err
		}
		if slices.Contains(ids, prev.Int64) {
			break // a loop: never written so, but never followed forever
		}
		ids = append(ids, prev.Int64)
	}
	var out []history.Point
	next := int64(math.MaxInt64) // the first step of the later run
	for _, id := range ids {     // newest first
		pts, err := s.Series(ctx, id, name)
		if err != nil {
			return nil, err
		}
		keep := pts[:0]
		for _, p := range pts {
			if p.Step < next {
				keep = append(keep, p)
			}
		}
		if len(pts) > 0 && pts[0].Step < next {
			next = pts[0].Step
		}
		out = append(slices.Clone(keep), out...)
	}
	return out, nil
}

// ChainStepValues is StepValues of a chain of resumes (ChainSeries):
// the steps and values between from and to, in step order.
func (s *Store) ChainStepValues(ctx context.Context, runID int64, name string, from, to int64) (steps []int64, values []float64, err error) {
	pts, err := s.ChainSeries(ctx, runID, name)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pts {
		if p.Step >= from && p.Step <= to {
			steps, values = append(steps, p.Step), append(values, p.Value)
		}
	}
	return steps, values, nil
}

package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// A run's identity lives in its directory, not only in the database: the
// database can be deleted, damaged or replaced by an older copy while runs
// go on, and what is on disk must never be taken for free room.
//
//   - Ids are never reused: the next run's id is above every run directory
//     on disk (Supervisor.minID), whatever the database says.
//   - A run directory is never shared: Start creates it with mkdir(2), and
//     one that exists is refused.
//   - DATA/runs/ID/run.json is the run's record as the bot last wrote it
//     (at the start, once its process or Slurm job is known, and at the
//     end). A database that lacks the run gets it back from there
//     (restoreRuns, at Resume): a run still going is re-attached and its
//     log read from the start, so every point is stored again; a run that
//     ended is read again quietly (its points, no notice, no retry).

// RunFile is the run's record in its directory.
const RunFile = "run.json"

// runFile is what run.json holds.
type runFile struct {
	Version int  `json:"version"` // 1
	Run     *Run `json:"run"`
}

// writeRunFile writes run.json of a run (atomically).
func writeRunFile(runDir string, r *Run) error {
	c := r.Clone()
	c.LogOffset, c.MetricsOffset = 0, 0 // the database's, in step with its points
	b, err := json.MarshalIndent(runFile{Version: 1, Run: c}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(runDir, RunFile), append(b, '\n'))
}

// readRunFile reads run.json of the run directory dir.
func readRunFile(dir string) (*Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return nil, err
	}
	var f runFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", RunFile, err)
	}
	if f.Run == nil || f.Run.ID <= 0 || f.Run.Job == "" {
		return nil, fmt.Errorf("%s: no run in it", RunFile)
	}
	if want := filepath.Base(dir); strconv.FormatInt(f.Run.ID, 10) != want {
		return nil, fmt.Errorf("%s: it names run %d in directory %s", RunFile, f.Run.ID, want)
	}
	return f.Run, nil
}

// runDirIDs returns the ids of the run directories in dataDir, ascending.
func runDirIDs(dataDir string) []int64 {
	d, err := os.Open(filepath.Join(dataDir, "runs"))
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var ids []int64
	for _, n := range names {
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && id > 0 && strconv.FormatInt(id, 10) == n {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// MaxRunDirID is the highest id of a run directory in dataDir, 0 if none:
// a run recorded by another process (trainbot watch) takes an id above it.
func MaxRunDirID(dataDir string) int64 {
	ids := runDirIDs(dataDir)
	if len(ids) == 0 {
		return 0
	}
	return ids[len(ids)-1]
}

// restoreRuns gives the Recorder back the runs it has no record of, from
// their run.json, and returns the ids of those that had ended (they are
// read again quietly by adopt). Directories without run.json (runs of
// trainbot before it wrote one, a failed mkdir) are left alone; their ids
// are never reused all the same.
func (s *Supervisor) restoreRuns(ctx context.Context) (ended map[int64]*Run, err error) {
	rr, ok := s.opts.Recorder.(RunRestorer)
	if !ok {
		return nil, nil
	}
	ended = map[int64]*Run{}
	restored := 0
	for _, id := range runDirIDs(s.opts.DataDir) {
		dir := RunDir(s.opts.DataDir, id)
		r, err := readRunFile(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.log.Warn("a run directory's record cannot be read; left alone", "dir", dir, "err", err)
			continue
		}
		rec := r.Clone()
		if r.State == StateEnded {
			// Recorded as running, so that adopt reads its log again;
			// its end is put back from rec once every point is stored.
			r.State, r.Outcome, r.EndedAt = StateRunning, OutcomeRunning, time.Time{}
		}
		ok, err := rr.RestoreRun(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("restore run %d from its directory: %w", id, err)
		}
		if !ok {
			continue
		}
		restored++
		if rec.State == StateEnded {
			ended[id] = rec
		}
		s.log.Warn("run restored from its directory: the database had no record of it", "run", id, "job", r.Job, "state", rec.State)
	}
	if restored > 0 {
		s.log.Warn("runs restored from their directories; their points are read again from their logs", "runs", restored, "ended", len(ended))
	}
	return ended, nil
}

// recordedRunner is the runner of a run restored from its directory that
// had ended: its end is the one recorded.
type recordedRunner struct{ rec *Run }

func (r recordedRunner) poll(time.Time) (*runEnd, runLive, bool) {
	// finish puts back the end as recorded (active.recorded): this
	// only makes it the owner's.
	return &runEnd{e: ending{exitCode: -1, oomKills: -1}, outcome: r.rec.Outcome, facts: r.rec.End.clone(), endedAt: r.rec.EndedAt}, runLive{}, false
}
func (recordedRunner) stop(stopRequest) error       { return nil }
func (recordedRunner) gone() (*EndFacts, time.Time) { return nil, time.Time{} }
func (recordedRunner) done()                        {}

package main

import (
	"context"
	"fmt"

	"github.com/trainbot/trainbot/trainer"
)

// cmdWatch records a run trainbot did not start, for the trainbot that
// serves the data directory to watch (it attaches within 5 s, or when it
// starts).
func cmdWatch(ctx context.Context, args []string, e env) int {
	fs := newFlags("watch", "--log FILE [--pid PID] [--name NAME]", e)
	var cf configFlags
	cf.register(fs, false)
	logPath := fs.String("log", "", "the log file the run writes (required)")
	pid := fs.Int("pid", 0, "the process that writes it: the run ends when it exits")
	name := fs.String("name", "", "the run's name in the history (default: the log's base name)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	if *logPath == "" {
		return usageError(fs, e, "--log FILE is required")
	}
	run, err := trainer.NewWatchedRun(trainer.WatchRequest{LogPath: *logPath, PID: *pid, Name: *name, By: "trainbot watch"})
	if err != nil {
		return errorf(e, "%v", err)
	}
	st, cfg, code := openHistory(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	run.ID = trainer.MaxRunDirID(cfg.DataDir) + 1 // an id never used on disk
	id, err := st.CreateRun(ctx, run)
	if err != nil {
		return errorf(e, "%v", err)
	}
	fmt.Fprintf(e.stdout, "run #%d (%s): watching %s", id, run.Job, run.LogPath)
	if run.PID > 0 {
		fmt.Fprintf(e.stdout, " until pid %d exits", run.PID)
	}
	fmt.Fprintf(e.stdout, ".\nThe trainbot serving %s attaches to it within seconds (or when it starts); 停止 %d ends the watch.\n", cfg.DataDir, id)
	return exitOK
}

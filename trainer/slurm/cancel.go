package slurm

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotRunning is returned by Cancel with a signal when the job is not
// RUNNING: a signal cannot reach a pending job (cancel it with signal ""),
// and one that ended has nothing left to signal.
var ErrNotRunning = errors.New("slurm: job not running")

// Cancel signals or cancels a job. With signal "" it is a plain `scancel ID`:
// Slurm sends SIGCONT and SIGTERM to every process of the job, SIGKILL after
// the cluster's KillWait, and the job ends CANCELLED; a job that already
// ended or that Slurm does not know is not an error.
//
// With a signal ("INT", "TERM", "USR1", or a number) it is
// `scancel --signal=SIG --full ID`: the batch step's process (the training
// process, which the script exec'd) and all its descendants get it, as a
// local run's process group does; with batchOnly, `--batch`: only the
// training process, not its children. Cancel first asks scontrol for the
// job's state and returns ErrNotRunning, without signalling, unless it is
// RUNNING: scancel --signal on a pending job (or one still configuring)
// retries for about 95 s before failing with "Job can not be altered now".
func Cancel(ctx context.Context, id string, signal string, batchOnly bool) error {
	return cancel(ctx, id, signal, batchOnly, run)
}

func cancel(ctx context.Context, id, signal string, batchOnly bool, run runner) error {
	if err := checkID(id); err != nil {
		return err
	}
	argv := []string{"scancel"}
	if signal != "" {
		if !validSignal(signal) {
			return fmt.Errorf("cancel job %s: signal %q: want a name like INT or a number", id, signal)
		}
		j, err := query(ctx, id, run)
		if err != nil {
			return fmt.Errorf("signal job %s: %w", id, err)
		}
		if j.State != "RUNNING" {
			return fmt.Errorf("signal job %s: %w (%s)", id, ErrNotRunning, j.State)
		}
		scope := "--full"
		if batchOnly {
			scope = "--batch"
		}
		argv = append(argv, "--signal="+signal, scope)
	}
	if _, err := run(ctx, CallTimeout, append(argv, id)...); err != nil {
		return fmt.Errorf("cancel job %s: %w", id, err)
	}
	return nil
}

func validSignal(s string) bool {
	s = strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

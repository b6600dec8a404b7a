package slurm

import (
	"context"
	"fmt"
	"strings"
)

// Cancel signals or cancels a job. With signal "" it is a plain `scancel ID`:
// Slurm sends SIGCONT and SIGTERM to every process of the job, SIGKILL after
// the cluster's KillWait, and the job ends CANCELLED; a job that already
// ended or that Slurm does not know is not an error. With a signal ("INT",
// "TERM", "USR1", or a number) it is `scancel --signal=SIG --full ID`: the
// batch step's process (the training process, which the script exec'd) and
// all its descendants get it, as a local run's process group does; with
// batchOnly, `--batch`: only the training process, not its children. A signal
// cannot reach a pending job: scancel says "Job can not be altered now",
// which Cancel returns (cancel a pending job with signal "").
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

// Package slurm submits, watches, signals and classifies the Slurm batch jobs
// of trainbot runs, through Slurm's own commands (sbatch, scontrol, sacct,
// scancel). It knows nothing of package trainer: a run is a SubmitSpec going
// in and a job id and Job states coming out.
//
// What it relies on, checked against Debian's slurm-wlm 22.05 (ci/slurm-up.sh
// starts such a cluster):
//
//   - Submit writes a batch script that cd's to the job's directory, exports
//     the run's variables and execs the command, so the training process is
//     the batch step's process. sbatch sends the script's contents to
//     slurmctld: editing job.sbatch later changes nothing for the queued job.
//     Jobs are submitted with --no-requeue: otherwise Slurm silently requeues
//     a batch job after a node failure or preemption and runs it again from
//     the start, appending to the same log; trainbot decides about retries.
//   - Cancel with a signal needs a running job: `scancel --signal=INT ID`
//     signals only the job's steps, never the batch script, so on a job that
//     is just a batch script it reaches nothing. --batch signals the batch
//     step's main process (here the training process itself, thanks to exec)
//     and not its children; --full signals it and all its descendants (the
//     equivalent of the SIGINT a local run gets on its process group). On a
//     pending job scancel --signal retries for ~95 s, then fails ("Job can
//     not be altered now"): Cancel checks the state first and returns
//     ErrNotRunning; a pending job is stopped by a plain cancel.
//   - A plain `scancel ID` (Slurm's SIGCONT, SIGTERM, then SIGKILL after the
//     cluster's KillWait) ends the job as CANCELLED and succeeds silently for
//     jobs that already ended or that Slurm never knew.
//   - Without slurmdbd, sacct has nothing ("Slurm accounting storage is
//     disabled"); scontrol knows a finished job for the cluster's MinJobAge
//     (300 s by default). Query falls back to sacct and says ErrUnknownJob
//     when neither knows the job.
//
// Watching cost: every call here is one RPC to slurmctld (a few milliseconds
// on an idle controller). One Query per run every 5 s (12 calls a minute per
// run) is plenty: a state change is seen within 5 s, and the run's progress
// comes from its output file, not from Slurm. A pending job may be polled
// less often (every 15-30 s). squeue is never needed per run. Slurm asks
// programs not to call its commands in tight loops; nothing here loops.
//
// Every command runs with a time limit (CallTimeout, SubmitTimeout) under
// the caller's context; scontrol and sacct with SLURM_TIME_FORMAT=standard so
// that times parse whatever the user set.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Time limits of one Slurm command. A controller that is busy answers slowly
// (its MessageTimeout is 10 s by default, and clients retry); sbatch gets
// longer because giving up on it may leave a job queued that nobody watches.
const (
	CallTimeout   = 30 * time.Second
	SubmitTimeout = 60 * time.Second
)

// Available says whether Slurm's client commands are on PATH; its error names
// every one that is missing.
func Available() error {
	var missing []string
	var first error
	for _, name := range []string{"sbatch", "squeue", "scontrol", "scancel"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
			if first == nil {
				first = err
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("slurm: %s not on PATH (install Slurm's client commands, e.g. Debian's slurm-client): %w",
			strings.Join(missing, ", "), first)
	}
	return nil
}

// commandError is a Slurm command that failed: its command line, how it
// ended and what it wrote on stderr.
type commandError struct {
	argv   []string
	err    error
	stderr string
}

func (e *commandError) Error() string {
	msg := strings.Join(e.argv, " ") + ": " + e.err.Error()
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

func (e *commandError) Unwrap() error { return e.err }

// runner runs one command and returns its stdout; a failure is a
// *commandError. Query takes one so its fallback can be tested without Slurm.
type runner func(ctx context.Context, timeout time.Duration, argv ...string) ([]byte, error)

// run is the runner that executes Slurm's commands, in trainbot's
// environment.
func run(ctx context.Context, timeout time.Duration, argv ...string) ([]byte, error) {
	return runEnv(ctx, timeout, os.Environ(), argv...)
}

// runEnv runs one of Slurm's commands with env, plus SLURM_TIME_FORMAT
// for those that print times (not sbatch: its environment becomes the
// job's).
func runEnv(ctx context.Context, timeout time.Duration, env []string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	if argv[0] != "sbatch" {
		cmd.Env = append(slices.Clip(env), "SLURM_TIME_FORMAT=standard")
	}
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), &commandError{argv: argv, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// stderrOf is what a failed command wrote on stderr ("" for other errors).
func stderrOf(err error) string {
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.stderr
	}
	return ""
}

// checkID refuses job ids that are not plain Slurm job ids, so that an id
// can never be read as an option by a command.
func checkID(id string) error {
	if id == "" {
		return errors.New("slurm: empty job id")
	}
	for _, c := range id {
		if (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("slurm: job id %q: want digits", id)
		}
	}
	return nil
}

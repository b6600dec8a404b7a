package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/private"
)

// ScriptFile is the batch script Submit writes in the run's directory.
const ScriptFile = "job.sbatch"

// SubmitSpec is one run to submit as a Slurm batch job.
type SubmitSpec struct {
	RunID int64
	Job   string   // the trainbot job's name; the Slurm job is named trainbot-RUNID-JOB
	Argv  []string // the command, run as is: no item goes through a shell
	Dir   string   // the command's directory ("": the directory trainbot runs in)
	// Env is added to the job's environment (e.g. TRAINBOT_RUN_ID=7): only the
	// additions, as NAME=value with NAME a shell variable name. The job also
	// inherits the environment sbatch runs in (Slurm's --export=ALL default),
	// so trainbot's own environment must not be passed here: it would be
	// written into the script.
	Env []string
	// SecretEnv names the variables of trainbot's environment that hold
	// its secrets (the config's push channels' key_env, secret_env…):
	// sbatch, whose environment becomes the job's, runs without them and
	// without any TRAINBOT_ variable (private.WithoutSecrets).
	SecretEnv []string
	// Umask is the job's umask (sbatch's SLURM_UMASK); nil: the one sbatch
	// runs with, which is trainbot's own private one.
	Umask   *int
	RunDir  string // where ScriptFile is written
	LogPath string // the job's stdout and stderr, appended; must be on storage the nodes share
	Options Options
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Submit writes RunDir/job.sbatch and submits it with sbatch; it returns the
// job id. The job runs in Dir with Env added, appends its stdout and stderr to
// LogPath, and is not requeued by Slurm. Errors carry sbatch's stderr.
//
// If Submit fails with a timeout, sbatch may still have queued the job:
// `squeue --name trainbot-RUNID-JOB` finds it.
func Submit(ctx context.Context, spec SubmitSpec) (string, error) {
	env := private.WithoutSecrets(os.Environ(), spec.SecretEnv)
	if spec.Umask != nil {
		env = append(env, fmt.Sprintf("SLURM_UMASK=%04o", *spec.Umask))
	}
	return submit(ctx, spec, func(ctx context.Context, timeout time.Duration, argv ...string) ([]byte, error) {
		return runEnv(ctx, timeout, env, argv...)
	})
}

func submit(ctx context.Context, spec SubmitSpec, run runner) (string, error) {
	argv, script, err := prepare(spec)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(spec.RunDir, 0o755); err != nil {
		return "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		return "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	path := filepath.Join(spec.RunDir, ScriptFile)
	if err := writeScript(path, script); err != nil {
		return "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	out, err := run(ctx, SubmitTimeout, append(argv, path)...)
	if err != nil {
		return "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	id := parseParsable(string(out))
	if checkID(id) != nil {
		return "", fmt.Errorf("submit run %d: sbatch printed %q, not a job id", spec.RunID, out)
	}
	return id, nil
}

// prepare checks the spec and returns sbatch's arguments (without the
// script's path) and the script.
func prepare(spec SubmitSpec) (argv []string, script string, err error) {
	fail := func(format string, a ...any) ([]string, string, error) {
		return nil, "", fmt.Errorf("submit run %d: %s", spec.RunID, fmt.Sprintf(format, a...))
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return fail("empty command")
	}
	for _, a := range spec.Argv {
		if strings.ContainsRune(a, 0) {
			return fail("command item %q contains a NUL byte", a)
		}
	}
	for _, e := range spec.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || !envNameRE.MatchString(name) {
			return fail("environment item %q: want NAME=value with NAME a shell variable name", e)
		}
		if strings.ContainsRune(e, 0) {
			return fail("environment item %q contains a NUL byte", e)
		}
	}
	if spec.RunDir == "" || spec.LogPath == "" {
		return fail("RunDir and LogPath are required")
	}
	if err := spec.Options.Validate(); err != nil {
		return nil, "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	logPath, err := filepath.Abs(spec.LogPath)
	if err != nil {
		return nil, "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
	}
	if strings.Contains(logPath, `\`) {
		// A backslash makes slurmstepd strip backslashes from the name.
		return fail("log path %q: Slurm cannot write to a path with a backslash", logPath)
	}
	dir := spec.Dir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, "", fmt.Errorf("submit run %d: %w", spec.RunID, err)
		}
	}
	// In --output and --error "%" starts a replacement ("%j": the job id);
	// "%%" is one "%".
	out := strings.ReplaceAll(logPath, "%", "%%")
	argv = []string{"sbatch", "--parsable",
		"--job-name=" + JobName(spec.RunID, spec.Job),
		"--output=" + out, "--error=" + out, "--open-mode=append",
		"--no-requeue",
	}
	if dir != "" {
		argv = append(argv, "--chdir="+dir)
	}
	argv = append(argv, spec.Options.args()...)
	return argv, batchScript(spec.RunID, dir, spec.Env, spec.Argv), nil
}

// JobName is the Slurm job name of a run: trainbot-RUNID-JOB.
func JobName(runID int64, job string) string {
	return "trainbot-" + strconv.FormatInt(runID, 10) + "-" + job
}

// batchScript is the job's script: cd to dir, export env, exec argv. Every
// value is one single-quoted shell word, so bash reads it back byte for byte
// and interprets nothing in it. No value goes into a comment line: sbatch
// reads "#SBATCH" lines up to the first command, and the first command (cd
// or export or exec) comes before any value.
func batchScript(runID int64, dir string, env, argv []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "# trainbot run %d, submitted with sbatch. It runs the command with exec so that\n", runID)
	b.WriteString("# the training process is the batch step itself and gets Slurm's signals.\n")
	if dir != "" {
		fmt.Fprintf(&b, "cd -- %s || exit 1\n", shellQuote(dir))
	}
	for _, e := range env {
		fmt.Fprintf(&b, "export -- %s\n", shellQuote(e))
	}
	b.WriteString("exec --")
	for _, a := range argv {
		b.WriteString(" ")
		b.WriteString(shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote makes s one single-quoted shell word: inside single quotes
// nothing is special but the quote itself, written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeScript writes the script executable by its owner, so that a person
// can also run it by hand (sbatch itself sends the contents to Slurm).
func writeScript(path, script string) error {
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return err
	}
	return os.Chmod(path, 0o700)
}

// parseParsable reads sbatch --parsable's "ID" or "ID;CLUSTER" (its last
// line: warnings go to stderr, but a site's wrapper may print more).
func parseParsable(out string) string {
	out = strings.TrimSpace(out)
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	return id
}

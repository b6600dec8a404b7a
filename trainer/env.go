package trainer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/internal/private"
)

// The TRAINBOT_ variables a run gets from trainbot (with TRAINBOT_PARAM_<NAME>
// for its parameters, see Job.Argv); no other TRAINBOT_ variable reaches it.
const (
	EnvRunID       = "TRAINBOT_RUN_ID"
	EnvRunDir      = "TRAINBOT_RUN_DIR"
	EnvMetricsFile = "TRAINBOT_METRICS_FILE"
	// EnvCheckpoint is the checkpoint an on_failure resume starts from.
	EnvCheckpoint = "TRAINBOT_CHECKPOINT"
	// and EnvControlFile (knobs.go), the control file 调参 writes
)

// MetricsFile is the file in a run's directory that EnvMetricsFile names.
const MetricsFile = "metrics.jsonl"

// childEnv is a run's whole environment: trainbot's own without its
// secrets (private.WithoutSecrets), then runAdditions.
func childEnv(secret, extra []string, id int64, runDir, metricsPath string) []string {
	return append(private.WithoutSecrets(os.Environ(), secret), runAdditions(extra, id, runDir, metricsPath)...)
}

// runAdditions is what a run's environment adds to the inherited one (all
// a Slurm job's script exports: it inherits sbatch's): extra (the job's env
// and parameters: a job that needs one of trainbot's secrets sets it
// there), then the run's TRAINBOT_ variables.
func runAdditions(extra []string, id int64, runDir, metricsPath string) []string {
	env := append([]string(nil), extra...)
	env = append(env,
		EnvRunID+"="+strconv.FormatInt(id, 10),
		EnvRunDir+"="+runDir,
		EnvMetricsFile+"="+metricsPath,
		EnvControlFile+"="+filepath.Join(runDir, ControlFile),
	)
	if os.Getenv("PYTHONUNBUFFERED") == "" && !hasEnv(extra, "PYTHONUNBUFFERED") {
		// Python buffers a piped stdout; unbuffered, metrics arrive as printed.
		env = append(env, "PYTHONUNBUFFERED=1")
	}
	return env
}

// childUmask is the umask a run starts with: the one trainbot was started
// with, before it made its own files private (internal/private); nil when
// trainbot did not change it.
func childUmask() *int {
	if m, ok := private.Original(); ok {
		return &m
	}
	return nil
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

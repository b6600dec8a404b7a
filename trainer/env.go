package trainer

import (
	"os"
	"slices"
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
)

// MetricsFile is the file in a run's directory that EnvMetricsFile names.
const MetricsFile = "metrics.jsonl"

// envPrefix starts trainbot's own variables (config.EnvPrefix, which
// trainer does not import).
const envPrefix = "TRAINBOT_"

// inheritedEnv is environ without trainbot's secrets: every TRAINBOT_
// variable (trainbot's settings, TRAINBOT_TELEGRAM_TOKEN among them; a run's
// own are set afresh) and every variable named in secret (the config's
// push channels' key_env, secret_env…). What is left is the environment
// trainbot was started with: PATH, HOME, CUDA_VISIBLE_DEVICES, a conda
// environment. A job that needs one of the removed variables names it in
// its own env.
func inheritedEnv(environ, secret []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) || slices.Contains(secret, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// childEnv is a run's whole environment: trainbot's own without its
// secrets, then extra (the job's env and parameters), then the run's
// TRAINBOT_ variables.
func childEnv(secret, extra []string, id int64, runDir, metricsPath string) []string {
	env := inheritedEnv(os.Environ(), secret)
	env = append(env, extra...)
	env = append(env,
		EnvRunID+"="+strconv.FormatInt(id, 10),
		EnvRunDir+"="+runDir,
		EnvMetricsFile+"="+metricsPath,
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

// Package slurmtest lets tests that submit real Slurm jobs skip, saying why,
// where there is no test cluster. ci/slurm-up.sh (as root) starts a
// single-node cluster named "trainbot" for them; on any other cluster they
// skip unless TRAINBOT_SLURM_TESTS=any, so that `go test ./...` on a login
// node does not queue jobs in a real cluster. With TRAINBOT_SLURM_TESTS=require
// (.ci/run sets it under CI=true) they fail instead of skipping, each saying
// why: CI cannot pass with its Slurm tests unrun.
package slurmtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Require skips t unless the test cluster answers; it fails t instead when
// TRAINBOT_SLURM_TESTS=require.
func Require(t testing.TB) {
	t.Helper()
	if why := Missing(); why != "" {
		if os.Getenv("TRAINBOT_SLURM_TESTS") == "require" {
			t.Fatalf("TRAINBOT_SLURM_TESTS=require and the Slurm test cluster is missing: %s", why)
		}
		t.Skip(why)
	}
}

// Missing says why the cluster tests cannot run ("" when they can), asked
// once: a controller that does not answer takes scontrol ~9 s to say so.
var Missing = sync.OnceValue(func() string {
	for _, name := range []string{"sbatch", "squeue", "scontrol", "scancel"} {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Sprintf("no Slurm here (%s: %v); ci/slurm-up.sh (as root) starts a single-node cluster for these tests", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "config").Output()
	if err != nil {
		return fmt.Sprintf("the Slurm controller does not answer (%v); ci/slurm-up.sh (as root) starts one", err)
	}
	name := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.TrimSpace(k) == "ClusterName" {
			name = strings.TrimSpace(v)
		}
	}
	if name != "trainbot" && os.Getenv("TRAINBOT_SLURM_TESTS") != "any" {
		return fmt.Sprintf("cluster %q is not ci/slurm-up.sh's test cluster; set TRAINBOT_SLURM_TESTS=any to submit test jobs to it", name)
	}
	return ""
})

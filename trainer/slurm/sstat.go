package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// MaxRSS asks sstat for the largest resident set size of any task of a
// running job's steps (the batch step included): `sstat -a -j ID -n -P -o
// JobID,MaxRSS`. It works where the cluster gathers job accounting
// (JobAcctGatherType, e.g. jobacct_gather/linux or cgroup) and the job
// runs; elsewhere sstat fails or prints nothing, and MaxRSS says so in its
// error. Slurm samples it every JobAcctGatherFrequency (30 s by default).
func MaxRSS(ctx context.Context, id string) (int64, error) {
	return maxRSS(ctx, id, run)
}

func maxRSS(ctx context.Context, id string, run runner) (int64, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	out, err := run(ctx, CallTimeout, "sstat", "-a", "-j", id, "-n", "-P", "-o", "JobID,MaxRSS")
	if err != nil {
		return 0, fmt.Errorf("sstat job %s: %w", id, err)
	}
	return parseSstat(string(out), id)
}

// parseSstat reads sstat's "JOBID.STEP|MAXRSS" lines and returns the
// largest MaxRSS, in bytes.
func parseSstat(out, id string) (int64, error) {
	best, seen := int64(-1), false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		jid, v, ok := strings.Cut(line, "|")
		if !ok {
			return 0, fmt.Errorf("sstat job %s: unexpected line %q", id, line)
		}
		if base, _, _ := strings.Cut(jid, "."); base != id {
			continue
		}
		if v = strings.TrimSpace(v); v == "" {
			continue // a step not sampled yet
		}
		n, err := parseSlurmSize(v)
		if err != nil {
			return 0, fmt.Errorf("sstat job %s: MaxRSS %q: %w", id, v, err)
		}
		seen = true
		best = max(best, n)
	}
	if !seen {
		return 0, fmt.Errorf("sstat job %s: no step of the job has been sampled (is job accounting gathered on this cluster?)", id)
	}
	return best, nil
}

// parseSlurmSize reads Slurm's sizes: "219812K", "1.50G", "0"; a number
// without a suffix is bytes, K, M, G, T, P are powers of 1024.
func parseSlurmSize(s string) (int64, error) {
	mult := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		case 'T', 't':
			mult = 1 << 40
		case 'P', 'p':
			mult = 1 << 50
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("not a size")
	}
	return int64(f * mult), nil
}

#!/usr/bin/env bash
# Slurm runs on ci/slurm-up.sh's single-node cluster (start it first, as
# root): the time from 开始 (Supervisor.Start) to the first metric in
# trainbot, next to the baseline measured in the same run — a plain
# `sbatch --wrap` of the same command until its first line is in its output
# file — and the ratio; the time until trainbot knows the job RUNNING; and
# the cost of watching one run (calls to Slurm's commands per minute).
set -euo pipefail
cd "$(dirname "$0")/.."
count="${COUNT:-3}"
out="$(go test -run '^$' -bench '^BenchmarkSlurm' -benchtime "${N:-3}x" -count "$count" -timeout 30m ./trainer)"
echo "$out" | grep -E '^Benchmark' || true
echo "$out" | awk '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return 0 }
	function median(a, n,   i, j, t) {
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	/^BenchmarkSlurmFirstMetric/ { f[nf++] = metric("first-metric-ms/op"); r[nr++] = metric("running-ms/op"); s[ns++] = metric("sbatch-first-line-ms/op") }
	/^BenchmarkSlurmWatchCost/ { c[nc++] = metric("calls/min") }
	END {
		printf "\nfirst metric in trainbot %.0f ms, plain sbatch first line %.0f ms: ratio %.2f; trainbot knows it RUNNING after %.0f ms (medians of %d)\n",
			median(f, nf), median(s, ns), median(f, nf) / median(s, ns), median(r, nr), nf
		printf "watching one running run: %.1f calls to Slurm per minute\n", median(c, nc)
	}'

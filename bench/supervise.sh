#!/usr/bin/env bash
# Supervision overhead: a CPU-bound child that prints 1e6 lines, run with
# its output redirected to a file and under trainbot's supervisor, in the
# same run. Prints the child's wall time in both cases and the ratio
# (1.00 = no overhead), and how long trainbot takes to store every point.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${COUNT:-5}"
out="$(go test -run '^$' -bench 'BenchmarkChild(RedirectedToFile|Supervised)$' -benchtime 1x -count "$count" ./trainer)"
echo "$out" | grep -E '^Benchmark' || true
echo "$out" | awk '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return 0 }
	/^BenchmarkChildRedirectedToFile/ { base[nb++] = metric("child-ms/op") }
	/^BenchmarkChildSupervised/       { sup[ns++] = metric("child-ms/op"); stored[nt++] = metric("ns/op") / 1e6 }
	function median(a, n,   i, j, t) {
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	END {
		b = median(base, nb); s = median(sup, ns); st = median(stored, nt)
		printf "child wall time, output redirected to a file: %.0f ms (median of %d)\n", b, nb
		printf "child wall time, under trainbot:              %.0f ms (median of %d)\n", s, ns
		printf "ratio (supervised / file):                    %.3f\n", s / b
		printf "until the run is fully recorded:             %.0f ms\n", st
	}'

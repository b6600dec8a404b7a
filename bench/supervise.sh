#!/usr/bin/env bash
# Supervision overhead: a CPU-bound child that prints 1e6 lines, run with
# its output redirected to a file and under trainbot's supervisor, in the
# same run. "Burst" prints them as fast as it can (~1e6 lines/s); "Steady"
# does ten times the work per line (~10 s, still 1e5 lines/s). Prints the
# child's wall time in both cases and the ratio (1.00 = no overhead), and
# how long trainbot takes until the run is fully recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${COUNT:-3}"
out="$(go test -run '^$' -bench 'BenchmarkChild(RedirectedToFile|Supervised)/' -benchtime 1x -count "$count" -timeout 30m ./trainer)"
echo "$out" | grep -E '^Benchmark' || true
echo "$out" | awk '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return 0 }
	function median(a, n,   i, j, t) {
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	/^BenchmarkChildRedirectedToFile\/Burst/  { bb[nbb++] = metric("child-ms/op") }
	/^BenchmarkChildRedirectedToFile\/Steady/ { bs[nbs++] = metric("child-ms/op") }
	/^BenchmarkChildSupervised\/Burst/  { sb[nsb++] = metric("child-ms/op"); rb[nrb++] = metric("ns/op") / 1e6 }
	/^BenchmarkChildSupervised\/Steady/ { ss[nss++] = metric("child-ms/op"); rs[nrs++] = metric("ns/op") / 1e6 }
	END {
		printf "\n%-7s %14s %16s %8s %22s\n", "child", "to a file ms", "under trainbot ms", "ratio", "fully recorded ms"
		b = median(bb, nbb); s = median(sb, nsb); printf "%-7s %14.0f %16.0f %8.3f %22.0f\n", "burst", b, s, s / b, median(rb, nrb)
		b = median(bs, nbs); s = median(ss, nss); printf "%-7s %14.0f %16.0f %8.3f %22.0f\n", "steady", b, s, s / b, median(rs, nrs)
		printf "(medians of %d runs each)\n", nbb
	}'

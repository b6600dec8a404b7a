#!/usr/bin/env bash
# Parse throughput of trainer/logparse on a realistic mixed log (every
# testdata log, repeated to ~4 MB), against a baseline measured in the same
# run: splitting the same bytes into lines and doing nothing else. Each run
# measures both back to back, so a busy machine slows both alike.
#   bench/logparse.sh                 # 5 runs of 1s each
#   RUNS=9 BENCHTIME=3s bench/logparse.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/logparse.test" ./trainer/logparse
cd trainer/logparse # the benchmarks read testdata/
for i in $(seq "${RUNS:-5}"); do
	"$tmp/logparse.test" -test.run='^$' -test.bench='^(BenchmarkSplitBaseline|BenchmarkParse)$' \
		-test.benchtime="${BENCHTIME:-1s}" | grep -E '^Benchmark'
done | tee "$tmp/out"
awk '
	function rate(   i) { for (i = 1; i < NF; i++) if ($(i+1) == "lines/s") return $i }
	function median(a, n,   i, j, t) {
		for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return a[int(n/2)]
	}
	/^BenchmarkSplitBaseline/ { b = rate() }
	/^BenchmarkParse/         { p[n] = rate(); r[n] = b / p[n]; runs = runs sprintf(" %.1fx", r[n]); n++ }
	END {
		if (!n) { print "no benchmark results"; exit 1 }
		printf "parse:    %.0f lines/s (median of %d runs)\n", median(p, n), n
		printf "ratio:    parsing a line costs %.1fx splitting it into a string (median; runs:%s)\n", median(r, n), runs
	}' "$tmp/out"

#!/usr/bin/env bash
# Parse throughput of trainer/logparse against a baseline measured in the
# same run: splitting the same bytes into lines (a string each) and doing
# nothing else. Two logs: every testdata log one after the other, repeated
# to ~4 MB (progress bars, dicts, JSON, key=value, tables: many shapes, each
# seen a few times), and 200,000 lines of the classic loop (one shape, the
# fast path's case). For the classic log also AppendLine (parsing out of the
# reader's buffer, no string per line) and scan alone (no fast path). Each
# run measures all back to back, so a busy machine slows them alike.
#   bench/logparse.sh                 # 5 runs of 1s each
#   RUNS=9 BENCHTIME=3s bench/logparse.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/logparse.test" ./trainer/logparse
cd trainer/logparse # the benchmarks read testdata/
for i in $(seq "${RUNS:-5}"); do
	"$tmp/logparse.test" -test.run='^$' -test.bench='^(BenchmarkSplitBaseline|BenchmarkParse|BenchmarkSplitClassic|BenchmarkParseClassic|BenchmarkAppendClassic|BenchmarkParseClassicScan)$' \
		-test.benchtime="${BENCHTIME:-1s}" | grep -E '^Benchmark'
done | tee "$tmp/out"
awk '
	function rate(   i) { for (i = 1; i < NF; i++) if ($(i+1) == "lines/s") return $i }
	function median(a, n,   i, j, t) {
		for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return a[int(n/2)]
	}
	/^BenchmarkSplitBaseline/    { b = rate() }
	/^BenchmarkParse-/           { p[n] = rate(); r[n] = b / p[n]; n++ }
	/^BenchmarkSplitClassic/     { cb = rate() }
	/^BenchmarkParseClassic-/    { cp[m] = rate(); cr[m] = cb / cp[m]; m++ }
	/^BenchmarkAppendClassic/    { ca[k] = rate(); car[k] = cb / ca[k]; k++ }
	/^BenchmarkParseClassicScan/ { cs[l] = rate(); csr[l] = cb / cs[l]; l++ }
	END {
		if (!n || !m) { print "no benchmark results"; exit 1 }
		printf "mixed log:   parse %.0f lines/s; a line costs %.1fx splitting it into a string (medians of %d runs)\n", median(p, n), median(r, n), n
		printf "classic log: parse %.0f lines/s, %.1fx splitting; AppendLine %.0f lines/s, %.1fx; scan alone %.0f lines/s, %.1fx\n",
			median(cp, m), median(cr, m), median(ca, k), median(car, k), median(cs, l), median(csr, l)
	}' "$tmp/out"

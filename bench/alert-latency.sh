#!/usr/bin/env bash
# Alert latency, as the issue's closing note asks: from a child's exit to
# the push request at a fake push server, median and p90 over 100 runs of a
# job that fails, through the real supervisor, store, notifier and push
# channel. "with-chart" is what trainbot sends (the end report carries the
# loss chart, drawn first); "text-only" leaves the chart out. The baseline,
# measured in the same run, is a bare HTTP POST to the same server. The
# last column starts the clock when the supervisor tells its listeners the
# run ended: the share of notify and deliver (and the chart), without the
# supervisor's own time to notice the end.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(go test -run '^$' -bench AlertLatency -benchtime "${RUNS:-100}x" -count 1 ./cmd/trainbot/ 2>/dev/null)"
echo "$out" | grep -E '^(Benchmark|goos|goarch|cpu)' || true
echo "$out" | awk '
	/^BenchmarkAlertLatency/ {
		for (i = 2; i < NF; i++) v[$(i+1)] = $i
		split($1, p, "/"); sub(/-[0-9]+$/, "", p[2])
		med[p[2]] = v["ms-median"]; p90[p[2]] = v["ms-p90"]; post[p[2]] = v["ms-post-median"]; ev[p[2]] = v["ms-event-median"]; runs[p[2]] = v["runs"]
	}
	END {
		printf "\n%-12s %6s %12s %10s %22s %24s\n", "variant", "runs", "median ms", "p90 ms", "median × bare POST", "median ms from the event"
		for (k in med) printf "%-12s %6d %12.2f %10.2f %22.0f %24.2f\n", k, runs[k], med[k], p90[k], med[k] / post[k], ev[k]
		for (k in post) { printf "%-12s %6s %12.3f   (bare POST to the fake server, same run)\n", "baseline", "", post[k]; break }
	}'

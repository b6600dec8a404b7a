#!/usr/bin/env bash
# `trainbot check` of configs of 1,000 and 10,000 jobs (valid, and with two
# errors in each job), in process: BenchmarkCheck of cmd/trainbot. Prints
# the time per job of each size and the ratio 10,000 : 1,000, which is ~1
# when check is linear in the jobs (it was ~100 when quadratic).
#   bench/check.sh            # 3 runs of each
#   COUNT=5 bench/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./cmd/trainbot/ -run '^$' -bench '^BenchmarkCheck$' -benchtime 2x -count "${COUNT:-3}" |
	awk '/^BenchmarkCheck\// {
		name = $1; sub(/^BenchmarkCheck\//, "", name); sub(/-[0-9]+$/, "", name)
		for (i = 1; i < NF; i++) if ($(i+1) == "µs/job") v = $i
		kind = (name ~ /faulty/) ? "faulty" : "valid"; n = name; sub(/\/faulty/, "", n); sub(/jobs=/, "", n)
		key = kind " " n; if (!(key in best) || v < best[key]) best[key] = v
	}
	END {
		for (k = 0; k < 2; k++) {
			kind = k ? "faulty" : "valid"
			a = best[kind " 1000"]; b = best[kind " 10000"]
			printf "%-6s 1,000 jobs %.1f µs/job, 10,000 jobs %.1f µs/job (best of runs): ratio %.2f\n", kind, a, b, b / a
		}
	}'

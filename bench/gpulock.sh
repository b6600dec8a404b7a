#!/usr/bin/env bash
# GPU locks (internal/gpulock): one look at the locks of 8 GPUs (Holders,
# what a trainbot waiting for GPUs does once a second: 4 held, 2 orphans,
# 2 free), against a baseline measured in the same run (listing the lock
# directory, opening and closing each file: the least a look costs), and
# one TryLock and Close of a free GPU. Best of COUNT runs.
#   bench/gpulock.sh
#   COUNT=5 bench/gpulock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./internal/gpulock/ -run '^$' -bench '^Benchmark(Holders|OpenCloseBaseline|TryLockFree)$' -count "${COUNT:-3}" |
	awk '/^Benchmark/ {
		name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
		if (!(name in best) || $3 < best[name]) best[name] = $3
	}
	END {
		printf "%-22s %12s\n", "", "best µs/op"
		printf "%-22s %12.1f\n", "Holders (8 GPUs)", best["Holders"] / 1000
		printf "%-22s %12.1f\n", "baseline (open/close)", best["OpenCloseBaseline"] / 1000
		printf "%-22s %12.1f\n", "TryLock+Close (free)", best["TryLockFree"] / 1000
		printf "Holders : baseline = %.1f; once a second that is %.3f%% of one core\n", best["Holders"] / best["OpenCloseBaseline"], best["Holders"] / 1e9 * 100
	}'

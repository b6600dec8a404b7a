#!/usr/bin/env bash
# Supervision overhead: a CPU-bound child that prints 1e6 lines, run with
# its output redirected to a file and under trainbot's supervisor, back to
# back in each iteration (so both see the same load), in turn in each order
# (ABBA: the redirected child first in even iterations, second in odd ones,
# so that a drift of the machine or what the run before left weighs on
# both; ITER is best even). "Burst" prints them as
# fast as it can (~1e6 lines/s); "Steady" does ten times the work per line
# (~5 s, still 2e5 lines/s). The runs' supervisor is the real trainbot
# binary, built here.
#
# The child measures its own runtime, first line of work to last write:
# "ratio" is what supervision costs the training (1.00 = nothing). "wall"
# compares exec-to-exit of the redirected child with 开始-to-exit of the
# supervised one, which adds the one-off start of the run's supervisor
# ("start ms"). "bot cpu ms" is the CPU time trainbot spent on the run
# (reading, parsing, storing; at nice 10), until it had recorded all of it.
# Medians over COUNT benchmark runs of ITER pairs each. Each mode runs:
# unpinned (the child, the bot and the shim share the machine's cores) and
# pinned (taskset: the child on core CHILD_CPU, trainbot and its shim on
# core BOT_CPU, as on a server where the training has its own cores; the
# redirected baseline child is pinned the same way).
#   bench/supervise.sh
#   COUNT=5 ITER=4 bench/supervise.sh
#   MODES=pinned CHILD_CPU=2 BOT_CPU=3 bench/supervise.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/trainbot" ./cmd/trainbot
go test -c -o "$tmp/trainer.test" ./trainer
# One mode: "unpinned" (the child, the bot and the shim share the cores),
# or "pinned" (taskset: the child on core CHILD_CPU, default 0; this test
# process, which is the bot, and the shim it starts on BOT_CPU, default 1).
run() {
	local pin=()
	if [ "$1" = pinned ]; then pin=(taskset -c "${BOT_CPU:-1}"); export TRAINBOT_BENCH_CHILD_CPU="${CHILD_CPU:-0}"; else unset TRAINBOT_BENCH_CHILD_CPU; fi
	(cd trainer && TRAINBOT_BENCH_SHIM="$tmp/trainbot" "${pin[@]}" "$tmp/trainer.test" -test.run '^$' -test.bench '^BenchmarkSupervisionOverhead/' \
		-test.benchtime "${ITER:-2}x" -test.count "${COUNT:-3}" -test.timeout 30m)
}
for mode in ${MODES:-unpinned pinned}; do
	out="$(run "$mode")"
	echo "$out" | grep -E '^Benchmark' || true
	echo "$out" | awk -v mode="$mode" '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return 0 }
	function median(a, n,   i, j, t) {
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	/^BenchmarkSupervisionOverhead\// {
		k = ($1 ~ /Burst/) ? "burst" : "steady"
		n = cnt[k]++
		of[k, n] = metric("own-file-ms/op"); os[k, n] = metric("own-supervised-ms/op"); r[k, n] = metric("ratio/op")
		wr[k, n] = metric("wall-ratio/op"); st[k, n] = metric("start-ms/op"); bc[k, n] = metric("bot-cpu-ms/op")
	}
	function med(arr, k,   i, a) { for (i = 0; i < cnt[k]; i++) a[i] = arr[k, i]; return median(a, cnt[k]) }
	END {
		printf "\n%s:\n%-7s %12s %18s %8s %11s %9s %11s\n", mode, "child", "to a file ms", "under trainbot ms", "ratio", "wall ratio", "start ms", "bot cpu ms"
		for (k in cnt) printf "%-7s %12.0f %18.0f %8.3f %11.3f %9.0f %11.0f\n", k, med(of, k), med(os, k), med(r, k), med(wr, k), med(st, k), med(bc, k)
		printf "(medians of %d runs; the ratios are geometric means of the pairs in each run)\n", cnt["burst"]
		if (mode == "pinned") print "goals, pinned: burst ratio <= 1.05, steady ratio <= 1.01 (unpinned figures are reported, not goals)"
	}'
done

#!/usr/bin/env bash
# Runs on another host ([[hosts]], over SSH) against the same runs on this
# host, measured in one run of each benchmark (a real sshd on 127.0.0.1 is
# the host; its trainbot is the test binary): the first point's latency,
# the catch-up of 1e6 lines printed while no hub watched and the bytes the
# connection carried for them, and the hub's resident memory with 3 live
# runs (on 3 hosts). Needs sshd (Debian: openssh-server). Prints the
# figures and remote/local ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
bench() { go test -run '^$' -bench "$1" -benchtime "$2" -timeout 20m ./trainer/agent | grep -E '^Benchmark'; }
out="$(bench '^BenchmarkFirstPoint$' 10x; bench '^BenchmarkCatchUp$' 1x; bench '^BenchmarkHubRSS$/^local$' 1x; bench '^BenchmarkHubRSS$/^remote$' 1x)"
echo "$out"
echo "$out" | awk '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return "" }
	/^BenchmarkFirstPoint\/local/  { fl = metric("first-point-ms/op") }
	/^BenchmarkFirstPoint\/remote/ { fr = metric("first-point-ms/op") }
	/^BenchmarkCatchUp\/local/     { cl = metric("catch-up-ms/op") }
	/^BenchmarkCatchUp\/remote/    { cr = metric("catch-up-ms/op"); wire = metric("wire-bytes/op"); log = metric("log-bytes/op") }
	/^BenchmarkHubRSS\/local/      { rl = metric("hub-rss-MiB") }
	/^BenchmarkHubRSS\/remote/     { rr = metric("hub-rss-MiB") }
	END {
		printf "\nfirst point: remote %.1f ms, local %.1f ms (%.2fx)\n", fr, fl, fr / fl
		printf "catch-up of 1e6 lines: remote %.0f ms, local %.0f ms (%.2fx); %.2f MB on the wire for %.2f MB of log (%.1f%%)\n", cr, cl, cr / cl, wire / 1e6, log / 1e6, 100 * wire / log
		printf "hub RSS with 3 live runs: on 3 hosts %.1f MiB, on this host %.1f MiB (%.2fx)\n", rr, rl, rr / rl
	}'

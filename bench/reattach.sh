#!/usr/bin/env bash
# Re-attach after a restart: a run prints 1e6 lines while no trainbot
# observes it (the bot detached); a new trainbot starts on the same data
# directory. Prints the time from its start to "re-attached" and to having
# read, parsed and stored the whole backlog (it re-reads the log from its
# start to rebuild the parser's state; bench/logparse.sh gives the parse
# rate that bounds it).
set -euo pipefail
cd "$(dirname "$0")/.."
count="${COUNT:-3}"
out="$(go test -run '^$' -bench '^BenchmarkReattach$' -benchtime 1x -count "$count" -timeout 30m ./trainer)"
echo "$out" | grep -E '^Benchmark' || true
echo "$out" | awk '
	function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return 0 }
	function median(a, n,   i, j, t) {
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	/^BenchmarkReattach/ { a[na++] = metric("attached-ms/op"); c[nc++] = metric("caught-up-ms/op") }
	END { printf "\nre-attached after %.0f ms, backlog of 1e6 lines read and stored after %.0f ms (medians of %d runs)\n", median(a, na), median(c, nc), na }'

#!/usr/bin/env bash
# The bot's CPU per 10⁶ lines ingested (#35 goal 1): one burst run under
# `trainbot console` whose child (cat) prints a ready log of 10⁶ lines in
# one of three formats (kv "step=N loss=X", classic "Epoch [e/10], Step
# [s/100000], Loss: x", tqdm progress bars ended by \r), from 开始 until
# the run's end report (the bot sends it once every point is stored; it
# carries the loss chart, drawn too). The figure is the bot's own
# utime+stime from /proc/PID/stat (not the child's nor the shim's: they
# are other processes), which a busy machine does not inflate. This tree
# and a baseline commit (BASE, default the commit before #35) run in
# turns, RUNS times each; medians, and the ratio baseline : this tree.
# A run's fixed cost (the bot's start, the end report, its chart) is not
# per line: this tree also runs the first 10^4 lines alone, and "per 10^6"
# is what the 10^6 lines cost beyond that, scaled to 10^6 lines. It still
# holds part of the end report: the short run stores 10^4 points, the long
# one ~40,000 (thinned), and reading and drawing them grows with them.
#   bench/ingest.sh
#   RUNS=5 FORMATS="kv tqdm" bench/ingest.sh
#   BASE=main bench/ingest.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-3}"
BASE="${BASE:-b711083}"
FORMATS="${FORMATS:-kv classic tqdm}"
PY="${PYTHON:-python3}"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

tmp="$(mktemp -d)"
bot=""
trap '[ -n "$bot" ] && kill "$bot" 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/trainbot" ./cmd/trainbot
mkdir "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go build -o "$tmp/trainbot-base" ./cmd/trainbot)
"$PY" - "$tmp" <<'PY'
import random, sys
d = sys.argv[1]
random.seed(1)
N = 1000000
loss = [2.0 * 0.99999 ** i + random.random() * 0.1 for i in range(N)]
# The 10^6 lines, and their first 10^4 (".short": the fixed cost of a run).
for suffix, n in (("", N), (".short", 10000)):
    with open(d + "/kv.log" + suffix, "w") as f:
        for i in range(n):
            f.write("step=%d loss=%.4f\n" % (i + 1, loss[i]))
    with open(d + "/classic.log" + suffix, "w") as f:
        for i in range(n):
            f.write("Epoch [%d/10], Step [%d/100000], Loss: %.4f\n" % (i // 100000 + 1, i % 100000 + 1, loss[i]))
    with open(d + "/tqdm.log" + suffix, "w") as f:
        for i in range(n):
            pct = (i + 1) * 100 // N
            bar = "\u2588" * (pct // 10) + " " * (10 - pct // 10)
            f.write("\rtrain: %3d%%|%s| %d/%d [00:10<00:00, 99999.00it/s, loss=%.4f]" % (pct, bar, i + 1, N, loss[i]))
        f.write("\n")
PY

# One run: prints "cpu_ms hwm_kb" of the bot ($1) ingesting format $2
# (its 10^4 first lines when $3 is ".short").
ingest() {
	local exe="$1" fmt="$2" short="${3:-}" d="$tmp/run"
	rm -rf "$d"
	mkdir -p "$d"
	cat >"$d/cfg.toml" <<EOF
data_dir = "$d/data"
[[jobs]]
name = "$fmt"
command = ["cat", "$tmp/$fmt.log$short"]
EOF
	mkfifo "$d/in"
	"$exe" console --config "$d/cfg.toml" <"$d/in" >"$d/out" 2>"$d/err" &
	bot=$!
	exec 3>"$d/in"
	echo "开始 $fmt" >&3
	local i
	for i in $(seq 1 1200); do # at most 120 s
		grep -q "finished after" "$d/out" && break
		sleep 0.1
	done
	if ! grep -q "finished after" "$d/out"; then
		echo "ingest.sh: $exe did not finish the $fmt run" >&2
		cat "$d/out" "$d/err" >&2
		exit 1
	fi
	local tck
	tck="$(getconf CLK_TCK)"
	awk -v t="$tck" '{ printf "%d ", ($14 + $15) * 1000 / t }' "/proc/$bot/stat"
	awk '/^VmHWM:/ { print $2 }' "/proc/$bot/status"
	exec 3>&-
	wait "$bot" || true
	bot=""
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

printf '%-8s %16s %16s %7s %16s %16s %14s %14s\n' "format" "baseline cpu ms" "trainbot cpu ms" "ratio" "baseline HWM MB" "trainbot HWM MB" "fixed cpu ms" "per 10^6 ms"
for fmt in $FORMATS; do
	: >"$tmp/ours"
	: >"$tmp/theirs"
	: >"$tmp/fixed"
	for _ in $(seq "$RUNS"); do
		ingest "$tmp/trainbot-base" "$fmt" >>"$tmp/theirs"
		ingest "$tmp/trainbot" "$fmt" >>"$tmp/ours"
		ingest "$tmp/trainbot" "$fmt" .short >>"$tmp/fixed"
	done
	bc="$(cut -d' ' -f1 "$tmp/theirs" | median)"
	oc="$(cut -d' ' -f1 "$tmp/ours" | median)"
	bm="$(cut -d' ' -f2 "$tmp/theirs" | median)"
	om="$(cut -d' ' -f2 "$tmp/ours" | median)"
	fc="$(cut -d' ' -f1 "$tmp/fixed" | median)"
	awk -v f="$fmt" -v bc="$bc" -v oc="$oc" -v bm="$bm" -v om="$om" -v fc="$fc" \
		'BEGIN { printf "%-8s %16d %16d %7.2f %16.1f %16.1f %14d %14d\n", f, bc, oc, bc / oc, bm / 1024, om / 1024, fc, (oc - fc) * 1e6 / (1e6 - 1e4) }'
done
echo "(medians of $RUNS runs each; cpu = the bot's utime+stime from 开始 to the end report of a run of 10^6 lines;"
echo " fixed = the same for the run's first 10^4 lines: start, end report with its chart; per 10^6 = (cpu - fixed)"
echo " scaled to 10^6 lines, what each further 10^6 lines cost; goal <= 600 ms; baseline $BASE)"

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
n = 1000000
loss = [2.0 * 0.99999 ** i + random.random() * 0.1 for i in range(n)]
with open(d + "/kv.log", "w") as f:
    for i in range(n):
        f.write("step=%d loss=%.4f\n" % (i + 1, loss[i]))
with open(d + "/classic.log", "w") as f:
    for i in range(n):
        f.write("Epoch [%d/10], Step [%d/100000], Loss: %.4f\n" % (i // 100000 + 1, i % 100000 + 1, loss[i]))
with open(d + "/tqdm.log", "w") as f:
    for i in range(n):
        pct = (i + 1) * 100 // n
        bar = "\u2588" * (pct // 10) + " " * (10 - pct // 10)
        f.write("\rtrain: %3d%%|%s| %d/%d [00:10<00:00, 99999.00it/s, loss=%.4f]" % (pct, bar, i + 1, n, loss[i]))
    f.write("\n")
PY

# One run: prints "cpu_ms hwm_kb" of the bot ($1) ingesting format $2.
ingest() {
	local exe="$1" fmt="$2" d="$tmp/run"
	rm -rf "$d"
	mkdir -p "$d"
	cat >"$d/cfg.toml" <<EOF
data_dir = "$d/data"
[[jobs]]
name = "$fmt"
command = ["cat", "$tmp/$fmt.log"]
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

printf '%-8s %18s %18s %8s %16s %16s\n' "format" "baseline cpu ms" "trainbot cpu ms" "ratio" "baseline HWM MB" "trainbot HWM MB"
for fmt in $FORMATS; do
	: >"$tmp/ours"
	: >"$tmp/theirs"
	for _ in $(seq "$RUNS"); do
		ingest "$tmp/trainbot-base" "$fmt" >>"$tmp/theirs"
		ingest "$tmp/trainbot" "$fmt" >>"$tmp/ours"
	done
	bc="$(cut -d' ' -f1 "$tmp/theirs" | median)"
	oc="$(cut -d' ' -f1 "$tmp/ours" | median)"
	bm="$(cut -d' ' -f2 "$tmp/theirs" | median)"
	om="$(cut -d' ' -f2 "$tmp/ours" | median)"
	awk -v f="$fmt" -v bc="$bc" -v oc="$oc" -v bm="$bm" -v om="$om" \
		'BEGIN { printf "%-8s %18d %18d %8.2f %16.1f %16.1f\n", f, bc, oc, bc / oc, bm / 1024, om / 1024 }'
done
echo "(medians of $RUNS runs each; cpu = the bot's utime+stime for 10^6 lines, goal <= 600 ms; baseline $BASE)"

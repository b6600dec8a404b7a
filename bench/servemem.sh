#!/usr/bin/env bash
# Memory of serve over a long history (#16 goal 4): a history of RUNS runs
# of STEPS steps each, stored as the recorder's thinning keeps them
# (bench/histgen), served by `trainbot serve` of this tree and of a
# baseline commit (BASE, default the commit before the #16 work) against
# a fake Telegram Bot API (bench/servemem); each answers 历史, 画图 (the
# latest run), 画图 1 and 对比 of the three latest runs. Prints each
# answer's time and resident memory, and the peak RSS (VmHWM) of each
# and their ratio. The two serves run one after the other, each on its
# own copy of the history.
#
#   bench/servemem.sh                          # 100 runs x 10⁶ steps (~30 s to generate, 180 MB)
#   RUNS=20 STEPS=100000 bench/servemem.sh     # a quick one
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-100}"
STEPS="${STEPS:-1000000}"
BASE="${BASE:-2010df7}"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/histgen" ./bench/histgen
go build -o "$tmp/servemem" ./bench/servemem
go build -o "$tmp/trainbot" ./cmd/trainbot
mkdir "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go build -o "$tmp/trainbot-base" ./cmd/trainbot)
echo "generating $RUNS runs x $STEPS steps ..."
"$tmp/histgen" -data "$tmp/data" -runs "$RUNS" -steps "$STEPS"
echo "history: $(du -m "$tmp/data/trainbot.db" | cut -f1) MB"

echo
echo "baseline ($BASE):"
"$tmp/servemem" -trainbot "$tmp/trainbot-base" -data "$tmp/data" -runs "$RUNS" | tee "$tmp/base.out"
echo
echo "trainbot (this tree):"
"$tmp/servemem" -trainbot "$tmp/trainbot" -data "$tmp/data" -runs "$RUNS" | tee "$tmp/ours.out"
b="$(awk '/^peak RSS/ { print $3 }' "$tmp/base.out")"
o="$(awk '/^peak RSS/ { print $3 }' "$tmp/ours.out")"
awk -v b="$b" -v o="$o" 'BEGIN { printf "\npeak RSS: baseline %.1f MB, trainbot %.1f MB, ratio %.2fx (goal: <= 150 MB)\n", b, o, b / o }'

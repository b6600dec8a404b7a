#!/usr/bin/env bash
# Charts of long runs (#16 goal 3): a run of 10⁷ steps, stored as the
# recorder's thinning keeps it (bench/histgen: a loss at every step with
# two NaN, a val_loss every 1,000 steps, memory every 2 s), drawn by
# `trainbot plot` of this tree and of a baseline commit (BASE, default the
# commit before the #16 chart work), alternately, RUNS times each; prints
# the medians of wall time and peak RSS and the ratios. Then the read of
# one chart's points, in process (go test -bench of the store's read
# path), and Python's sqlite3 reading the same rows as a reference.
#
#   bench/longplot.sh                 # 10⁷ steps, 7 runs each
#   STEPS=1000000 RUNS=9 bench/longplot.sh
#   BASE=main bench/longplot.sh       # against another commit
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS="${STEPS:-10000000}"
RUNS="${RUNS:-7}"
BASE="${BASE:-2010df7}"
PY="${PYTHON:-python3}"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/histgen" ./bench/histgen
go build -o "$tmp/trainbot" ./cmd/trainbot
mkdir "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go build -o "$tmp/trainbot-base" ./cmd/trainbot)
"$tmp/histgen" -data "$tmp/data" -runs 1 -steps "$STEPS"

# One timed plot: prints "wall_ms rss_kb".
plot() {
	/usr/bin/time -f '%e %M' -o "$tmp/t" "$1" plot 1 --data "$tmp/data" -o "$tmp/$2.png" >/dev/null
	awk '{ printf "%.0f %d\n", $1 * 1000, $2 }' "$tmp/t"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

plot "$tmp/trainbot" warm >/dev/null
plot "$tmp/trainbot-base" warm >/dev/null
: >"$tmp/ours"
: >"$tmp/theirs"
for _ in $(seq "$RUNS"); do
	plot "$tmp/trainbot" ours >>"$tmp/ours"
	plot "$tmp/trainbot-base" base >>"$tmp/theirs"
done
ow="$(cut -d' ' -f1 "$tmp/ours" | median)"
om="$(cut -d' ' -f2 "$tmp/ours" | median)"
bw="$(cut -d' ' -f1 "$tmp/theirs" | median)"
bm="$(cut -d' ' -f2 "$tmp/theirs" | median)"
same="differ"
if cmp -s "$tmp/ours.png" "$tmp/base.png"; then same="are byte-identical"; fi
points="$("$tmp/trainbot" plot 1 --data "$tmp/data" -o "$tmp/ours.png" | sed 's/.*· \([0-9]* points\).*/\1/')"

printf '\ntrainbot plot of a %s-step run (%s stored), medians of %d:\n' "$STEPS" "$points" "$RUNS"
printf '  %-26s %8s %10s\n' "" "wall ms" "peak RSS"
printf '  %-26s %8s %7s MB\n' "baseline ($BASE)" "$bw" "$((bm / 1024))"
printf '  %-26s %8s %7s MB\n' "trainbot (this tree)" "$ow" "$((om / 1024))"
awk -v a="$bw" -v b="$ow" -v c="$bm" -v d="$om" 'BEGIN { printf "  ratio baseline/trainbot: %.2fx wall, %.2fx RSS (goal: <= 300 ms)\n", a / b, c / d }'
echo "  the two charts $same"

printf '\nreading one chart'"'"'s points in process (go test -bench, store read path):\n'
go test -run '^$' -bench 'Long$' -benchtime 20x -count 3 ./store | awk '
	/^Benchmark/ { n[$1]++; s[$1] += $3 }
	END { for (k in n) printf "  %-28s %6.1f ms (mean of %d)\n", k, s[k] / n[k] / 1e6, n[k] }' | sort
"$PY" - "$tmp/data/trainbot.db" <<'PYEOF'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
best = None
for _ in range(5):
    t = time.perf_counter()
    n = 0
    for name in ("loss", "val_loss"):
        rows = db.execute("SELECT step, epoch, value, t FROM metrics WHERE run_id = 1 AND name_id = "
                          "(SELECT id FROM metric_names WHERE name = ?) ORDER BY step, seq", (name,)).fetchall()
        n += len(rows)
    d = (time.perf_counter() - t) * 1000
    best = d if best is None else min(best, d)
print("  Python sqlite3 (C), the same %d rows of loss and val_loss: %.1f ms (best of 5)" % (n, best))
PYEOF

#!/usr/bin/env bash
# Draw the same noisy loss series (1e3, 1e5 and 1e6 points, raw and
# smoothed, 1280x800 PNG) with trainbot and with matplotlib in one run, and
# print the times and the ratio.
#
#   bench/plots.sh                 # 1000 100000 1000000 points
#   bench/plots.sh 1000000         # just a million
#   RUNS=9 bench/plots.sh          # more repetitions (median reported)
#
# Needs Go and Debian's python3-matplotlib (it uses /usr/bin/python3, not a
# pyenv or venv python). Timings on a loaded machine vary: the CPU columns
# (user+system time per chart) are steadier than wall time.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-/usr/bin/python3}"
RUNS="${RUNS:-5}"
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then sizes=(1000 100000 1000000); fi

if ! "$PY" -c 'import matplotlib, numpy' 2>/dev/null; then
	echo "bench/plots.sh: $PY has no matplotlib: apt install python3-matplotlib" >&2
	exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/plotbench" ./bench/plotbench

printf '%-9s  %-24s  %-10s  %-24s  %s\n' "points" "trainbot ms (CPU ms)" "MB alloc" "matplotlib ms (CPU ms)" "matplotlib/trainbot"
for n in "${sizes[@]}"; do
	read -r _ _ tw tc tmb < <("$tmp/plotbench" -n "$n" -runs "$RUNS" -data "$tmp/series.bin" -o "$tmp/trainbot-$n.png")
	read -r _ _ mw mc < <("$PY" bench/plots_matplotlib.py "$tmp/series.bin" "$(( RUNS < 3 ? RUNS : 3 ))")
	ratio="$(awk -v a="$mw" -v b="$tw" -v c="$mc" -v d="$tc" 'BEGIN { printf "%.1fx wall, %.1fx CPU", a/b, c/d }')"
	printf '%-9s  %-24s  %-10s  %-24s  %s\n' "$n" "$tw ($tc)" "$tmb" "$mw ($mc)" "$ratio"
done

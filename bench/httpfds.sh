#!/usr/bin/env bash
# Idle keep-alives against `trainbot serve` with [http] listen (#28): CONNS
# (default 20,000) connections to /healthz, each served once and left
# idle, from helper processes; trainbot's descriptors before, at the peak
# and while they are held, whether a scrape and a 开始 still work, and how
# much trainbot logged. For this tree and for a baseline commit (BASE,
# default the commit before the #28 HTTP work), one after the other, each
# under this shell's open-file limit (ulimit -n; the finding had 20,000).
#
#   bench/httpfds.sh
#   CONNS=5000 bench/httpfds.sh
#   SILENT=1 bench/httpfds.sh    # connections that send nothing instead
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS="${CONNS:-20000}"
BASE="${BASE:-396126a}"
silent=false; [ -n "${SILENT:-}" ] && silent=true
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/httpfds" ./bench/httpfds
go build -o "$tmp/trainbot" ./cmd/trainbot
mkdir "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go build -o "$tmp/trainbot-base" ./cmd/trainbot)
echo "open-file limit: $(ulimit -n); connections: $CONNS"
echo
echo "baseline ($BASE):"
"$tmp/httpfds" -trainbot "$tmp/trainbot-base" -conns "$CONNS" -silent="$silent"
echo
echo "trainbot (this tree):"
"$tmp/httpfds" -trainbot "$tmp/trainbot" -conns "$CONNS" -silent="$silent"

#!/usr/bin/env bash
# Many live runs at once (#35 goal 4): `trainbot serve` of this tree with
# RUNS jobs started together, each printing RATE `step=N loss=X` lines a
# second for SECS seconds, asked 状态 five times a second (from ten users in
# turn: Telegram paces a chat at about a message a second) against a fake
# Telegram Bot API (bench/manyruns). Prints 状态's latency (p50, p99, max)
# against the same serve idle (the baseline, measured first in the same
# run), the lag of the steps 状态 shows behind what the children printed,
# serve's memory and its CPU time per line.
#
#   bench/manyruns.sh                            # 10 runs x 10⁴ lines/s for a minute
#   RUNS=3 RATE=1000 SECS=15 bench/manyruns.sh   # a quick one
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/manyruns" ./bench/manyruns
go build -o "$tmp/trainbot" ./cmd/trainbot
"$tmp/manyruns" -trainbot "$tmp/trainbot" -runs "${RUNS:-10}" -rate "${RATE:-10000}" -secs "${SECS:-60}"

#!/bin/sh
# Makes the README's pictures from a real demo session: chat.svg (the chat
# on a phone, drawn from the terminal chat's transcript and the run's stored
# loss points) and loss.png (the chart trainbot sent at the end of the run).
# Run from the repository's root: docs/img/make.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/trainbot" ./cmd/trainbot
# Typed like a person would: 状态 once the run has printed a while, 画图, and
# 停止 before the end (the demo's 1500 steps take about 30 s).
(echo 开始; sleep 6; echo 状态; sleep 1; echo 画图; sleep 3; echo 停止) |
	HOME="$tmp" "$tmp/trainbot" demo --data "$tmp/data" >"$tmp/transcript.txt" 2>&1
"$tmp/trainbot" points 1 --data "$tmp/data" --metric loss --csv >"$tmp/loss.csv"
"$tmp/trainbot" plot 1 --data "$tmp/data" -o docs/img/loss.png
python3 docs/img/chatsvg.py "$tmp/transcript.txt" "$tmp/loss.csv" >docs/img/chat.svg
echo "wrote docs/img/chat.svg and docs/img/loss.png"

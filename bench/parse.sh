#!/usr/bin/env bash
# `trainbot parse --json` against the Python loop of issue #16 on the same
# 1e6-line classic log ("Epoch [e/10], Step [s/100000], Loss: x"), whole
# processes, in pairs (each pair runs both back to back, so a busy machine
# slows both alike). Prints the medians and the ratio; checks that both
# printed the same points.
#   bench/parse.sh            # 5 pairs
#   RUNS=9 bench/parse.sh
#   TRAINBOT=/path/to/old/trainbot bench/parse.sh   # another build (before and after)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "${TRAINBOT:-}" ]; then cp "$TRAINBOT" "$tmp/trainbot"; else go build -o "$tmp/trainbot" ./cmd/trainbot; fi
"$PY" - "$tmp/classic.log" <<'PY'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for i in range(1000000):
        f.write("Epoch [%d/10], Step [%d/100000], Loss: %.4f\n" % (i // 100000 + 1, i % 100000 + 1, 2.0 * 0.99999 ** i + random.random() * 0.1))
PY
cat > "$tmp/loop.py" <<'PY'
import re, sys, json
pat = re.compile(r"Epoch \[(\d+)/(\d+)\], Step \[(\d+)/(\d+)\], Loss: ([0-9.eE+-]+)")
for line in open(sys.argv[1]):
    m = pat.search(line)
    if m:
        e, E, s, S, v = m.groups()
        sys.stdout.write(json.dumps({"step": (int(e)-1)*int(S)+int(s), "epoch": int(e),
                                     "name": "loss", "value": float(v)}) + "\n")
PY
ms() { local s e; s=$(date +%s%N); "$@"; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
for i in $(seq "${RUNS:-5}"); do
	py=$(ms sh -c "'$PY' '$tmp/loop.py' '$tmp/classic.log' > '$tmp/py.out'")
	tb=$(ms sh -c "'$tmp/trainbot' parse --json '$tmp/classic.log' > '$tmp/tb.out'")
	echo "$py $tb"
done > "$tmp/times"
# The same points: compare step, name and value (Python writes "value": 2.0134
# with spaces; the epoch is an int there and a number here).
"$PY" - "$tmp/py.out" "$tmp/tb.out" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 1000000, (len(a), len(b))
for x, y in zip(a, b):
    assert (x["step"], x["name"], x["value"], x["epoch"]) == (y["step"], y["name"], y["value"], y["epoch"]), (x, y)
print("both printed the same 1,000,000 points")
PY
sort -n -k1 "$tmp/times" | awk '{py[NR]=$1} END {print py[int((NR+1)/2)]}' > "$tmp/py.med"
sort -n -k2 "$tmp/times" | awk '{tb[NR]=$2} END {print tb[int((NR+1)/2)]}' > "$tmp/tb.med"
awk 'BEGIN {printf "pairs (python ms/trainbot ms):"} {printf " %s/%s", $1, $2} END {print ""}' "$tmp/times"
awk -v py="$(cat "$tmp/py.med")" -v tb="$(cat "$tmp/tb.med")" 'BEGIN {
	printf "python loop %d ms, trainbot parse --json %d ms (medians): trainbot is %.1fx faster\n", py, tb, py / tb }'

#!/usr/bin/env bash
# A frozen disk under a running training: the data directory lives on a
# loop-mounted ext4 that is frozen (fsfreeze) for FREEZE seconds while a
# child prints about 9,000 lines a second. Prints the child's largest gap
# between two prints (measured by the child itself, written outside the
# frozen filesystem), beside its median gap, and how the run ended.
# Needs root, a loop device and fsfreeze (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
freeze="${FREEZE:-10}"
work="$(mktemp -d)"
mnt="$work/mnt"
cleanup() {
	fsfreeze -u "$mnt" 2>/dev/null || true
	umount "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/trainbot" ./cmd/trainbot
truncate -s 400M "$work/fs.img"
mkfs.ext4 -q -F "$work/fs.img"
mkdir -p "$mnt"
if ! mount -o loop "$work/fs.img" "$mnt"; then
	echo "freeze.sh: cannot loop-mount an ext4 image here (needs root and /dev/loop*)" >&2
	exit 1
fi
cat >"$work/child.py" <<PY
import sys, time
n, gaps, last = 0, [], time.monotonic()
end = last + $freeze + 10
while time.monotonic() < end:
    n += 1
    sys.stdout.write("step=%d loss=%.6f\n" % (n, 1.0 / n))
    sys.stdout.flush()
    now = time.monotonic()
    gaps.append(now - last)
    last = now
    time.sleep(0.0001)
gaps.sort()
with open("$work/gaps.txt", "w") as f:
    f.write("%d %.6f %.6f\n" % (n, gaps[len(gaps) // 2], gaps[-1]))
PY
cat >"$work/cfg.toml" <<TOML
data_dir = "$mnt/data"
[[jobs]]
name = "printer"
command = ["python3", "$work/child.py"]
TOML
( echo "开始"; sleep $((freeze + 25)) ) | "$work/trainbot" console --config "$work/cfg.toml" >"$work/console.txt" 2>&1 &
bot=$!
sleep 3
echo "freezing $mnt for ${freeze}s"
fsfreeze -f "$mnt"
sleep "$freeze"
fsfreeze -u "$mnt"
echo "thawed"
for _ in $(seq 1 120); do [ -s "$work/gaps.txt" ] && break; sleep 0.5; done
wait "$bot" || true
read -r lines median maxgap <"$work/gaps.txt"
printf 'child printed %d lines; median gap %.3f ms, largest gap %.3f ms, with the data directory frozen for %ss\n' \
	"$lines" "$(echo "$median*1000" | bc -l)" "$(echo "$maxgap*1000" | bc -l)" "$freeze"
"$work/trainbot" runs show 1 --data "$mnt/data" | head -3

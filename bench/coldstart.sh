#!/usr/bin/env bash
# A newcomer's cold start (#35 goal 5): `go build ./cmd/trainbot` with an
# empty build cache (modules already downloaded), against the same cold
# build of a program of the standard library alone (net/http, encoding/json,
# crypto/tls: the part of the build nobody can cut); then `trainbot demo`
# from exec to its greeting, warm, against `trainbot version` (the cost of
# starting the binary at all). Medians of RUNS (default 5) for the demo;
# the builds run BUILDS times (default 1: each takes a minute or more).
#
#   bench/coldstart.sh
#   BUILDS=3 bench/coldstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go mod download
mkdir -p "$tmp/std"
cat > "$tmp/std/main.go" <<'GO'
package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
)

func main() { fmt.Println(json.Valid(nil), http.StatusOK, tls.VersionTLS13) }
GO
(cd "$tmp/std" && go mod init stdonly >/dev/null 2>&1)
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
for i in $(seq "${BUILDS:-1}"); do
	rm -rf "$tmp/cache-std" "$tmp/cache-tb"
	s=$(cd "$tmp/std" && GOCACHE="$tmp/cache-std" secs go build -o "$tmp/stdonly" .)
	b=$(GOCACHE="$tmp/cache-tb" secs go build -o "$tmp/trainbot" ./cmd/trainbot)
	echo "cold build: standard library program ${s}s, trainbot ${b}s, ratio $(echo "scale=2; $b / $s" | bc)x (goal: trainbot <= 60 s)"
done
n=0
greet() { # ms from exec to the first line of the demo (its greeting)
	local t0 t1
	n=$((n + 1))
	t0=$(date +%s%N)
	{ read -r _; t1=$(date +%s%N); } < <("$tmp/trainbot" demo --data "$tmp/data$n" </dev/null 2>/dev/null)
	echo $(((t1 - t0) / 1000000))
}
ver() {
	local t0 t1
	t0=$(date +%s%N)
	"$tmp/trainbot" version >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
greet >/dev/null; ver >/dev/null # warm
g=(); v=()
for i in $(seq "${RUNS:-5}"); do g+=("$(greet)"); v+=("$(ver)"); done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "demo to its greeting, warm: median $(med "${g[@]}") ms of ${g[*]} (trainbot version: median $(med "${v[@]}") ms) (goal: <= 150 ms)"

#!/usr/bin/env bash
# Cost of one GPU telemetry sample, as the issue asks: one NVML sample of a
# mock DGX A100 (8 GPUs; the Go side, the mock answers at once), one procfs
# sample for a run with a 50-process tree (a /proc scan of the whole host
# plus the tree sum), and, on a machine with a driver, one real NVML sample.
# Each is printed with its share of the default 2 s interval and against a
# baseline measured in the same run: reading one /proc/PID/stat.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(go test -run '^$' -bench 'NVMLSample|ProcTree50|ProcStatBaseline' -benchtime "${BENCHTIME:-2s}" -count 1 ./gpu/ ./internal/procfs/ 2>/dev/null)"
echo "$out" | grep -E '^(Benchmark|goos|goarch|cpu)' || true
echo "$out" | awk '
	/^BenchmarkProcStatBaseline/ { base = $3 }
	/^Benchmark/ { name[$1] = $3; for (i = 4; i < NF; i++) if ($(i+1) == "procs_scanned") scanned[$1] = $i }
	END {
		if (!base) { print "no baseline measured"; exit 1 }
		printf "\n%-34s %12s %14s %16s\n", "sample", "µs/sample", "% of 2 s", "× one stat read"
		for (n in name) {
			if (n ~ /Baseline/) continue
			extra = (n in scanned) ? sprintf("  (%d processes scanned)", scanned[n]) : ""
			printf "%-34s %12.1f %14.4f %16.1f%s\n", n, name[n] / 1000, name[n] / 2e9 * 100, name[n] / base, extra
		}
		printf "%-34s %12.1f\n", "baseline: one /proc/PID/stat read", base / 1000
	}'

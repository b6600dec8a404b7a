package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manyJobsConfig writes a config of n jobs, each with a description, an
// environment, a lock, a pattern and two declared parameters, to a file in
// dir; with faulty, every job also has a value that cannot be decoded
// (nan_after = "x") and one Validate refuses (max_queue = -1).
func manyJobsConfig(tb testing.TB, dir string, n int, faulty bool) string {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\n", filepath.Join(dir, "data"))
	for i := range n {
		fmt.Fprintf(&b, `[[jobs]]
name = "job%d"
description = "job number %d"
command = ["python3", "train.py", "--batch-size", "{batch_size}", "--lr", "{lr}"]
env = { CUDA_VISIBLE_DEVICES = "%d" }
lock = "gpu%d"
patterns = ['(?P<step>\d+) updates \| loss (?P<loss>\S+)']
`, i, i, i%8, i%8)
		if faulty {
			b.WriteString("nan_after = \"x\"\nmax_queue = -1\n")
		}
		b.WriteString(`[jobs.params.batch_size]
type = "int"
default = 64
min = 1
max = 4096
[jobs.params.lr]
type = "float"
default = 1e-3
`)
	}
	path := filepath.Join(dir, fmt.Sprintf("jobs%d.toml", n))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkCheck is `trainbot check` of a config of 1,000 and of 10,000
// jobs, valid or with two errors in each job: the time per job should not
// grow with the jobs (bench/check.sh prints the ratio). It was quadratic:
// the line of each key was found by counting lines from the start of the
// file, and each job and each error was checked against every error.
func BenchmarkCheck(b *testing.B) {
	for _, faulty := range []bool{false, true} {
		for _, n := range []int{1000, 10000} {
			name := fmt.Sprintf("jobs=%d", n)
			if faulty {
				name += "/faulty"
			}
			b.Run(name, func(b *testing.B) {
				path := manyJobsConfig(b, b.TempDir(), n, faulty)
				e := env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, environ: []string{"HOME=" + b.TempDir()}}
				want := exitOK
				if faulty {
					want = exitFail
				}
				for b.Loop() {
					if code := run(context.Background(), []string{"check", "--config", path}, e); code != want {
						b.Fatalf("check exited %d, want %d", code, want)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/job")
			})
		}
	}
}

package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// bucketStats is, per bucket of width ms, the first and last time and the
// extremes of a column (NULLs left out).
func bucketStats(t *testing.T, s *Store, width int64, query string, args ...any) map[int64][4]int64 {
	t.Helper()
	rows, err := s.r.Query(`SELECT t / `+fmt.Sprint(width)+` AS b, min(t), max(t), min(v), max(v) FROM (`+query+`) GROUP BY b`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64][4]int64{}
	for rows.Next() {
		var b int64
		var st [4]sql.NullInt64
		if err := rows.Scan(&b, &st[0], &st[1], &st[2], &st[3]); err != nil {
			t.Fatal(err)
		}
		out[b] = [4]int64{st[0].Int64, st[1].Int64, st[2].Int64, st[3].Int64}
	}
	return out
}

func countRows(t *testing.T, s *Store, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.r.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sampleBuckets cuts time series into at most 100 buckets in these tests
// (10,000 by default): the rule is the same, the tables 100 times smaller.
const sampleBuckets = 100

func openSamples(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{SampleBuckets: sampleBuckets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A device's samples are thinned on their time axis once there are more
// than 5 per bucket: the rows of the table count, read the first time the
// process sees the device.
func TestDeviceSamplesThinned(t *testing.T) {
	ctx := context.Background()
	s := openSamples(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 5*sampleBuckets + 50
	// A sample a second, written by an earlier process.
	if _, err := s.w.Exec(`WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
		INSERT INTO device_samples(t, device, mem_used, mem_total) SELECT ? + x * 1000, 0, (x * 7919) % 1000003, 2000000 FROM i`, n-1, ms(base)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDeviceSamples(ctx, []history.DeviceSample{{T: base.Add(-time.Hour), Device: 1, MemUsed: 5}}); err != nil {
		t.Fatal(err)
	}
	last := base.Add(n * time.Second)
	width := trainer.BucketWidth(ms(last)-ms(base), sampleBuckets)
	perDevice := `SELECT t, mem_used AS v FROM device_samples WHERE device = ?`
	want := bucketStats(t, s, width, perDevice, 0)
	if err := s.AddDeviceSamples(ctx, []history.DeviceSample{{T: last, Device: 0, MemUsed: 3}, {T: last, Device: 1, MemUsed: 5}}); err != nil {
		t.Fatal(err)
	}
	want[ms(last)/width] = [4]int64{ms(last), ms(last), 3, 3}
	got := bucketStats(t, s, width, perDevice, 0)
	if len(got) != len(want) {
		t.Fatalf("%d buckets after thinning, want %d", len(got), len(want))
	}
	for b, w := range want {
		if g := got[b]; g != w {
			t.Fatalf("bucket %d: first, last, min, max %v, want %v", b, g, w)
		}
	}
	rows := countRows(t, s, `SELECT count(*) FROM device_samples WHERE device = 0`)
	if rows > 4*int64(len(want)) || len(want) < sampleBuckets/5 {
		t.Errorf("%d rows in %d buckets of %d ms, want at most 4 a bucket and %d buckets or more", rows, len(want), width, sampleBuckets/5)
	}
	if c := countRows(t, s, `SELECT count(*) FROM device_samples WHERE device = 1`); c != 2 {
		t.Errorf("device 1 has %d rows, want 2", c)
	}
	t.Logf("%d samples: %d rows in %d buckets of %d ms", n+1, rows, len(want), width)
}

// A run's memory samples keep the extremes of GPU and of host memory.
func TestRunMemoryThinned(t *testing.T) {
	ctx := context.Background()
	s := openSamples(t)
	run := newRun(t, s)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 7*sampleBuckets + 50
	// GPU memory is unknown in one sample of 13.
	if _, err := s.w.Exec(`WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
		INSERT INTO run_memory(run_id, t, gpu_bytes, host_bytes) SELECT ?, ? + x * 1000,
			CASE WHEN x % 13 = 0 THEN NULL ELSE (x * 7919) % 1000003 END, (x * 104729) % 999983 FROM i`, n-1, run, ms(base)); err != nil {
		t.Fatal(err)
	}
	last := base.Add(n * time.Second)
	width := trainer.BucketWidth(ms(last)-ms(base), sampleBuckets)
	gpu := `SELECT t, gpu_bytes AS v FROM run_memory WHERE run_id = ?`
	host := `SELECT t, host_bytes AS v FROM run_memory WHERE run_id = ?`
	wantGPU, wantHost := bucketStats(t, s, width, gpu, run), bucketStats(t, s, width, host, run)
	g, h := int64(7), int64(8)
	if err := s.AddRunMemory(ctx, []history.RunMemory{{RunID: run, T: last, GPUBytes: &g, HostBytes: &h}}); err != nil {
		t.Fatal(err)
	}
	wantGPU[ms(last)/width] = [4]int64{ms(last), ms(last), g, g}
	wantHost[ms(last)/width] = [4]int64{ms(last), ms(last), h, h}
	gotGPU, gotHost := bucketStats(t, s, width, gpu, run), bucketStats(t, s, width, host, run)
	for b, w := range wantGPU {
		if gotGPU[b] != w || gotHost[b] != wantHost[b] {
			t.Fatalf("bucket %d: GPU %v, host %v; want %v and %v", b, gotGPU[b], gotHost[b], w, wantHost[b])
		}
	}
	rows := countRows(t, s, `SELECT count(*) FROM run_memory WHERE run_id = ?`, run)
	if rows > 6*int64(len(wantGPU)) || rows >= n {
		t.Errorf("%d rows in %d buckets, want at most 6 a bucket", rows, len(wantGPU))
	}
	t.Logf("%d samples: %d rows in %d buckets of %d ms", n+1, rows, len(wantGPU), width)
}

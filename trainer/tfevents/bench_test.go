package tfevents

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadScalars reads an event file of 100,000 scalar records
// (SummaryWriter.add_scalar's), reporting records per second.
func BenchmarkReadScalars(b *testing.B) {
	dir := b.TempDir()
	var buf []byte
	for step := range int64(100_000) {
		buf = AppendRecord(buf, testEvent(t0+float64(step), step, simpleValue("loss", float32(step))))
	}
	if err := os.WriteFile(filepath.Join(dir, "events.out.tfevents.1.h.1.0"), buf, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for b.Loop() {
		d := NewDir(dir, nil, nil)
		n := 0
		for d.Poll(4<<20, func(r DirRecord) { n += len(r.Scalars) }) > 0 {
		}
		if n != 100_000 {
			b.Fatalf("%d scalars", n)
		}
	}
	b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "records/s")
}

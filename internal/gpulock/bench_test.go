package gpulock

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// eightGPUs is a lock directory of 8 GPUs as a busy host has it: 4 held
// (by this process, through files it keeps open), 2 free but naming a
// process that lives (this one: orphans, told by reading /proc), 2 free
// and naming no process.
func eightGPUs(b *testing.B) *Dir {
	b.Helper()
	d, err := Open(filepath.Join(b.TempDir(), "locks"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		h := Holder{Run: int64(i), Job: "train", User: "alice", UID: 1000, DataDir: "/home/alice/.trainbot"}
		if i >= 4 && i < 6 {
			h.PID = os.Getpid()
		}
		f, err := d.TryLock(fmt.Sprintf("GPU-%08x-0000-0000-0000-000000000000", i), h)
		if err != nil {
			b.Fatal(err)
		}
		if i < 4 {
			b.Cleanup(func() { f.Close() })
		} else {
			f.Close()
		}
	}
	return d
}

// BenchmarkHolders is one look at 8 GPUs' locks, what a trainbot waiting
// for GPUs does once a second.
func BenchmarkHolders(b *testing.B) {
	d := eightGPUs(b)
	b.ResetTimer()
	for b.Loop() {
		hs, err := d.Holders()
		if err != nil || len(hs) != 8 {
			b.Fatal(len(hs), err)
		}
	}
}

// BenchmarkOpenCloseBaseline is the least a look at 8 lock files costs:
// listing the directory, opening and closing each file.
func BenchmarkOpenCloseBaseline(b *testing.B) {
	d := eightGPUs(b)
	b.ResetTimer()
	for b.Loop() {
		ents, err := os.ReadDir(d.Path())
		if err != nil || len(ents) != 8 {
			b.Fatal(len(ents), err)
		}
		for _, e := range ents {
			f, err := os.Open(filepath.Join(d.Path(), e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
}

// BenchmarkTryLockFree is TryLock and Close of a free GPU's existing lock
// file.
func BenchmarkTryLockFree(b *testing.B) {
	d := eightGPUs(b)
	b.ResetTimer()
	for b.Loop() {
		f, err := d.TryLock("GPU-00000007-0000-0000-0000-000000000000", Holder{Run: 1})
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

package store

import (
	"testing"
	"time"
)

// A full queue drops what comes: a burst's chunk does not grow its array
// past MaxPending for points it will not keep (the bound is memory's).
func TestAFullQueueDoesNotGrowItsArray(t *testing.T) {
	const maxPending = 1000
	s, err := Open(t.TempDir(), Options{FlushEvery: time.Hour, MaxPending: maxPending})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		s.AddPoints(1, points(i*300, 300))
	}
	s.pmu.Lock()
	n, c := len(s.pending), cap(s.pending)
	s.pmu.Unlock()
	if n != maxPending || s.DroppedPoints() != 500 {
		t.Fatalf("%d queued, %d dropped; want %d and 500", n, s.DroppedPoints(), maxPending)
	}
	if c > maxPending {
		t.Errorf("queue array of %d entries for a MaxPending of %d: a full queue's burst chunk grew it", c, maxPending)
	}
}

// After a burst is written and nothing more comes, the writer's idle ticks
// let the queue's arrays go (an idle bot holds no batch-sized array).
func TestAnIdleQueueLetsItsArraysGo(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FlushEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.pmu.Lock()
	s.batchSize = 400
	s.pmu.Unlock()
	s.AddPoints(1, points(0, 300))
	s.AddPoints(1, points(300, 300))
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.pmu.Lock()
		n, c, sp := len(s.pending), cap(s.pending), cap(s.spare)
		s.pmu.Unlock()
		if n == 0 && c == 0 && sp == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle for 5 s with %d queued: the queue holds arrays of %d and %d entries (batch size 400)", n, c, sp)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := s.Series(t.Context(), 1, "loss"); err != nil || len(got) == 0 {
		t.Fatalf("after the burst: %d points stored, err %v", len(got), err)
	}
}

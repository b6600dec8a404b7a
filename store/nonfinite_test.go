package store

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// TestOldNonFiniteThinnedOnce: a database of an earlier version, whose
// diverged run stored every NaN, gets them thinned in the background at the
// next Open of the bot (ThinEarlierRuns), once, by the recorder's rule;
// finite points and a metric with few NaN are left as they were.
func TestOldNonFiniteThinnedOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{FlushEvery: time.Hour, ThinEarlierRuns: true})
	if err != nil {
		t.Fatal(err)
	}
	waitThinned(t, s) // the pass of a new database
	run := newRun(t, s)
	const steps = 30_000 // width 10
	var loss, acc []logparse.Point
	for i := range int64(steps) {
		v := noise(i)
		switch {
		case i >= steps/2 && i%13 == 0:
			v = math.Inf(-1)
		case i >= steps/2:
			v = math.NaN()
		}
		loss = append(loss, logparse.Point{Step: i, Epoch: math.NaN(), Name: "loss", Value: v})
		if i%100 == 0 {
			acc = append(acc, logparse.Point{Step: i, Epoch: math.NaN(), Name: "acc", Value: math.NaN()})
		}
	}
	s.AddPoints(run, timed(time.Now(), append(loss, acc...)...))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// As an earlier version left it: every point stored, never thinned.
	if _, err := s.w.Exec(`DELETE FROM kv WHERE key = ?`, nonFiniteThinnedKey); err != nil {
		t.Fatal(err)
	}
	if got := len(stored(t, s, run, "loss")); got != steps {
		t.Fatalf("stored %d points, want all %d", got, steps)
	}
	s.Close()

	// A short command leaves them to the bot.
	s = open(t, dir)
	if _, done, err := s.Get(ctx, nonFiniteThinnedKey); err != nil || done {
		t.Fatalf("thinned without ThinEarlierRuns (%v)", err)
	}
	if got := len(stored(t, s, run, "loss")); got != steps {
		t.Fatalf("without ThinEarlierRuns: %d points, want all %d", got, steps)
	}
	s.Close()

	s, err = Open(dir, Options{ThinEarlierRuns: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitThinned(t, s)
	width := trainer.BucketWidth(steps-1, trainer.MaxBuckets)
	var want []keyed
	for _, k := range thinned(loss, width) {
		if !math.IsNaN(k.v) && !math.IsInf(k.v, 0) {
			continue
		}
		want = append(want, k)
	}
	var got []keyed
	finite := 0
	for _, k := range stored(t, s, run, "loss") {
		if math.IsNaN(k.v) || math.IsInf(k.v, 0) {
			got = append(got, k)
		} else {
			finite++
		}
	}
	if !sameKeyed(got, want) {
		t.Fatalf("kept %d NaN/Inf points, want %d (width %d); first differences: %v", len(got), len(want), width, firstDiff(got, want))
	}
	if finite != steps/2 {
		t.Errorf("%d finite points left, want all %d", finite, steps/2)
	}
	if n := len(stored(t, s, run, "acc")); n != len(acc) {
		t.Errorf("acc (%d NaN, under the threshold) has %d points, want all", len(acc), n)
	}
}

// waitThinned waits up to a minute for the store's pass over earlier runs.
func waitThinned(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, done, err := s.Get(context.Background(), nonFiniteThinnedKey)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the NaN/Inf points of earlier runs were not thinned within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

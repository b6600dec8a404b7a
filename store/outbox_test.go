package store

import (
	"context"
	"testing"
	"time"
)

func TestOutboxQueue(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	add := func(chat int64, key string) {
		t.Helper()
		added, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: chat, Key: key, Payload: []byte(key)})
		if err != nil || !added {
			t.Fatalf("enqueue %d/%s: %v %v", chat, key, added, err)
		}
	}
	add(1, "a")
	add(1, "b")
	add(-100, "a") // same key, another chat
	if added, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: 1, Key: "a", Payload: []byte("dup")}); err != nil || added {
		t.Errorf("duplicate key: added %v, err %v", added, err)
	}
	if _, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: 1}); err == nil {
		t.Error("an item without a key should be refused")
	}

	due, err := s.DueOutbox(ctx, "telegram", now.Add(time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	// One per chat: the oldest.
	if len(due) != 2 || string(due[0].Payload) != "a" || due[0].Chat != 1 || due[1].Chat != -100 {
		t.Fatalf("due: %+v", due)
	}
	// Chat 1's first item fails: its second waits behind it.
	if err := s.MarkOutboxRetry(ctx, due[0].ID, now.Add(time.Minute), "429"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkOutboxSent(ctx, due[1].ID, now); err != nil {
		t.Fatal(err)
	}
	due, err = s.DueOutbox(ctx, "telegram", now.Add(time.Second), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due while chat 1 waits: %+v %v", due, err)
	}
	next, ok, err := s.NextOutboxAt(ctx, "telegram")
	if err != nil || !ok || next.UnixMilli() != now.Add(time.Minute).UnixMilli() {
		t.Errorf("next: %v %v %v", next, ok, err)
	}
	pending, err := s.PendingOutbox(ctx, "telegram")
	if err != nil || len(pending) != 2 || pending[0].Attempts != 1 || pending[0].LastError != "429" {
		t.Errorf("pending: %+v %v", pending, err)
	}
	due, err = s.DueOutbox(ctx, "telegram", now.Add(2*time.Minute), 10)
	if err != nil || len(due) != 1 || string(due[0].Payload) != "a" {
		t.Fatalf("due later: %+v %v", due, err)
	}

	// Delivered items are pruned; pending ones never are.
	if n, err := s.PruneOutbox(ctx, now.Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("pruned %d, %v; want 1", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pending, _ := s.PendingOutbox(ctx, ""); len(pending) != 2 {
		t.Errorf("after reopening: %d pending, want 2", len(pending))
	}
	if _, ok, err := s.NextOutboxAt(ctx, "other"); ok || err != nil {
		t.Errorf("another transport has nothing pending: %v %v", ok, err)
	}
}

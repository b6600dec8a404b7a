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
		id, added, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: chat, Key: key, Payload: []byte(key)})
		if err != nil || !added || id <= 0 {
			t.Fatalf("enqueue %d/%s: %d %v %v", chat, key, id, added, err)
		}
	}
	add(1, "a")
	add(1, "b")
	add(-100, "a") // same key, another chat
	if _, added, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: 1, Key: "a", Payload: []byte("dup")}); err != nil || added {
		t.Errorf("duplicate key: added %v, err %v", added, err)
	}
	if _, _, err := s.EnqueueOutbox(ctx, OutboxItem{Transport: "telegram", Chat: 1}); err == nil {
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

func TestOutboxHeldItemsHoldNothingBack(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	later := now.Add(time.Hour)
	// A warning held for quiet hours, then a critical alert that goes now.
	s.EnqueueOutbox(ctx, OutboxItem{Transport: "wecom:lab", Key: "warn", Payload: []byte("warn"), NotBefore: later})
	s.EnqueueOutbox(ctx, OutboxItem{Transport: "wecom:lab", Key: "crit", Payload: []byte("crit")})
	due, err := s.DueOutbox(ctx, "wecom:lab", now.Add(time.Second), 10)
	if err != nil || len(due) != 1 || due[0].Key != "crit" {
		t.Fatalf("due now: %+v %v, want only the critical alert", due, err)
	}
	if err := s.MarkOutboxFailed(ctx, due[0].ID, now, "errcode 93000: invalid webhook key"); err != nil {
		t.Fatal(err)
	}
	at, ok, err := s.NextOutboxAt(ctx, "wecom:lab")
	if err != nil || !ok || at.Sub(later).Abs() > time.Millisecond {
		t.Fatalf("next at %v %v %v, want the end of the hold", at, ok, err)
	}
	due, _ = s.DueOutbox(ctx, "wecom:lab", later.Add(time.Second), 10)
	if len(due) != 1 || due[0].Key != "warn" || due[0].NotBefore.IsZero() {
		t.Fatalf("due after the hold: %+v", due)
	}
	items, _ := s.OutboxItems(ctx, 10)
	for _, it := range items {
		if it.Key == "crit" && (!it.Failed || it.SentAt.IsZero() || it.LastError == "") {
			t.Fatalf("failed item %+v", it)
		}
	}
}

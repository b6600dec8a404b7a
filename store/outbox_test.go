package store

import (
	"context"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
)

func TestOutboxQueue(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	ids := map[string]int64{}
	add := func(chat int64, key string, notBefore time.Time) {
		t.Helper()
		id, added, err := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "telegram", Chat: chat, Key: key, Payload: []byte(key), NotBefore: notBefore})
		if err != nil || !added || id <= 0 {
			t.Fatalf("enqueue %d/%s: %d %v %v", chat, key, id, added, err)
		}
		ids[key] = id
	}
	add(1, "a", time.Time{})
	add(1, "b", now.Add(time.Hour))
	add(-100, "c", time.Time{})
	if _, added, err := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "telegram", Chat: 1, Key: "a", Payload: []byte("dup")}); err != nil || added {
		t.Errorf("duplicate key: added %v, err %v", added, err)
	}
	if _, _, err := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "telegram", Chat: 1}); err == nil {
		t.Error("an item without a key should be refused")
	}
	if err := s.MarkOutboxRetry(ctx, ids["a"], now.Add(time.Minute), "429"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkOutboxSent(ctx, ids["c"], now); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingOutbox(ctx, "telegram")
	if err != nil || len(pending) != 2 || pending[0].Key != "a" || pending[0].Attempts != 1 || pending[0].LastError != "429" ||
		pending[0].NextAt.UnixMilli() != now.Add(time.Minute).UnixMilli() || pending[1].NotBefore.UnixMilli() != now.Add(time.Hour).UnixMilli() {
		t.Errorf("pending: %+v %v", pending, err)
	}
	// A delivered item keeps its key, to be delivered once, not its payload.
	if _, added, _ := s.EnqueueOutbox(ctx, history.OutboxItem{Transport: "telegram", Chat: -100, Key: "c", Payload: []byte("again")}); added {
		t.Error("a delivered key was stored again")
	}
	items, _ := s.OutboxItems(ctx, 10)
	for _, it := range items {
		if it.Key == "c" && (len(it.Payload) != 0 || it.SentAt.IsZero()) {
			t.Errorf("delivered item %+v", it)
		}
	}
	if err := s.MarkOutboxFailed(ctx, ids["b"], now, "errcode 93000: invalid webhook key"); err != nil {
		t.Fatal(err)
	}
	items, _ = s.OutboxItems(ctx, 10)
	for _, it := range items {
		if it.Key == "b" && (!it.Failed || it.SentAt.IsZero() || it.LastError == "" || len(it.Payload) != 0) {
			t.Errorf("failed item %+v", it)
		}
	}

	// Delivered items are pruned; pending ones never are.
	if n, err := s.PruneOutbox(ctx, now.Add(time.Hour)); err != nil || n != 2 {
		t.Errorf("pruned %d, %v; want 2", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pending, _ := s.PendingOutbox(ctx, ""); len(pending) != 1 || string(pending[0].Payload) != "a" {
		t.Errorf("after reopening: %+v, want a pending", pending)
	}
}

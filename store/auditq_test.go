package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/trainbot/trainbot/history"
)

// Entries queued by AuditLater are in AuditLog at once, in the order they
// were queued, also when a flood fills the queue; Close writes what is
// still queued; the refused ones are trimmed to MaxRefused as Audit's are.
func TestAuditLaterInOrderThroughCloseAndTrimmed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxRefused: 500})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * auditQueueLen
	for i := range n {
		s.AuditLater(history.AuditEntry{Transport: "telegram", Chat: 7, User: int64(i), Text: fmt.Sprint(i), Command: "status", Allowed: i%2 == 0})
	}
	got, err := s.AuditLog(ctx, history.AuditFilter{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for i, e := range got {
		if i > 0 && e.User >= got[i-1].User {
			t.Fatalf("entry %d (user %d) after user %d: not in the order queued", i, e.User, got[i-1].User)
		}
		if e.Allowed {
			allowed++
		}
	}
	if allowed != n/2 || len(got)-allowed > 500+int(s.refusedTrimEvery()) || len(got)-allowed < 500 {
		t.Errorf("%d entries, %d allowed: want all %d allowed and 500 to %d refused", len(got), allowed, n/2, 500+s.refusedTrimEvery())
	}
	s.AuditLater(history.AuditEntry{Transport: "telegram", Chat: 7, User: 1 << 40, Text: "last", Command: "status", Allowed: true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.AuditLater(history.AuditEntry{Text: "after close"}) // logged, not written, no panic
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err = s.AuditLog(ctx, history.AuditFilter{Limit: 1})
	if err != nil || len(got) != 1 || got[0].Text != "last" {
		t.Fatalf("after Close: %+v, %v; want the last entry queued", got, err)
	}
}

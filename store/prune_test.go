package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/trainer"
)

// Samples and audit entries older than their keep are pruned, in batches;
// runs and their peaks stay.
func TestPruneKeepsRecentRowsAndRunPeaks(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{FlushEvery: 20 * time.Millisecond, KeepSamples: 30 * 24 * time.Hour, KeepAudit: 365 * 24 * time.Hour, PruneEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	old := now.Add(-40 * 24 * time.Hour)
	peak := int64(5 << 30)
	id, err := s.CreateRun(ctx, &trainer.Run{Job: "j", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: old, EndedAt: old.Add(time.Hour), PeakHostMem: &peak})
	if err != nil {
		t.Fatal(err)
	}
	var dev []history.DeviceSample
	var mem []history.RunMemory
	// More than two delete batches of each, with batches cut to 500 rows:
	// SQLite under -race runs about 40 times slower than without.
	defer func(b int) { pruneBatch = b }(pruneBatch)
	pruneBatch = 500
	const n = 1200
	for i := 0; i < n; i++ {
		at := old.Add(time.Duration(i) * time.Second)
		if i >= n-100 {
			at = now.Add(-time.Duration(n-i) * time.Second)
		}
		dev = append(dev, history.DeviceSample{T: at, MemUsed: int64(i), MemTotal: 1 << 30, Util: -1, TempC: -1})
		h := int64(i)
		mem = append(mem, history.RunMemory{RunID: id, T: at, HostBytes: &h})
	}
	// Stored directly, in one transaction: AddDeviceSamples would thin
	// them first. (24,000 statements one by one took over 30 s under
	// -race in CI, and the background pruner's first pass, 30 s after
	// Open, deleted them before the Prune under test.)
	tx, err := s.w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dev {
		if _, err := tx.Exec(`INSERT INTO device_samples(t, device, mem_used, mem_total) VALUES(?,0,?,?)`, ms(d.T), d.MemUsed, d.MemTotal); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range mem {
		if _, err := tx.Exec(`INSERT INTO run_memory(run_id, t, host_bytes) VALUES(?,?,?)`, m.RunID, ms(m.T), *m.HostBytes); err != nil {
			t.Fatal(err)
		}
	}
	for _, at := range []time.Time{now.Add(-400 * 24 * time.Hour), now.Add(-time.Hour)} {
		if _, err := tx.Exec(`INSERT INTO audit(t, transport, chat_id, user_id, text, allowed) VALUES(?, 'tg', '1', '2', '开始', 1)`, ms(at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := s.Prune(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pruned %+v in %v", p, time.Since(start))
	if p.DeviceSamples != n-100 || p.RunMemory != n-100 || p.Audit != 1 {
		t.Errorf("pruned %+v, want %d, %d and 1", p, n-100, n-100)
	}
	count := func(table string) (k int) {
		s.r.QueryRow(`SELECT count(*) FROM ` + table).Scan(&k)
		return k
	}
	if count("device_samples") != 100 || count("run_memory") != 100 || count("audit") != 1 {
		t.Errorf("left %d, %d, %d rows", count("device_samples"), count("run_memory"), count("audit"))
	}
	r, err := s.Run(ctx, id)
	if err != nil || r.PeakHostMem == nil || *r.PeakHostMem != peak {
		t.Errorf("the run's peak: %+v %v", r, err)
	}
	if p, _ := s.Prune(ctx, now); p != (Pruned{}) {
		t.Errorf("a second prune deleted %+v", p)
	}
}

// The store prunes in the background.
func TestPrunerRunsInTheBackground(t *testing.T) {
	s, err := Open(t.TempDir(), Options{KeepSamples: time.Hour, PruneEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.w.Exec(`INSERT INTO device_samples(t, device, mem_used, mem_total) VALUES(?,0,1,1)`, ms(time.Now().Add(-2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var k int
		s.r.QueryRow(`SELECT count(*) FROM device_samples`).Scan(&k)
		if k == 0 {
			return
		}
	}
	t.Fatal("the old sample is still there")
}

// TestRefusedAuditIsBounded: a flood of refused commands keeps at most
// MaxRefused of them (plus the few written since the last trim), the
// newest, and pushes out nothing that was carried out.
func TestRefusedAuditIsBounded(t *testing.T) {
	s, err := Open(t.TempDir(), Options{MaxRefused: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 540 {
		e := history.AuditEntry{Transport: "telegram", Chat: -100, User: 999, Text: fmt.Sprint("/status ", i), Command: "status", Reason: "not an allowed user"}
		if i%20 == 0 {
			e = history.AuditEntry{Transport: "telegram", Chat: -100, User: 111, Text: fmt.Sprint("状态 ", i), Command: "status", Allowed: true}
		}
		if _, err := s.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	log, err := s.AuditLog(ctx, history.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, refused int
	for _, e := range log {
		if e.Allowed {
			allowed++
		} else {
			refused++
		}
	}
	if allowed != 27 {
		t.Errorf("%d allowed entries left, want all 27", allowed)
	}
	if refused < 50 || refused > 50+int(s.refusedTrimEvery()) {
		t.Errorf("%d refused entries left, want 50 to %d", refused, 50+s.refusedTrimEvery())
	}
	if log[0].Text != "/status 539" {
		t.Errorf("the newest entry is %q, want the last written", log[0].Text)
	}
	// A prune trims to the bound exactly.
	p, err := s.Prune(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if int(p.Refused) != refused-50 {
		t.Errorf("the prune removed %d refused entries, want %d", p.Refused, refused-50)
	}
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM audit WHERE allowed = 0`).Scan(&n); err != nil || n != 50 {
		t.Errorf("%d refused entries after the prune (%v), want 50", n, err)
	}
	// The bound's query reads the partial index, not the table.
	var plan string
	if err := s.r.QueryRow(`EXPLAIN QUERY PLAN SELECT id FROM audit WHERE allowed = 0 ORDER BY id DESC LIMIT 1 OFFSET 50`).Scan(new(int), new(int), new(int), &plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "audit_refused") {
		t.Errorf("query plan %q does not use audit_refused", plan)
	}
}

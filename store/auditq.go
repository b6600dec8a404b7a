package store

import (
	"context"
	"time"

	"github.com/trainbot/trainbot/history"
)

// auditQueueLen bounds the audit entries waiting for the write connection;
// a caller past it waits for room (a flood is written as fast as the disk
// takes it, in order, and nothing is dropped).
const auditQueueLen = 1024

// auditReq is a queued audit entry, or (done set, no entry) a marker that
// is closed once everything queued before it is written.
type auditReq struct {
	e    history.AuditEntry
	done chan struct{}
}

// auditQueue writes audit entries that nobody waits for (AuditLater) on a
// goroutine of its own: an answer to 状态 must not wait while the one write
// connection is in a long transaction of the point writer (a thinning
// over a run's stored points, niced on a host whose cores the training
// holds, took hundreds of milliseconds).
type auditQueue struct {
	q    chan auditReq
	done chan struct{} // closed when the goroutine has written the last entry
}

func (s *Store) startAuditQueue() {
	s.audits = &auditQueue{q: make(chan auditReq, auditQueueLen), done: make(chan struct{})}
	go s.writeAudits()
}

// AuditLater records an entry as Audit does, without waiting for the
// write: it is queued, and written in order with the entries queued
// before it. Its time is the time of the call when not set. A store that
// is closed writes nothing and says so in the log.
func (s *Store) AuditLater(e history.AuditEntry) {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	s.amu.RLock()
	defer s.amu.RUnlock()
	if s.auditsClosed {
		s.log.Warn("audit entry after the store closed: not recorded", "command", e.Command, "user", e.User)
		return
	}
	s.audits.q <- auditReq{e: e}
}

// flushAudits waits until the entries queued so far are written (or ctx
// ends): what AuditLog reads includes them.
func (s *Store) flushAudits(ctx context.Context) {
	done := make(chan struct{})
	s.amu.RLock()
	if s.auditsClosed {
		s.amu.RUnlock()
		return
	}
	select {
	case s.audits.q <- auditReq{done: done}:
	case <-ctx.Done():
		s.amu.RUnlock()
		return
	}
	s.amu.RUnlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// writeAudits writes the queued entries until the queue is closed, the
// entries waiting together in one transaction.
func (s *Store) writeAudits() {
	defer close(s.audits.done)
	ctx := context.Background()
	for r := range s.audits.q {
		batch := []auditReq{r}
	more:
		for len(batch) < 256 {
			select {
			case r, ok := <-s.audits.q:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.writeAuditBatch(ctx, batch)
	}
}

func (s *Store) writeAuditBatch(ctx context.Context, batch []auditReq) {
	var entries []history.AuditEntry
	for _, r := range batch {
		if r.done == nil {
			entries = append(entries, r.e)
		}
	}
	if len(entries) > 0 {
		if err := s.insertAudits(ctx, entries); err != nil {
			s.log.Warn("audit", "entries", len(entries), "err", err)
		}
	}
	for _, r := range batch {
		if r.done != nil {
			close(r.done)
		}
	}
}

// insertAudits writes entries in one transaction, and trims the refused
// ones as Audit does.
func (s *Store) insertAudits(ctx context.Context, entries []history.AuditEntry) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, insertAudit)
	if err != nil {
		return err
	}
	defer stmt.Close()
	refused := int64(0)
	for _, e := range entries {
		if _, err := stmt.ExecContext(ctx, auditArgs(e)...); err != nil {
			return err
		}
		if !e.Allowed {
			refused++
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if refused > 0 && s.maxRefused > 0 {
		if n := s.refusedAdded.Add(refused); n >= s.refusedTrimEvery() && n-refused < s.refusedTrimEvery() {
			s.trimRefusedLogged(ctx)
		}
	}
	return nil
}

// closeAudits writes what is queued and stops the queue's goroutine.
func (s *Store) closeAudits() {
	s.amu.Lock()
	if s.auditsClosed {
		s.amu.Unlock()
		return
	}
	s.auditsClosed = true
	close(s.audits.q)
	s.amu.Unlock()
	<-s.audits.done
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/trainbot/trainbot/history"
)

// Audit records a command and returns the entry's id (for AuditRun).
func (s *Store) Audit(ctx context.Context, e history.AuditEntry) (int64, error) {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	res, err := s.w.ExecContext(ctx, insertAudit, auditArgs(e)...)
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	if !e.Allowed && s.maxRefused > 0 && s.refusedAdded.Add(1) == s.refusedTrimEvery() { // one caller reaches it: one trim
		s.trimRefusedLogged(ctx)
	}
	return id, nil
}

const insertAudit = `INSERT INTO audit(t, transport, chat_id, user_id, user_name, text, command, allowed, reason, run_id)
		VALUES(?,?,?,?,?,?,?,?,?,?)`

// auditArgs are insertAudit's arguments for e, its text cut to 4 KiB.
func auditArgs(e history.AuditEntry) []any {
	if len(e.Text) > 4096 {
		e.Text = e.Text[:4096]
	}
	return []any{ms(e.T), e.Transport, strconv.FormatInt(e.Chat, 10), strconv.FormatInt(e.User, 10),
		e.UserName, e.Text, e.Command, e.Allowed, e.Reason, nullID(e.Run)}
}

// trimRefusedLogged is trimRefused, its outcome logged.
func (s *Store) trimRefusedLogged(ctx context.Context) {
	if n, err := s.trimRefused(ctx); err != nil {
		s.log.Warn("trim the audit's refused entries", "err", err)
	} else if n > 0 {
		s.log.Debug("audit: oldest refused entries removed", "entries", n, "kept", s.maxRefused)
	}
}

// DefaultMaxRefused is how many refused entries the audit keeps at most
// (Options.MaxRefused): a few MB.
const DefaultMaxRefused = 100_000

// refusedTrimEvery is how many refused entries are written between two
// trims: a tenth of the bound, at most 1,000, so the audit holds at most
// MaxRefused plus that many.
func (s *Store) refusedTrimEvery() int64 { return max(1, min(1000, s.maxRefused/10)) }

// trimRefused deletes the oldest refused audit entries past MaxRefused.
func (s *Store) trimRefused(ctx context.Context) (int64, error) {
	if s.maxRefused <= 0 {
		return 0, nil
	}
	s.refusedAdded.Store(0)
	var cut int64
	err := s.r.QueryRowContext(ctx, `SELECT id FROM audit WHERE allowed = 0 ORDER BY id DESC LIMIT 1 OFFSET ?`, s.maxRefused).Scan(&cut)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("trim the audit: %w", err)
	}
	n, err := s.pruneWhere(ctx, "audit", "allowed = 0 AND id <= ?", cut)
	if err != nil {
		return n, fmt.Errorf("trim the audit: %w", err)
	}
	return n, nil
}

// AuditRun records the run an audited command touched, once the command
// has told (a start knows its run only when it has started).
func (s *Store) AuditRun(ctx context.Context, id, runID int64) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE audit SET run_id = ? WHERE id = ?`, nullID(runID), id); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// AuditLog returns the newest audit entries, newest first.
func (s *Store) AuditLog(ctx context.Context, f history.AuditFilter) ([]history.AuditEntry, error) {
	s.flushAudits(ctx) // with the entries AuditLater queued
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := `SELECT id, t, transport, chat_id, user_id, user_name, text, command, allowed, reason, run_id FROM audit`
	args := []any{}
	if f.User != nil {
		q += ` WHERE user_id = ?`
		args = append(args, strconv.FormatInt(*f.User, 10))
	}
	q += ` ORDER BY id DESC LIMIT ?`
	rows, err := s.r.QueryContext(ctx, q, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("read the audit: %w", err)
	}
	defer rows.Close()
	var out []history.AuditEntry
	for rows.Next() {
		var e history.AuditEntry
		var t int64
		var chat, user string
		var run sql.NullInt64
		if err := rows.Scan(&e.ID, &t, &e.Transport, &chat, &user, &e.UserName, &e.Text, &e.Command, &e.Allowed, &e.Reason, &run); err != nil {
			return nil, fmt.Errorf("read the audit: %w", err)
		}
		e.T = fromMS(t)
		e.Chat, _ = strconv.ParseInt(chat, 10, 64)
		e.User, _ = strconv.ParseInt(user, 10, 64)
		e.Run = run.Int64
		out = append(out, e)
	}
	return out, rows.Err()
}

// SetSubscribed turns progress pushes on or off for a chat.
func (s *Store) SetSubscribed(ctx context.Context, transport string, chat int64, on bool) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO subscriptions(transport, chat_id, subscribed, updated_at) VALUES(?,?,?,?)
		ON CONFLICT(transport, chat_id) DO UPDATE SET subscribed = excluded.subscribed, updated_at = excluded.updated_at`,
		transport, strconv.FormatInt(chat, 10), on, ms(time.Now()))
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// Subscriptions returns every chat's choice (subscribed or muted).
func (s *Store) Subscriptions(ctx context.Context) ([]history.Subscription, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT transport, chat_id, subscribed FROM subscriptions ORDER BY transport, chat_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Subscription
	for rows.Next() {
		var sub history.Subscription
		var chat string
		if err := rows.Scan(&sub.Transport, &chat, &sub.Subscribed); err != nil {
			return nil, err
		}
		sub.Chat, _ = strconv.ParseInt(chat, 10, 64)
		out = append(out, sub)
	}
	return out, rows.Err()
}

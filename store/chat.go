package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// AuditEntry is one command somebody sent, allowed or not.
type AuditEntry struct {
	T         time.Time
	Transport string
	Chat      int64
	User      int64
	UserName  string
	Text      string
	Command   string // canonical command name, "" when not a command
	Allowed   bool
	Reason    string // why it was refused
}

// Audit records a command.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	if len(e.Text) > 4096 {
		e.Text = e.Text[:4096]
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit(t, transport, chat_id, user_id, user_name, text, command, allowed, reason)
		VALUES(?,?,?,?,?,?,?,?,?)`, ms(e.T), e.Transport, strconv.FormatInt(e.Chat, 10), strconv.FormatInt(e.User, 10),
		e.UserName, e.Text, e.Command, e.Allowed, e.Reason)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// AuditLog returns the newest audit entries, newest first.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT t, transport, chat_id, user_id, user_name, text, command, allowed, reason
		FROM audit ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var t int64
		var chat, user string
		if err := rows.Scan(&t, &e.Transport, &chat, &user, &e.UserName, &e.Text, &e.Command, &e.Allowed, &e.Reason); err != nil {
			return nil, err
		}
		e.T = fromMS(t)
		e.Chat, _ = strconv.ParseInt(chat, 10, 64)
		e.User, _ = strconv.ParseInt(user, 10, 64)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Subscription says whether a chat wants progress pushes.
type Subscription struct {
	Transport  string
	Chat       int64
	Subscribed bool
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
func (s *Store) Subscriptions(ctx context.Context) ([]Subscription, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT transport, chat_id, subscribed FROM subscriptions ORDER BY transport, chat_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Subscription
	for rows.Next() {
		var sub Subscription
		var chat string
		if err := rows.Scan(&sub.Transport, &chat, &sub.Subscribed); err != nil {
			return nil, err
		}
		sub.Chat, _ = strconv.ParseInt(chat, 10, 64)
		out = append(out, sub)
	}
	return out, rows.Err()
}

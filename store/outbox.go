package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// OutboxItem is one reply waiting to be delivered to one chat of one
// transport. The store does not read Payload; the bot package encodes it.
type OutboxItem struct {
	ID        int64
	Transport string
	Chat      int64
	// Key de-duplicates: a second item with the same transport, chat and key
	// is not added.
	Key       string
	Payload   []byte
	CreatedAt time.Time
	Attempts  int
	NextAt    time.Time // not tried again before this (a retry's backoff)
	// NotBefore holds the item until then (quiet hours). Unlike NextAt it
	// does not hold back the chat's later items.
	NotBefore time.Time
	LastError string
	SentAt    time.Time // zero while pending; set too when it failed for good
	Failed    bool      // the transport refused it for good
}

const outboxColumns = `id, transport, chat_id, key, payload, created_at, attempts, next_at, last_error, sent_at, not_before, failed`

// EnqueueOutbox stores an item to deliver and returns its id. It returns
// false, and stores nothing, when an item with the same transport, chat and
// key exists (pending or sent): a reply is delivered once.
func (s *Store) EnqueueOutbox(ctx context.Context, it OutboxItem) (int64, bool, error) {
	if it.Transport == "" || it.Key == "" {
		return 0, false, errors.New("enqueue outbox: transport and key are required")
	}
	now := time.Now()
	if it.CreatedAt.IsZero() {
		it.CreatedAt = now
	}
	if it.NextAt.IsZero() {
		it.NextAt = it.CreatedAt
	}
	var notBefore int64
	if !it.NotBefore.IsZero() {
		notBefore = ms(it.NotBefore)
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO outbox(transport, chat_id, key, payload, created_at, next_at, not_before)
		VALUES(?,?,?,?,?,?,?) ON CONFLICT(transport, chat_id, key) DO NOTHING`,
		it.Transport, strconv.FormatInt(it.Chat, 10), it.Key, it.Payload, ms(it.CreatedAt), ms(it.NextAt), notBefore)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue outbox: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return 0, false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, false, fmt.Errorf("enqueue outbox: %w", err)
	}
	return id, true, nil
}

// DueOutbox returns up to limit items of a transport that are due at now,
// at most one per chat: the oldest pending item of each chat that is not
// held (NotBefore), so a chat's items are delivered in order, a failing one
// holds back only its own chat, and an item held for quiet hours holds back
// nothing.
func (s *Store) DueOutbox(ctx context.Context, transport string, now time.Time, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = 20
	}
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox o
		WHERE transport = ?1 AND sent_at IS NULL AND next_at <= ?2 AND not_before <= ?2
		AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.transport = o.transport AND p.chat_id = o.chat_id
			AND p.sent_at IS NULL AND p.not_before <= ?2 AND p.id < o.id)
		ORDER BY id LIMIT ?3`, transport, ms(now), limit)
}

// PendingOutbox returns every undelivered item of a transport ("" for all
// transports), oldest first.
func (s *Store) PendingOutbox(ctx context.Context, transport string) ([]OutboxItem, error) {
	if transport == "" {
		return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE sent_at IS NULL ORDER BY id`)
	}
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE transport = ? AND sent_at IS NULL ORDER BY id`, transport)
}

// OutboxItems returns the newest items of every transport, sent or not,
// newest first.
func (s *Store) OutboxItems(ctx context.Context, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox ORDER BY id DESC LIMIT ?`, limit)
}

// NextOutboxAt returns when the next item of a transport that DueOutbox
// would return (the oldest pending one of a chat) is due; ok is false when
// nothing is pending.
func (s *Store) NextOutboxAt(ctx context.Context, transport string) (at time.Time, ok bool, err error) {
	var v sql.NullInt64
	// Each held item is due at its NotBefore (or later); of the rest, the
	// oldest of each chat at its NextAt.
	err = s.r.QueryRowContext(ctx, `SELECT MIN(max(next_at, not_before)) FROM outbox o WHERE transport = ?1 AND sent_at IS NULL
		AND (not_before > ?2 OR NOT EXISTS (SELECT 1 FROM outbox p WHERE p.transport = o.transport AND p.chat_id = o.chat_id
			AND p.sent_at IS NULL AND p.not_before <= ?2 AND p.id < o.id))`, transport, ms(time.Now())).Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next outbox item: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(v.Int64), true, nil
}

// MarkOutboxSent records that an item was delivered.
func (s *Store) MarkOutboxSent(ctx context.Context, id int64, at time.Time) error {
	_, err := s.w.ExecContext(ctx, `UPDATE outbox SET sent_at = ?, attempts = attempts + 1, last_error = '' WHERE id = ?`, ms(at), id)
	if err != nil {
		return fmt.Errorf("mark outbox item %d sent: %w", id, err)
	}
	return nil
}

// MarkOutboxFailed records that an item was refused for good: it is no
// longer pending (SentAt is set) and Failed says it was not delivered.
func (s *Store) MarkOutboxFailed(ctx context.Context, id int64, at time.Time, lastError string) error {
	if len(lastError) > 1024 {
		lastError = lastError[:1024]
	}
	_, err := s.w.ExecContext(ctx, `UPDATE outbox SET sent_at = ?, failed = 1, attempts = attempts + 1, last_error = ? WHERE id = ?`, ms(at), lastError, id)
	if err != nil {
		return fmt.Errorf("mark outbox item %d failed: %w", id, err)
	}
	return nil
}

// MarkOutboxRetry records a failed attempt and when to try again.
func (s *Store) MarkOutboxRetry(ctx context.Context, id int64, next time.Time, lastError string) error {
	if len(lastError) > 1024 {
		lastError = lastError[:1024]
	}
	_, err := s.w.ExecContext(ctx, `UPDATE outbox SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?`, ms(next), lastError, id)
	if err != nil {
		return fmt.Errorf("mark outbox item %d for retry: %w", id, err)
	}
	return nil
}

// PruneOutbox deletes delivered items sent before the given instant and
// returns how many. Pending items are never deleted.
func (s *Store) PruneOutbox(ctx context.Context, sentBefore time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ?`, ms(sentBefore))
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return res.RowsAffected()
}

func (s *Store) queryOutbox(ctx context.Context, q string, args ...any) ([]OutboxItem, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		var it OutboxItem
		var chat string
		var created, next, notBefore int64
		var sent sql.NullInt64
		if err := rows.Scan(&it.ID, &it.Transport, &chat, &it.Key, &it.Payload, &created, &it.Attempts, &next, &it.LastError, &sent, &notBefore, &it.Failed); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		it.Chat, _ = strconv.ParseInt(chat, 10, 64)
		it.CreatedAt, it.NextAt = fromMS(created), fromMS(next)
		if sent.Valid {
			it.SentAt = fromMS(sent.Int64)
		}
		if notBefore > 0 {
			it.NotBefore = fromMS(notBefore)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return out, nil
}

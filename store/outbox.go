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

const outboxColumns = `id, transport, chat_id, key, payload, created_at, attempts, next_at, last_error, sent_at, not_before, failed`

// EnqueueOutbox stores an item to deliver and returns its id. It returns
// false, and stores nothing, when an item with the same transport, chat and
// key exists (pending or sent): a reply is delivered once.
func (s *Store) EnqueueOutbox(ctx context.Context, it history.OutboxItem) (int64, bool, error) {
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

// PendingOutbox returns every undelivered item of a transport ("" for all
// transports), oldest first.
func (s *Store) PendingOutbox(ctx context.Context, transport string) ([]history.OutboxItem, error) {
	if transport == "" {
		return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE sent_at IS NULL ORDER BY id`)
	}
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE transport = ? AND sent_at IS NULL ORDER BY id`, transport)
}

// OutboxItems returns the newest items of every transport, sent or not,
// newest first.
func (s *Store) OutboxItems(ctx context.Context, limit int) ([]history.OutboxItem, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox ORDER BY id DESC LIMIT ?`, limit)
}

// MarkOutboxSent records that an item was delivered. Its payload (charts
// and all) is dropped: only its key is kept, to deliver it once.
func (s *Store) MarkOutboxSent(ctx context.Context, id int64, at time.Time) error {
	_, err := s.w.ExecContext(ctx, `UPDATE outbox SET sent_at = ?, attempts = attempts + 1, last_error = '', payload = x'' WHERE id = ?`, ms(at), id)
	if err != nil {
		return fmt.Errorf("mark outbox item %d sent: %w", id, err)
	}
	return nil
}

// MarkOutboxFailed records that an item was refused for good: it is no
// longer pending (SentAt is set), Failed says it was not delivered, and
// its payload is dropped.
func (s *Store) MarkOutboxFailed(ctx context.Context, id int64, at time.Time, lastError string) error {
	if len(lastError) > 1024 {
		lastError = lastError[:1024]
	}
	_, err := s.w.ExecContext(ctx, `UPDATE outbox SET sent_at = ?, failed = 1, attempts = attempts + 1, last_error = ?, payload = x'' WHERE id = ?`, ms(at), lastError, id)
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

func (s *Store) queryOutbox(ctx context.Context, q string, args ...any) ([]history.OutboxItem, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	var out []history.OutboxItem
	for rows.Next() {
		var it history.OutboxItem
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

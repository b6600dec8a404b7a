package history

import "time"

// OutboxItem is one reply waiting to be delivered to one chat of one
// transport. The store does not read Payload; bot/deliver encodes it, and
// keeps the order and the schedule of a chat's items.
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
	// NotBefore holds the item until then (quiet hours).
	NotBefore time.Time
	LastError string
	SentAt    time.Time // zero while pending; set too when it failed for good
	Failed    bool      // the transport refused it for good
}

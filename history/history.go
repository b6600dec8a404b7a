// Package history holds the records of trainbot's history that several
// rooms share: metric points, device and run memory samples, the audit,
// subscriptions, the outbox's items and the filters that select them.
// Package store keeps them in SQLite; gpu, bot/render, bot/notify,
// bot/command, bot/deliver and web read or write them through their own
// small interfaces, so none of them links the database.
//
// It is a leaf: it imports only the standard library (a run's outcome is
// carried as the string trainer stores, see OutcomeCount), so anything may
// import it.
package history

import "errors"

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

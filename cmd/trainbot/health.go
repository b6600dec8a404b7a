package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/store"
)

// storeHealth tells the chats what the store's health watcher saw: the disk
// full (once, and once when writes succeed again), the database file
// deleted, replaced or damaged, a damaged one moved aside at the start. The store opens before the notifier exists: what it
// sees until then waits for attach.
type storeHealth struct {
	mu    sync.Mutex
	push  func(func(i18n.Lang) chat.Reply)
	early []func(i18n.Lang) chat.Reply
	down  *store.HealthEvent // the store cannot write (for /healthz); nil when it can
}

// on is store.Options.OnHealth.
func (h *storeHealth) on(e store.HealthEvent) {
	r := healthReply(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch e.Kind {
	case store.HealthFailing, store.HealthReplaced, store.HealthDamaged:
		if h.down == nil || h.down.Kind == store.HealthFailing { // replaced or damaged stays
			h.down = &e
		}
	case store.HealthRecovered:
		if h.down != nil && h.down.Kind == store.HealthFailing {
			h.down = nil
		}
	}
	if h.push == nil {
		h.early = append(h.early, r)
		return
	}
	h.push(r)
}

// attach sends what came so far, and from now on, with push
// (notifier.PushIn: it only queues).
func (h *storeHealth) attach(push func(func(i18n.Lang) chat.Reply)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.push = push
	for _, r := range h.early {
		push(r)
	}
	h.early = nil
}

// healthReply is the alert for a change of the store's health. It goes
// through the notifier and the pipeline like any alert; when the outbox
// cannot store it (the disk is full) the pipeline delivers it from memory.
// It is worded per language.
func healthReply(e store.HealthEvent) func(i18n.Lang) chat.Reply {
	key := fmt.Sprintf("store:%s:%d", e.Kind, time.Now().UnixNano())
	return func(l i18n.Lang) chat.Reply {
		var text string
		switch e.Kind {
		case store.HealthFailing:
			text = l.T(i18n.DiskFull, e.Dir)
			if e.Err != nil {
				text += "\n(" + e.Err.Error() + ")"
			}
		case store.HealthRecovered:
			text = l.T(i18n.DiskBack, e.Dir)
		case store.HealthReplaced:
			text = l.T(i18n.DBReplaced, store.DBName, e.Dir)
		case store.HealthDamaged:
			text = l.T(i18n.DBDamaged, store.DBName, e.Dir, e.Err)
		case store.HealthMovedAside:
			text = l.T(i18n.DBMovedAside, e.Dir, e.Err)
		default:
			text = l.T(i18n.DBOther, e.Dir, e.Kind)
		}
		return chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertTrainbot, Key: key}
	}
}

// up is /healthz's check of the store: it writes (no full disk, the
// database file not replaced) and it reads.
func (h *storeHealth) up(ctx context.Context, st *store.Store) error {
	h.mu.Lock()
	down := h.down
	h.mu.Unlock()
	if down != nil {
		switch down.Kind {
		case store.HealthReplaced:
			return fmt.Errorf("%s on %s was deleted or replaced: history is not being saved; restart trainbot", store.DBName, down.Dir)
		case store.HealthDamaged:
			return fmt.Errorf("%s on %s is damaged (%v): history is not being saved; restart trainbot (it starts a new database and rebuilds the history from the run directories)", store.DBName, down.Dir, down.Err)
		default:
			return fmt.Errorf("writes fail on %s (disk full or failing): %v", down.Dir, down.Err)
		}
	}
	if _, err := st.SchemaVersion(ctx); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

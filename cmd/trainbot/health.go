package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/store"
)

// storeHealth tells the chats what the store's health watcher saw: the disk
// full (once, and once when writes succeed again), the database file
// deleted or replaced. The store opens before the notifier exists: what it
// sees until then waits for attach.
type storeHealth struct {
	mu    sync.Mutex
	push  func(chat.Reply)
	early []chat.Reply
	down  *store.HealthEvent // the store cannot write (for /healthz); nil when it can
}

// on is store.Options.OnHealth.
func (h *storeHealth) on(e store.HealthEvent) {
	r := healthReply(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch e.Kind {
	case store.HealthFailing, store.HealthReplaced:
		if h.down == nil || h.down.Kind != store.HealthReplaced { // replaced stays
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
// (notifier.Push: it only queues).
func (h *storeHealth) attach(push func(chat.Reply)) {
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
func healthReply(e store.HealthEvent) chat.Reply {
	var text string
	switch e.Kind {
	case store.HealthFailing:
		text = fmt.Sprintf("⚠️ disk full on %s: history is not being saved", e.Dir)
		if e.Err != nil {
			text += "\n(" + e.Err.Error() + ")"
		}
	case store.HealthRecovered:
		text = fmt.Sprintf("✅ disk space is back on %s: history is saved again", e.Dir)
	case store.HealthReplaced:
		text = fmt.Sprintf("⚠️ %s on %s was deleted or replaced while trainbot ran: history is not being saved; restart trainbot", store.DBName, e.Dir)
	default:
		text = fmt.Sprintf("trainbot's database on %s: %s", e.Dir, e.Kind)
	}
	return chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertTrainbot, Key: fmt.Sprintf("store:%s:%d", e.Kind, time.Now().UnixNano())}
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
		default:
			return fmt.Errorf("writes fail on %s (disk full or failing): %v", down.Dir, down.Err)
		}
	}
	if _, err := st.SchemaVersion(ctx); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

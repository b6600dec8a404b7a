package main

import (
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
}

// on is store.Options.OnHealth.
func (h *storeHealth) on(e store.HealthEvent) {
	r := healthReply(e)
	h.mu.Lock()
	defer h.mu.Unlock()
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

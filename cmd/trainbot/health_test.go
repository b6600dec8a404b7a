package main

import (
	"errors"
	"testing"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/store"
)

func TestStoreHealthAlertsInOrderOnceAttached(t *testing.T) {
	h := &storeHealth{}
	h.on(store.HealthEvent{Kind: store.HealthFailing, Dir: "/data", Err: errors.New("database or disk is full (13)")})
	var got []chat.Reply
	h.attach(func(r chat.Reply) { got = append(got, r) })
	h.on(store.HealthEvent{Kind: store.HealthRecovered, Dir: "/data"})
	h.on(store.HealthEvent{Kind: store.HealthReplaced, Dir: "/data", Err: errors.New("/data/trainbot.db was deleted")})
	want := []string{
		"⚠️ disk full on /data: history is not being saved\n(database or disk is full (13))",
		"✅ disk space is back on /data: history is saved again",
		"⚠️ trainbot.db on /data was deleted or replaced while trainbot ran: history is not being saved; restart trainbot",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d alerts %+v, want %d", len(got), got, len(want))
	}
	keys := map[string]bool{}
	for i, r := range got {
		if r.Text != want[i] || r.Kind != chat.KindAlert || r.Alert != chat.AlertTrainbot {
			t.Errorf("alert %d: got %q (kind %d, alert %q), want %q, an alert of kind trainbot", i, r.Text, r.Kind, r.Alert, want[i])
		}
		if keys[r.Key] {
			t.Errorf("alert %d: key %q used twice", i, r.Key)
		}
		keys[r.Key] = true
	}
}

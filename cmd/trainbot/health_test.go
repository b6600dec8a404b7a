package main

import (
	"errors"
	"testing"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/store"
)

func TestStoreHealthAlertsInOrderOnceAttached(t *testing.T) {
	h := &storeHealth{}
	h.on(store.HealthEvent{Kind: store.HealthFailing, Dir: "/data", Err: errors.New("database or disk is full (13)")})
	var got, zh []chat.Reply
	h.attach(func(words func(i18n.Lang) chat.Reply) {
		got, zh = append(got, words(i18n.ZhEn)), append(zh, words(i18n.Zh))
	})
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
		if zh[i].Key != r.Key {
			t.Errorf("alert %d: zh key %q, zh+en key %q: one alert, one key", i, zh[i].Key, r.Key)
		}
	}
	if zh[0].Text != "⚠️ /data 磁盘已满：历史记录没有保存\n(database or disk is full (13))" {
		t.Errorf("zh: %q", zh[0].Text)
	}
}

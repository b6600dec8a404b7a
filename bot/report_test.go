package bot_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/trainer"
)

func TestScheduledReportAndStart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	charts := func(ctx context.Context, run *trainer.Run) []bot.Image {
		imgs, err := (&bot.Charts{Data: e.st}).RunCharts(ctx, run)
		if err != nil {
			t.Errorf("charts: %v", err)
		}
		return imgs
	}
	r := bot.ReportReply(ctx, e.sup, e.st, charts, "morning", at)
	if r.Text != "⏰ morning: no run is active." || r.Kind != bot.KindNotice || len(r.Images) != 0 {
		t.Errorf("report with no run: %+v", r)
	}
	if r, refused := bot.ScheduledStart(ctx, e.sup, "nightly", "train", map[string]string{"steps": "400"}, at); refused {
		t.Fatalf("start refused: %s", r.Text)
	}
	active := e.sup.Active()
	if len(active) != 1 || active[0].Run.StartedBy != "schedule nightly" || active[0].Run.Params["steps"] != "400" {
		t.Fatalf("active %+v", active)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := e.sup.Status(0); err == nil && st.Progress.Step >= 5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r = bot.ReportReply(ctx, e.sup, e.st, charts, "morning", at)
	if !strings.HasPrefix(r.Text, "⏰ morning report\nrun #1 · train · running") || len(r.Images) != 1 || r.RunID != 1 || r.Key != "schedule:morning:1893574800" {
		t.Errorf("report of a run: %q, %d images, run %d, key %s", r.Text, len(r.Images), r.RunID, r.Key)
	}
	// A second start while the run is active is refused, with a message.
	r, refused := bot.ScheduledStart(ctx, e.sup, "nightly", "train", nil, at)
	if !refused || r.Kind != bot.KindAlert || r.Alert != bot.AlertSchedule || !strings.Contains(r.Text, "⏰ nightly: train not started: run #1 (train) is still running") {
		t.Errorf("busy: %v %+v", refused, r)
	}
	r, refused = bot.ScheduledStart(ctx, e.sup, "typo", "train", map[string]string{"steps": "0"}, at)
	if !refused || !strings.Contains(r.Text, "below the minimum 1") {
		t.Errorf("bad param: %+v", r)
	}
	if n := len(e.runs()); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// TestAlertWhileChannelsAreDownArrivesOnce: an alert raised while every
// push channel answers errors is retried with backoff and delivered once
// each after they come back; pushing it again changes nothing.
func TestAlertWhileChannelsAreDownArrivesOnce(t *testing.T) {
	type server struct {
		srv       *httptest.Server
		mu        sync.Mutex
		up        bool
		failed    int
		delivered []string
	}
	newServer := func(okBody string) *server {
		s := &server{}
		s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.up {
				s.failed++
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			s.delivered = append(s.delivered, string(body))
			io.WriteString(w, okBody)
		}))
		t.Cleanup(s.srv.Close)
		return s
	}
	wecom := newServer(`{"errcode":0,"errmsg":"ok"}`)
	feishu := newServer(`{"code":0,"msg":"success"}`)
	hook := newServer(`ok`)
	var channels []bot.PushChannel
	for _, c := range []struct {
		kind string
		s    *server
	}{{push.WeCom, wecom}, {push.Feishu, feishu}, {push.Webhook, hook}} {
		ch, err := push.New(push.Options{Kind: c.kind, URL: c.s.srv.URL + "/send?key=k"})
		if err != nil {
			t.Fatal(err)
		}
		channels = append(channels, bot.PushChannel{Transport: ch})
	}
	n := bot.NewNotifier(bot.NotifierOptions{Channels: channels, RetryPause: 2 * time.Millisecond, MaxRetryPause: 20 * time.Millisecond})
	n.Start()
	alert := bot.Reply{Text: "💥 run #5 (mnist) ran out of memory", Kind: bot.KindAlert, Alert: bot.AlertOOM, RunID: 5, Key: "run:5:ended"}
	n.Push(alert)
	servers := []*server{wecom, feishu, hook}
	waitUntil := func(what string, cond func(s *server) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, s := range servers {
			for {
				s.mu.Lock()
				ok := cond(s)
				s.mu.Unlock()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	waitUntil("three failed tries on every channel", func(s *server) bool { return s.failed >= 3 })
	for _, s := range servers {
		s.mu.Lock()
		s.up = true
		s.mu.Unlock()
	}
	waitUntil("the alert on every channel", func(s *server) bool { return len(s.delivered) > 0 })
	n.Push(alert) // the same alert again: already delivered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		s.mu.Lock()
		if len(s.delivered) != 1 || !strings.Contains(jsonText(s.delivered[0]), "run #5 (mnist) ran out of memory") {
			t.Errorf("channel %d got %d deliveries: %q", i, len(s.delivered), s.delivered)
		}
		s.mu.Unlock()
	}
}

// jsonText unescapes a JSON body so that its text can be searched.
func jsonText(body string) string {
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return body
	}
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(string(b), `\u003e`, ">")
}

package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/store"
)

// robot is a fake group robot that is down (HTTP 502) until up is set, and
// counts the alerts it accepted by key.
type robot struct {
	srv      *httptest.Server
	up       atomic.Bool
	attempts atomic.Int64
	mu       sync.Mutex
	got      map[string]int
}

func newRobot(t *testing.T, ok string, key func(body []byte) string) *robot {
	t.Helper()
	r := &robot{got: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.attempts.Add(1)
		if !r.up.Load() {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		r.mu.Lock()
		r.got[key(body)]++
		r.mu.Unlock()
		io.WriteString(w, ok)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *robot) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[key]
}

// chatSender is a chat transport (like Telegram) that fails until up is set.
type chatSender struct {
	up  atomic.Bool
	mu  sync.Mutex
	got map[string]int
}

func (c *chatSender) Name() string { return "telegram" }
func (c *chatSender) Send(ctx context.Context, id int64, r chat.Reply, skip int) (int, error) {
	if !c.up.Load() {
		return 0, errors.New("chat service unreachable")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[r.Key]++
	return 1, nil
}

func (c *chatSender) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[key]
}

// trainbotProcess is the delivery half of one trainbot process: store,
// pipeline, notifier and push channels over the same data directory.
type trainbotProcess struct {
	st *store.Store
	p  *deliver.Pipeline
	n  *notify.Notifier
}

var fastRetries = deliver.Policy{MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, EphemeralTries: 3, ChartTries: 2, ChartPause: 20 * time.Millisecond}

func startProcess(t *testing.T, dir string, tg *chatSender, wecom, hook *robot) *trainbotProcess {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	senders := []chat.Sender{tg}
	var chs []notify.Channel
	for _, o := range []push.Options{
		{Kind: push.WeCom, Name: "lab", URL: wecom.srv.URL + "/cgi-bin/webhook/send?key=k3y", PerMinute: 600},
		{Kind: push.Webhook, Name: "ops", URL: hook.srv.URL + "/hook", PerMinute: 600},
	} {
		ch, err := push.New(o)
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, ch)
		chs = append(chs, notify.Channel{Name: ch.Name()})
	}
	p := deliver.New(deliver.Options{Senders: senders, Store: st, Policy: fastRetries})
	p.Start()
	n := notify.New(notify.Options{Post: p.Post, Always: []chat.ChatKey{{Transport: "telegram", Chat: 42}}, Channels: chs})
	n.Start()
	return &trainbotProcess{st: st, p: p, n: n}
}

func (p *trainbotProcess) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.st.Close(); err != nil {
		t.Fatal(err)
	}
}

// startPipeline is a delivery pipeline over a store of its own with ch as
// its only sender, retrying by fastRetries; both are closed when the test
// ends. logger nil: the default.
func startPipeline(t *testing.T, ch chat.Sender, logger *slog.Logger) (*store.Store, *deliver.Pipeline) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := deliver.New(deliver.Options{Senders: []chat.Sender{ch}, Store: st, Policy: fastRetries, Logger: logger})
	p.Start()
	t.Cleanup(func() { p.Close(context.Background()) })
	return st, p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAlertSurvivesDownChannelsAndARestart is issue 7's acceptance test: an
// alert created while every channel is down is delivered after they come
// back, exactly once on each, even though trainbot restarted in between.
func TestAlertSurvivesDownChannelsAndARestart(t *testing.T) {
	dir := t.TempDir()
	tg := &chatSender{got: map[string]int{}}
	wecom := newRobot(t, `{"errcode":0,"errmsg":"ok"}`, func(b []byte) string {
		if strings.Contains(string(b), "run #7") {
			return "run:7:ended"
		}
		return string(b)
	})
	hook := newRobot(t, `ok`, func(b []byte) string {
		var m struct{ Key string }
		json.Unmarshal(b, &m)
		return m.Key
	})
	alert := chat.Reply{Kind: chat.KindAlert, Alert: "failed", Key: "run:7:ended", RunID: 7, Text: "❌ run #7 (mnist) failed after 3h02m: exit status 1"}

	// First trainbot: everything is down; the alert is raised and tried.
	p1 := startProcess(t, dir, tg, wecom, hook)
	p1.n.Push(alert)
	waitUntil(t, "both robots were tried", func() bool { return wecom.attempts.Load() > 0 && hook.attempts.Load() > 0 })
	p1.stop(t)
	if tg.count(alert.Key)+wecom.count(alert.Key)+hook.count(alert.Key) != 0 {
		t.Fatal("delivered while down")
	}

	// The channels come back; a second trainbot starts on the same data.
	tg.up.Store(true)
	wecom.up.Store(true)
	hook.up.Store(true)
	p2 := startProcess(t, dir, tg, wecom, hook)
	waitUntil(t, "the alert reached every channel", func() bool {
		return tg.count(alert.Key) > 0 && wecom.count(alert.Key) > 0 && hook.count(alert.Key) > 0
	})
	// The same alert raised again (say, the end event replayed) is not sent again.
	p2.n.Push(alert)
	p2.stop(t)
	for name, n := range map[string]int{"telegram": tg.count(alert.Key), "wecom": wecom.count(alert.Key), "webhook": hook.count(alert.Key)} {
		if n != 1 {
			t.Errorf("%s got the alert %d times, want exactly once", name, n)
		}
	}
}

// TestPermanentRefusalHoldsNothingBack: a robot with a bad key refuses for
// good; delivery gives up on it instead of retrying forever, and the next
// alert for that robot still goes out.
func TestPermanentRefusalHoldsNothingBack(t *testing.T) {
	bad := atomic.Bool{}
	bad.Store(true)
	var mu sync.Mutex
	var delivered []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bad.Load() {
			io.WriteString(w, `{"errcode":93000,"errmsg":"invalid webhook url"}`)
			return
		}
		mu.Lock()
		delivered = append(delivered, string(body))
		mu.Unlock()
		io.WriteString(w, `{"errcode":0,"errmsg":"ok"}`)
	}))
	defer srv.Close()
	ch, err := push.New(push.Options{Kind: push.WeCom, Name: "lab", URL: srv.URL + "/send?key=bad", PerMinute: 600})
	if err != nil {
		t.Fatal(err)
	}
	st, p := startPipeline(t, ch, nil)
	lab := chat.ChatKey{Transport: ch.Name()}
	p.Post(deliver.Envelope{To: lab, Durable: true, Reply: chat.Reply{Kind: chat.KindAlert, Key: "a", Text: "first"}})
	waitUntil(t, "the first alert was given up", func() bool {
		items, _ := st.OutboxItems(context.Background(), 10)
		return len(items) == 1 && items[0].Failed
	})
	bad.Store(false)
	p.Post(deliver.Envelope{To: lab, Durable: true, Reply: chat.Reply{Kind: chat.KindAlert, Key: "b", Text: "second"}})
	waitUntil(t, "the second alert was delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == 1 && strings.Contains(delivered[0], "second")
	})
	if _, err := ch.Send(context.Background(), 0, chat.Reply{Text: "x"}, 0); err != nil {
		t.Fatalf("unexpected refusal after the fix: %v", err)
	}
}

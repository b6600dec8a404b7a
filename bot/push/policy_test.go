package push_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/push"
)

// answer is one reply of a fake service.
type answer struct {
	status int
	header string // Retry-After, when set
	body   string
}

// Each kind of #36 through the one retry policy (deliver.Policy), against
// a fake that answers as the service does: its own refusal of a bad key
// is tried once, marked failed in the outbox and logged once; a 429 (with
// Retry-After) and then a 5xx are tried again until the alert arrives.
func TestEveryServiceKindThroughTheOnePolicy(t *testing.T) {
	cases := []struct {
		kind          string
		key, topic    string
		badKey        answer
		ok            answer
		pathOf        string // where every request goes
		serverTrouble answer // a 5xx as the service sends it
	}{
		{kind: push.Slack, badKey: answer{403, "", "invalid_token"}, ok: answer{200, "", "ok"},
			pathOf: "/services/T0/B0/x", serverTrouble: answer{500, "", "internal_error"}},
		{kind: push.Discord, badKey: answer{401, "", `{"message": "Invalid Webhook Token", "code": 50027}`}, ok: answer{200, "", `{"id":"1"}`},
			pathOf: "/api/webhooks/1/x", serverTrouble: answer{502, "", "<html>bad gateway</html>"}},
		{kind: push.Ntfy, topic: "trainbot-lab-x7q2", key: "tk_bad", badKey: answer{401, "", `{"code":40101,"http":401,"error":"unauthorized"}`},
			ok: answer{200, "", `{"id":"a1","event":"message"}`}, pathOf: "/", serverTrouble: answer{500, "", `{"code":50001,"http":500,"error":"internal server error"}`}},
		{kind: push.Bark, key: "ynJ5Ft4atkMkWeo2PAvFhF", badKey: answer{400, "", `{"code":400,"message":"failed to get device token: failed to get [ynJ5Ft4atkMkWeo2PAvFhF] device token from database"}`},
			ok: answer{200, "", `{"code":200,"message":"success"}`}, pathOf: "/push", serverTrouble: answer{503, "", "Service Unavailable"}},
		{kind: push.ServerChan, key: "SCT12345TabcdefghijklmnopqrstuvwxyZ", badKey: answer{200, "", `{"code":40001,"message":"bad pushtoken","data":null}`},
			ok: answer{200, "", `{"code":0,"message":"","data":{"pushid":"1"}}`}, pathOf: "/SCT12345TabcdefghijklmnopqrstuvwxyZ.send", serverTrouble: answer{502, "", "<html>bad gateway</html>"}},
		{kind: push.PushPlus, key: "0123456789abcdef0123456789abcdef", badKey: answer{200, "", `{"code":903,"msg":"无效的用户令牌","data":null}`},
			ok: answer{200, "", `{"code":200,"msg":"请求成功","data":"1"}`}, pathOf: "/send", serverTrouble: answer{200, "", `{"code":500,"msg":"系统异常，请稍后再试","data":null}`}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			var mu sync.Mutex
			var script []answer // answered in order; the last one repeats
			var paths []string
			var texts int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				paths = append(paths, r.URL.Path)
				a := script[0]
				if len(script) > 1 {
					script = script[1:]
				}
				if a == tc.ok && bytes.Contains(body, []byte("second alert")) {
					texts++
				}
				mu.Unlock()
				if a.header != "" {
					w.Header().Set("Retry-After", a.header)
				}
				w.WriteHeader(a.status)
				io.WriteString(w, a.body)
			}))
			defer srv.Close()
			requests := func() (int, []string) {
				mu.Lock()
				defer mu.Unlock()
				return len(paths), append([]string(nil), paths...)
			}
			spec, ok := push.SpecOf(tc.kind)
			if !ok {
				t.Fatalf("no spec of %q", tc.kind)
			}
			o := push.Options{Kind: tc.kind, Name: "x", Key: tc.key, Topic: tc.topic, URL: srv.URL, PerMinute: spec.MaxPerMinute}
			if spec.API == "" {
				o.URL = srv.URL + tc.pathOf
			}
			var logs syncBuffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			ch, err := push.New(o)
			if err != nil {
				t.Fatal(err)
			}
			st, p := startPipeline(t, ch, o.Logger)
			to := chat.ChatKey{Transport: ch.Name()}

			// A bad key: one request, failed for good, logged once.
			mu.Lock()
			script = []answer{tc.badKey}
			mu.Unlock()
			p.Post(deliver.Envelope{To: to, Durable: true, Reply: chat.Reply{Kind: chat.KindAlert, Key: "a", Text: "💥 first alert\nrun #1 failed"}})
			waitUntil(t, "the alert refused for good", func() bool {
				items, _ := st.OutboxItems(context.Background(), 10)
				return len(items) == 1 && items[0].Failed
			})
			if n, got := requests(); n != 1 || got[0] != tc.pathOf {
				t.Errorf("bad key: requests to %v, want one to %s", got, tc.pathOf)
			}
			if n := strings.Count(logs.String(), "refused for good"); n != 1 {
				t.Errorf("the refusal is logged %d times, want once:\n%s", n, logs.String())
			}
			if tc.key != "" && strings.Contains(logs.String(), tc.key) {
				t.Errorf("the log shows the key:\n%s", logs.String())
			}

			// Too many requests, then the service in trouble, then fine:
			// three attempts, one alert.
			mu.Lock()
			script, paths = []answer{{429, "0", "slow down"}, tc.serverTrouble, tc.ok}, nil
			mu.Unlock()
			p.Post(deliver.Envelope{To: to, Durable: true, Reply: chat.Reply{Kind: chat.KindAlert, Key: "b", Text: "💥 second alert\nrun #2 failed"}})
			waitUntil(t, "the second alert delivered", func() bool {
				items, _ := st.OutboxItems(context.Background(), 10)
				return len(items) == 2 && !items[0].SentAt.IsZero() && !items[0].Failed
			})
			mu.Lock()
			defer mu.Unlock()
			if len(paths) != 3 || texts != 1 {
				t.Errorf("requests %v, %d accepted: want a 429, the service in trouble (%d), then the alert once", paths, texts, tc.serverTrouble.status)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer for loggers of several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

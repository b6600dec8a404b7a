package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/receivers"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/web"
	"github.com/trainbot/trainbot/web/webtest"
)

// healthzOf runs tr under runTransports behind a web server whose
// /healthz checks the transports, and returns the URL of /healthz.
func healthzOf(t *testing.T, tr chat.Receiver) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rcv := receivers.Run(ctx, []chat.Receiver{tr}, func(context.Context, chat.Message) {}, receivers.Options{})
	srv := web.New(web.Options{Listen: "127.0.0.1:0", Checks: []web.Check{{Name: "transports", Up: rcv.Up}}})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close(context.Background())
		cancel()
		if n := rcv.Wait(context.Background()); n > 0 {
			t.Errorf("%d transport(s) still running", n)
		}
	})
	return "http://" + srv.Addr() + "/healthz"
}

// awaitHealthz polls /healthz until it answers code with want in its
// body, and fails the test at a 30 s deadline.
func awaitHealthz(t *testing.T, url string, code int, want string) {
	t.Helper()
	var gotCode int
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gotCode, body = webtest.Get(t, url); gotCode == code && strings.Contains(body, want) {
			return
		}
	}
	t.Fatalf("/healthz: %d %q, want %d with %q", gotCode, body, code, want)
}

func newTestTelegram(t *testing.T, fake *telegramtest.Server) *telegram.Transport {
	t.Helper()
	tg, err := telegram.New(telegram.Options{Token: testToken, APIEndpoint: fake.URL, PollTimeout: time.Second,
		RetryPause: 10 * time.Millisecond, MaxPollBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestHealthzNamesTelegramThatCannotConnect: Telegram's Receive retries
// for ever while getMe answers 500, so only its Link tells /healthz: 503
// naming telegram once it has not been connected for longer than its
// backoff cap, and 200 once it connects.
func TestHealthzNamesTelegramThatCannotConnect(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	fake.Inject(telegramtest.Fault{Method: "getMe", Kind: telegramtest.ServerError, Times: -1})
	url := healthzOf(t, newTestTelegram(t, fake))
	awaitHealthz(t, url, http.StatusServiceUnavailable, "transports: telegram not connected for ")
	_, body := webtest.Get(t, url)
	if !strings.Contains(body, "500") || strings.Contains(body, strings.SplitN(testToken, ":", 2)[1]) {
		t.Errorf("/healthz %q: want Telegram's 500, and never the token", body)
	}
	fake.ClearFaults()
	awaitHealthz(t, url, http.StatusOK, "ok")

	// Connected, then getUpdates fails for good: down again, named.
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.ServerError, Times: -1})
	awaitHealthz(t, url, http.StatusServiceUnavailable, "transports: telegram not connected for ")
	fake.ClearFaults()
	awaitHealthz(t, url, http.StatusOK, "ok")
}

// TestHealthzNamesTelegramThatRefusedTheToken: a 401 ends Receive for
// good; /healthz says so.
func TestHealthzNamesTelegramThatRefusedTheToken(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	fake.Inject(telegramtest.Fault{Method: "getMe", Kind: telegramtest.Unauthorized, Times: -1})
	url := healthzOf(t, newTestTelegram(t, fake))
	awaitHealthz(t, url, http.StatusServiceUnavailable, "transports: telegram stopped for good: token refused")
}

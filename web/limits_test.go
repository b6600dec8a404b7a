package web

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer is a slog text log the tests read while the server writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// TestErrorLogToSlogRateLimited: what net/http logs (here a handler's
// panic, per request) goes to slog, at most errorLogBurst lines a window.
func TestErrorLogToSlogRateLimited(t *testing.T) {
	var log logBuffer
	s := New(Options{Listen: "127.0.0.1:0", Logger: log.logger()})
	s.srv.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler broke") })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 20 {
		if resp, err := c.Get("http://" + s.Addr() + "/"); err == nil {
			resp.Body.Close()
			t.Fatal("a panicking handler answered")
		}
	}
	// net/http logs the panic before it closes the connection, which the
	// client saw: the lines are all there.
	got := log.String()
	if n := strings.Count(got, "handler broke"); n != errorLogBurst {
		t.Errorf("%d lines of 20 panics logged, want %d:\n%s", n, errorLogBurst, got)
	}
	if !strings.Contains(got, `level=WARN msg="http server" err="panic serving`) {
		t.Errorf("the server's log is not on slog as a warning:\n%s", got)
	}
}

func TestErrorLogWindow(t *testing.T) {
	var log logBuffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	e := &errorLog{log: log.logger(), window: time.Minute, burst: 2, now: func() time.Time { return now }}
	for range 10 {
		e.Write([]byte("http: TLS handshake error from 10.0.0.1:1234: EOF\n"))
	}
	now = now.Add(time.Minute)
	e.Write([]byte("http: TLS handshake error from 10.0.0.2:1234: EOF\n"))
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 2 of the first window and 1 of the next:\n%s", len(lines), log.String())
	}
	if want := `err="TLS handshake error from 10.0.0.2:1234: EOF" held_back=8`; !strings.Contains(lines[2], want) {
		t.Errorf("the next window's line: %s, want it with %s", lines[2], want)
	}
	if strings.Contains(lines[0], "held_back") {
		t.Errorf("the first line says lines were held back: %s", lines[0])
	}
}

// TestNoFramingHeaders: every answer forbids framing; the run pages keep
// their own policy with frame-ancestors in it.
func TestNoFramingHeaders(t *testing.T) {
	site := newSite(t)
	tok := site.token(ScopeList, time.Hour)
	for _, path := range []string{"/?t=" + tok, "/runs/1", "/healthz", "/assets/app.js", "/nothing"} {
		resp, err := http.Get(site.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", path, got)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q, want frame-ancestors 'none'", path, got)
		}
		if path != "/healthz" && path != "/nothing" && path != "/assets/app.js" && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: the page lost its policy: %q", path, resp.Header.Get("Content-Security-Policy"))
		}
	}
}

// TestServerBounds: the timeouts and the header limit are set.
func TestServerBounds(t *testing.T) {
	s := New(Options{})
	if s.srv.ReadHeaderTimeout <= 0 || s.srv.ReadTimeout <= 0 || s.srv.WriteTimeout <= 0 || s.srv.IdleTimeout <= 0 || s.srv.MaxHeaderBytes <= 0 || s.srv.ErrorLog == nil {
		t.Errorf("unbounded server: %+v", s.srv)
	}
	// A header over the limit is refused.
	srv := startServer(t, Options{})
	req, _ := http.NewRequest("GET", "http://"+srv.Addr()+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", maxHeaderBytes+8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 24 KiB header: %d, want 431", resp.StatusCode)
	}
}

// TestLiveStreamOutlivesTheTimeouts: the server's read and write timeouts
// (here 200 ms) do not cut a run's live stream, which moves its write
// deadline with each event.
func TestLiveStreamOutlivesTheTimeouts(t *testing.T) {
	site := newSite(t)
	id := site.addRun(t, "mnist", true, 10)
	s := New(Options{Listen: "127.0.0.1:0", Pages: site.pages})
	s.srv.ReadTimeout, s.srv.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	url := "http://" + s.Addr() + "/api/runs/" + strconv.FormatInt(id, 10) + "/events?t=" + site.token(Scope(id), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	began := time.Now()
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for events < 8 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	if events < 8 {
		t.Fatalf("the stream ended after %d events in %s: %v", events, time.Since(began), sc.Err())
	}
	if took := time.Since(began); took < 2*s.srv.WriteTimeout {
		t.Errorf("8 events in %s, every %s: the stream did not outlive the timeouts", took, site.pages.Live)
	}
}

package web

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// errorLog is http.Server's ErrorLog on slog: at most burst lines in
// each window; the lines held back are counted, and the count goes with
// the next line let through. A client can make the server log (a bad
// request line, a handshake it breaks off): it must not fill the log.
type errorLog struct {
	log    *slog.Logger
	window time.Duration
	burst  int
	now    func() time.Time

	mu      sync.Mutex
	began   time.Time // of the window
	n       int       // lines let through in it
	dropped int       // lines held back since the last one let through
}

// Defaults of errorLog.
const (
	errorLogWindow = time.Minute
	errorLogBurst  = 5
)

func newErrorLog(l *slog.Logger) *log.Logger {
	return log.New(&errorLog{log: l, window: errorLogWindow, burst: errorLogBurst, now: time.Now}, "", 0)
}

// Write logs one line of the server (log.Logger writes each in one call).
func (e *errorLog) Write(p []byte) (int, error) {
	e.mu.Lock()
	now := e.now()
	if now.Sub(e.began) >= e.window {
		e.began, e.n = now, 0
	}
	if e.n >= e.burst {
		e.dropped++
		e.mu.Unlock()
		return len(p), nil
	}
	e.n++
	dropped := e.dropped
	e.dropped = 0
	e.mu.Unlock()
	msg := strings.TrimSpace(strings.TrimPrefix(string(p), "http: "))
	if dropped > 0 {
		e.log.Warn("http server", "err", msg, "held_back", dropped)
	} else {
		e.log.Warn("http server", "err", msg)
	}
	return len(p), nil
}

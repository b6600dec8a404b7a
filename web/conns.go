package web

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// connLimit is the server's listener. It caps the connections open at
// once: at the cap it closes the keep-alive connection idle the longest
// to make room, and when none is idle it answers 503 and closes the new
// one. Reaching the cap is logged once, and its end once, when no more
// than half the cap is open again. An accept that fails for want of
// descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is retried
// after a pause that doubles up to a second, and logged once per spell,
// where http.Server would log every retry.
type connLimit struct {
	net.Listener
	max  int
	log  *slog.Logger
	done chan struct{}
	once sync.Once

	mu   sync.Mutex
	open map[*limitedConn]struct{}
	full *capSpell // nil while below the cap
}

// capSpell is a time at the cap: since when, and what it closed.
type capSpell struct {
	since            time.Time
	evicted, refused int
}

// limitedConn is a connection the limit counts until it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
	// idle is when the server last saw it go idle between requests; zero
	// while it is new or serving one (guarded by l.mu).
	idle time.Time
}

func newConnLimit(ln net.Listener, max int, log *slog.Logger) *connLimit {
	return &connLimit{Listener: ln, max: max, log: log, done: make(chan struct{}), open: map[*limitedConn]struct{}{}}
}

// Accept returns the next connection within the cap.
func (l *connLimit) Accept() (net.Conn, error) {
	var failing time.Time // zero unless accepts fail
	failures := 0
	pause := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !acceptRetryable(err) {
				return nil, err
			}
			if failures == 0 {
				failing = time.Now()
				l.log.Error("http cannot accept connections; retrying until it can", "err", err)
			}
			failures++
			select {
			case <-time.After(pause):
			case <-l.done:
				return nil, net.ErrClosed
			}
			pause = min(2*pause, time.Second)
			continue
		}
		if failures > 0 {
			l.log.Info("http accepts connections again", "failed", failures, "for", time.Since(failing).Round(time.Millisecond))
			failures = 0
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// Close stops accepting; the connections open stay open.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// acceptRetryable tells an accept error that passes (no descriptor or
// memory now) from the listener's end.
func acceptRetryable(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// admit counts c in, making room by closing the longest idle connection,
// or refuses it (nil).
func (l *connLimit) admit(c net.Conn) net.Conn {
	l.mu.Lock()
	var victim *limitedConn
	if len(l.open) >= l.max {
		for lc := range l.open {
			if !lc.idle.IsZero() && (victim == nil || lc.idle.Before(victim.idle)) {
				victim = lc
			}
		}
		first := l.full == nil
		if first {
			l.full = &capSpell{since: time.Now()}
		}
		if victim != nil {
			delete(l.open, victim)
			l.full.evicted++
		} else {
			l.full.refused++
		}
		l.mu.Unlock()
		if first {
			l.log.Warn("http connections at the cap: closing idle ones, refusing new ones while none is idle", "max_connections", l.max)
		}
		if victim == nil {
			refuse(c)
			return nil
		}
		// Its reader sees the close and the server lets go of it.
		victim.Conn.Close()
		l.mu.Lock()
	}
	lc := &limitedConn{Conn: c, l: l}
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	return lc
}

// refusal is what a connection over the cap is told before it is closed.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 5\r\nContent-Length: 37\r\n\r\ntrainbot: too many HTTP connections\r\n"

// refuse answers 503 without waiting (a fresh socket takes it at once)
// and closes c.
func refuse(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	c.Write([]byte(refusal))
	c.Close()
}

// state is http.Server.ConnState: it tells idle connections, the ones
// that may be closed to make room.
func (l *connLimit) state(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		lc.idle = time.Now()
	} else {
		lc.idle = time.Time{}
	}
}

// counts are the connections open, and how many of them are idle.
func (l *connLimit) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.open {
		if !c.idle.IsZero() {
			idle++
		}
	}
	return len(l.open), idle
}

// Close closes the connection and lets the limit count it out.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.l.release(c))
	return err
}

// CloseWrite half-closes the connection, as the server does before it
// closes one after an error.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (l *connLimit) release(c *limitedConn) func() {
	return func() {
		l.mu.Lock()
		delete(l.open, c)
		open := len(l.open)
		spell := l.full
		if spell != nil && open <= l.max/2 {
			l.full = nil
		} else {
			spell = nil
		}
		l.mu.Unlock()
		if spell != nil {
			l.log.Info("http connections below the cap again", "max_connections", l.max, "open", open,
				"idle_closed", spell.evicted, "refused", spell.refused, "for", time.Since(spell.since).Round(time.Millisecond))
		}
	}
}

// connCap is the cap on connections: want, but no more than a quarter of
// the open-file limit nofile (0: unknown), so that HTTP never takes the
// descriptors the runs, their logs and the store need.
func connCap(want int, nofile uint64) int {
	if nofile == 0 {
		return want
	}
	return int(min(uint64(want), max(nofile/4, 1)))
}

package web

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/web/webtest"
)

// poll checks cond until it holds, and fails the test when it still does
// not after 10 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// keepAlive is a client connection that has had one answer and stays
// open, idle, as a browser's or a flood's keep-alive.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

// dial opens a connection and, when ask, gets /healthz over it.
func dial(t *testing.T, addr string, ask bool) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	k := &keepAlive{Conn: c, r: bufio.NewReader(c)}
	if ask {
		if code := k.get(t); code != http.StatusOK {
			t.Fatalf("GET /healthz: %d", code)
		}
	}
	return k
}

// get asks for /healthz and returns the status (0 when the connection was
// closed instead).
func (k *keepAlive) get(t *testing.T) int {
	t.Helper()
	k.SetDeadline(time.Now().Add(10 * time.Second))
	defer k.SetDeadline(time.Time{})
	if _, err := io.WriteString(k, "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closed reports whether the server closed the connection (or answered
// 503 and closed it) within 10 s.
func (k *keepAlive) closed() bool {
	k.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer k.SetReadDeadline(time.Time{})
	if resp, err := http.ReadResponse(k.r, nil); err == nil {
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			return false
		}
	}
	_, err := k.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestConnectionsCapped: with a cap of 4, idle keep-alives beyond it
// never hold more than 4 connections (the longest idle is closed to make
// room), a member's request is served while the idle ones fill the cap,
// connections that send nothing and fill the cap get a new one refused,
// and the cap is logged once, its end once.
func TestConnectionsCapped(t *testing.T) {
	const max = 4
	var log logBuffer
	s := startServer(t, Options{MaxConnections: max, Logger: log.logger()})
	addr := s.Addr()
	open := func() int { n, _ := s.ln.counts(); return n }

	// One after another, each idle before the next: the first is the
	// longest idle.
	var idle []*keepAlive
	for n := range max {
		idle = append(idle, dial(t, addr, true))
		poll(t, "the server sees the connection idle", func() bool { _, i := s.ln.counts(); return i == n+1 })
	}

	// Twice as many idle ones: each closes the longest idle to make room.
	for i := range max {
		idle = append(idle, dial(t, addr, true))
		if n := open(); n > max {
			t.Fatalf("%d connections open, cap %d", n, max)
		}
		if !idle[i].closed() {
			t.Fatalf("idle connection %d was not closed to make room for a new one", i)
		}
		poll(t, "the new connection is idle", func() bool { _, i := s.ln.counts(); return i == max })
	}

	// A member's request while idle ones fill the cap.
	if code, body := webtest.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("a member's request at the cap: %d %q, want 200 ok", code, body)
	}
	poll(t, "the member's connection is idle too", func() bool { _, i := s.ln.counts(); return i == max })

	// Connections that send nothing: once they hold every place, a new
	// one is refused.
	var silent []*keepAlive
	for range max {
		silent = append(silent, dial(t, addr, false))
	}
	poll(t, "the silent connections hold every place", func() bool { n, i := s.ln.counts(); return n == max && i == 0 })
	over := dial(t, addr, false)
	if !over.closed() {
		t.Fatal("a connection over the cap, none idle, was not refused")
	}
	if n := open(); n != max {
		t.Errorf("%d connections open, want the cap, %d", n, max)
	}
	if got := strings.Count(log.String(), "http connections at the cap"); got != 1 {
		t.Errorf("the cap was logged %d times, want once:\n%s", got, log.String())
	}

	// The pressure goes: logged once; a request is served.
	for _, k := range silent {
		k.Close()
	}
	poll(t, "the silent connections are gone", func() bool { return open() == 0 })
	if code, _ := webtest.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("after the pressure: %d, want 200", code)
	}
	l := log.String()
	if got := strings.Count(l, "http connections below the cap again"); got != 1 {
		t.Errorf("the end of the cap was logged %d times, want once:\n%s", got, l)
	}
	if !strings.Contains(l, "idle_closed=9") || !strings.Contains(l, "refused=1") {
		t.Errorf("the end of the cap does not count 9 idle closed (4 by idle ones, 1 by the member, 4 by the silent ones) and 1 refused:\n%s", l)
	}
}

func TestConnCapBoundedByOpenFileLimit(t *testing.T) {
	for _, c := range []struct {
		want   int
		nofile uint64
		got    int
	}{
		{256, 0, 256},       // unknown limit
		{256, 1 << 20, 256}, // far below a quarter
		{256, 1024, 256},    // exactly a quarter
		{256, 512, 128},
		{65536, 20000, 5000},
		{8, 2, 1},
	} {
		if got := connCap(c.want, c.nofile); got != c.got {
			t.Errorf("connCap(%d, %d) = %d, want %d", c.want, c.nofile, got, c.got)
		}
	}
	if n := openFileLimit(); n == 0 {
		t.Error("no open-file limit read on this system")
	}
}

// failingListener fails its first accepts with EMFILE, then hands out
// connections.
type failingListener struct {
	net.Listener
	fails int
	conn  net.Conn
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.conn, nil
}

// TestAcceptOutOfDescriptors: EMFILE from accept is logged once, retried
// until it passes, and its end logged once; nothing reaches the server.
func TestAcceptOutOfDescriptors(t *testing.T) {
	var log logBuffer
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	l := newConnLimit(&failingListener{fails: 5, conn: a}, 4, log.logger())
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("accept: %v, want the connection after the failures", err)
	}
	if c.(*limitedConn).Conn != a {
		t.Error("accept returned another connection")
	}
	got := log.String()
	if n := strings.Count(got, "http cannot accept connections"); n != 1 || !strings.Contains(got, "too many open files") {
		t.Errorf("the failing accepts logged %d times, want once with the error:\n%s", n, got)
	}
	if n := strings.Count(got, "http accepts connections again"); n != 1 || !strings.Contains(got, "failed=5") {
		t.Errorf("the end of the failures logged %d times, want once with failed=5:\n%s", n, got)
	}
}

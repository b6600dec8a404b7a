package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/web/webtest"
)

// TestServeHTTPDescriptorsBounded is issue 28's finding, scaled down:
// serve with [http] max_connections = 8 and 64 idle keep-alives to
// /healthz (20,000 used every descriptor before). Trainbot's side of them
// never holds more than 8 sockets; a scrape is still served, 开始 still
// starts a run, and the cap is logged once.
func TestServeHTTPDescriptorsBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	text := fmt.Sprintf("data_dir = %q\n[http]\nlisten = \"127.0.0.1:0\"\nmax_connections = 8\n", filepath.Join(dir, "data")) + telegramSection(fake) +
		"[[jobs]]\nname = \"quick\"\ncommand = [\"/bin/sh\", \"-c\", \"echo step 1 loss=0.5\"]\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, _, stderr := startServe(ctx, cfg)
	rx := regexp.MustCompile(`msg="http listening: /metrics, /healthz" .*addr=127\.0\.0\.1:(\d+) max_connections=8`)
	var port string
	for deadline := time.Now().Add(30 * time.Second); port == ""; time.Sleep(10 * time.Millisecond) {
		if m := rx.FindStringSubmatch(stderr.String()); m != nil {
			port = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no http address with max_connections=8 in the log:\n%s", stderr.String())
		}
	}
	addr := "127.0.0.1:" + port
	awaitMessage := func(from int, want string) { // after the first from messages
		t.Helper()
		if !fake.Await(time.Minute, func() bool {
			for _, m := range fake.Messages(111)[from:] {
				if strings.Contains(telegramtest.Plain(m.Text), want) {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no message with %q; stderr:\n%s", want, stderr.String())
		}
	}
	fake.UserSays(111, "帮助")
	awaitMessage(0, "trainbot commands")

	before := openFiles(t)
	peak := 0
	var clients []net.Conn
	for i := range 64 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		// Served, then left idle; the server closes the oldest idle ones
		// to make room (EOF on a later read).
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keep-alive %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		peak = max(peak, serverSockets(t, port))
	}
	t.Logf("64 idle keep-alives: at most %d sockets on trainbot's side", peak)
	if peak > 8 {
		t.Errorf("trainbot held %d sockets of port %s, want at most max_connections = 8", peak, port)
	}
	// This process is trainbot and the 64 clients: 64 descriptors are the
	// clients', at most 8 trainbot's (and a few of serve's own).
	if n := openFiles(t) - before; n > 64+8+4 {
		t.Errorf("%d more descriptors with 64 idle keep-alives, want at most 64 (the clients) + 8 (the cap) + 4", n)
	}
	if code, body := webtest.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("a scrape at the cap: %d %q, want 200", code, body)
	}
	from := len(fake.Messages(111))
	fake.UserSays(111, "开始 quick")
	awaitMessage(from, "run #1 started")
	// serve leaves a run running when it stops: the run's end is awaited,
	// or its supervisor may still write into the data directory while the
	// test's is removed.
	awaitMessage(from, "run #1 (quick) finished")
	if n := strings.Count(stderr.String(), "http connections at the cap"); n != 1 {
		t.Errorf("the cap logged %d times, want once:\n%s", n, stderr.String())
	}
	for _, c := range clients {
		c.Close()
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// openFiles counts this process's descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// serverSockets counts this process's TCP sockets whose local port is
// port, the listening one left out: trainbot's side of the connections.
func serverSockets(t *testing.T, port string) int {
	t.Helper()
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	p, _ := strconv.Atoi(port)
	hexPort := fmt.Sprintf(":%04X", p)
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) > 9 && strings.HasSuffix(f[1], hexPort) && f[3] != "0A" && mine[f[9]] {
				n++
			}
		}
	}
	return n
}

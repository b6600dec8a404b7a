// Command httpfds measures what a flood of idle HTTP keep-alives does to
// `trainbot serve` (issue 28): it starts a fake Telegram Bot API, runs the
// given trainbot binary's serve with [http] listen on loopback, opens
// -conns keep-alive connections to /healthz (each served once, then left
// idle; with -silent, connections that send nothing) from helper processes of its own (one process cannot hold them
// all within the open-file limit), and prints trainbot's descriptors
// before, at the peak and during the flood, whether a scrape of /healthz
// and a 开始 still work, and how many lines trainbot logged meanwhile.
//
//	httpfds -trainbot ./trainbot -conns 20000
//
// Run it through bench/httpfds.sh.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

const token = "123456789:AAE-HTTPFds_benchToken0123456789"

func main() {
	bin := flag.String("trainbot", "", "trainbot binary")
	conns := flag.Int("conns", 20000, "idle keep-alive connections to open")
	per := flag.Int("per", 9000, "connections per helper process")
	hold := flag.Int("hold", 0, "(helper) hold this many connections to -addr")
	addr := flag.String("addr", "", "(helper) the address")
	silent := flag.Bool("silent", false, "the connections send nothing (no request) instead of one request each")
	flag.Parse()
	if *hold > 0 {
		helper(*addr, *hold, *silent)
		return
	}
	if *bin == "" || *conns < 1 || *per < 1 {
		fmt.Fprintln(os.Stderr, "usage: httpfds -trainbot BIN [-conns N] [-per N]")
		os.Exit(2)
	}
	if err := measure(*bin, *conns, *per, *silent); err != nil {
		fmt.Fprintln(os.Stderr, "httpfds:", err)
		os.Exit(1)
	}
}

func measure(bin string, conns, per int, silent bool) error {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	dir, err := os.MkdirTemp("", "httpfds")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "trainbot.toml")
	text := fmt.Sprintf(`data_dir = %q
[http]
listen = %q
[telegram]
api_endpoint = %q
poll_timeout = "1s"
[auth]
operators = [111]
[[jobs]]
name = "quick"
command = ["/bin/sh", "-c", "echo step 1 loss=0.5"]
`, filepath.Join(dir, "data"), addr, fake.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "stderr.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "TRAINBOT_TELEGRAM_TOKEN="+token)
	cmd.Stderr, cmd.Stdout = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-waited
		}
	}()
	pid := cmd.Process.Pid
	if err := awaitUp(addr, 30*time.Second); err != nil {
		return err
	}
	fake.UserSays(111, "帮助")
	if !fake.Await(30*time.Second, func() bool { return len(fake.Messages(111)) > 0 }) {
		return errors.New("trainbot never answered on Telegram")
	}
	fds0 := countFDs(pid)
	lines0 := countLines(logPath)

	// Sample trainbot's descriptors during the flood.
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(countFDs(pid)); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	})

	began := time.Now()
	var helpers []*exec.Cmd
	var stdins []io.Closer
	var results []string
	for left := conns; left > 0; left -= per {
		n := min(left, per)
		h := exec.Command(os.Args[0], "-hold", fmt.Sprint(n), "-addr", addr, fmt.Sprintf("-silent=%v", silent))
		in, _ := h.StdinPipe()
		out, _ := h.StdoutPipe()
		h.Stderr = os.Stderr
		if err := h.Start(); err != nil {
			return err
		}
		helpers, stdins = append(helpers, h), append(stdins, in)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return fmt.Errorf("helper: %w", err)
		}
		results = append(results, strings.TrimSpace(line))
	}
	flood := time.Since(began)
	fdsFlood := countFDs(pid)

	// A scrape and a 开始 while the connections are held.
	c := &http.Client{Timeout: 10 * time.Second}
	t0 := time.Now()
	scrape := "error"
	if resp, err := c.Get("http://" + addr + "/healthz"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scrape = fmt.Sprintf("%d %q", resp.StatusCode, strings.TrimSpace(string(b)))
	} else {
		scrape = err.Error()
	}
	scrapeTook := time.Since(t0)
	fake.UserSays(111, "开始 quick")
	start := "no answer in 30 s"
	fake.Await(30*time.Second, func() bool {
		for _, m := range fake.Messages(111) {
			if t := telegramtest.Plain(m.Text); strings.Contains(t, "run #1") || strings.Contains(t, "too many open files") {
				start = strings.SplitN(t, "\n", 2)[0]
				return true
			}
		}
		return false
	})
	// Logged during the flood and the 3 s after it.
	time.Sleep(3 * time.Second)
	close(stop)
	sampled.Wait()
	lines := countLines(logPath) - lines0
	acceptLines := countMatching(logPath, "Accept error", "cannot accept")

	for _, in := range stdins {
		in.Close()
	}
	for _, h := range helpers {
		h.Wait()
	}
	fmt.Printf("trainbot fds before: %d\n", fds0)
	fmt.Printf("trainbot fds peak during the flood: %d\n", peak.Load())
	fmt.Printf("trainbot fds with the connections held: %d\n", fdsFlood)
	fmt.Printf("connections tried: %d in %s; helpers: %s\n", conns, flood.Round(time.Millisecond), strings.Join(results, "; "))
	fmt.Printf("scrape of /healthz while held: %s in %s\n", scrape, scrapeTook.Round(time.Millisecond))
	fmt.Printf("开始 while held: %s\n", start)
	fmt.Printf("lines logged: %d (accept errors: %d)\n", lines, acceptLines)
	return nil
}

// helper opens n keep-alives to addr, each served once (silent: none
// sends anything), says how they went on stdout, and holds them until
// stdin ends.
func helper(addr string, n int, silent bool) {
	var ok, refused, failed atomic.Int64
	var mu sync.Mutex
	var held []net.Conn
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range jobs {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				if silent {
					ok.Add(1)
					mu.Lock()
					held = append(held, c)
					mu.Unlock()
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					refused.Add(1)
					c.Close()
					continue
				}
				c.SetDeadline(time.Time{})
				ok.Add(1)
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("%d served and held, %d refused or closed, %d not connected\n", ok.Load(), refused.Load(), failed.Load())
	io.Copy(io.Discard, os.Stdin)
	for _, c := range held {
		c.Close()
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func awaitUp(addr string, within time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := c.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no /healthz on %s in %s", addr, within)
}

func countFDs(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds)
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

func countMatching(path string, subs ...string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				n++
				break
			}
		}
	}
	return n
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

// TestServeUnderSystemd: with JOURNAL_STREAM set (systemd's sign that
// stderr is the journal) serve logs lines that start with their syslog
// priority and carry no time of their own, and a SIGHUP is logged and
// ignored: serve goes on answering.
func TestServeUnderSystemd(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	text := fmt.Sprintf("data_dir = %q\n[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [111]\n", filepath.Join(dir, "data"), fake.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, exe: os.Args[0],
		environ: []string{"TRAINBOT_TELEGRAM_TOKEN=" + testToken, "JOURNAL_STREAM=8:123456"}}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	waitFor(t, &stderr, 0, `(?m)^<6>msg=\S*connected`)

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &stderr, 0, `(?m)^<4>msg="SIGHUP ignored`)
	fake.UserSays(111, "帮助")
	if !fake.Await(time.Minute, func() bool { return len(fake.Messages(111)) > 0 }) {
		t.Fatalf("serve stopped answering after SIGHUP:\n%s", stderr.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("exit %d after the signal, want 130", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(l, "<") || strings.Contains(l, "time=") {
			t.Errorf("not a journal line (priority first, no time): %q", l)
		}
	}
}

func TestJournalPriorities(t *testing.T) {
	for _, c := range []struct{ level, want string }{
		{"DEBUG", "<7>"}, {"DEBUG+2", "<7>"}, {"INFO", "<6>"}, {"WARN", "<4>"}, {"ERROR", "<3>"}, {"ERROR+4", "<3>"},
	} {
		if got := priority(c.level); got != c.want {
			t.Errorf("priority(%q) = %q, want %q", c.level, got, c.want)
		}
	}
}

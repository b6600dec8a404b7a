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
// priority and carry no time of their own, and a SIGHUP reloads the
// config: serve goes on answering.
func TestServeUnderSystemd(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir = %q\n", filepath.Join(dir, "data"))+telegramSection(fake)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, _, stderr := startServe(ctx, cfg, "JOURNAL_STREAM=8:123456")
	waitFor(t, stderr, 0, `(?m)^<6>msg=\S*connected`)

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, 0, `(?m)^<6>msg="config reloaded"`)
	fake.UserSays(111, "帮助")
	awaitMessage(t, fake, 111, 0, "trainbot commands", stderr)
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

package main

import (
	"context"
	"fmt"
	"io"
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

func TestJournalPriorities(t *testing.T) {
	for _, c := range []struct{ level, want string }{
		{"DEBUG", "<7>"}, {"DEBUG+2", "<7>"}, {"INFO", "<6>"}, {"WARN", "<4>"}, {"ERROR", "<3>"}, {"ERROR+4", "<3>"},
	} {
		if got := priority(c.level); got != c.want {
			t.Errorf("priority(%q) = %q, want %q", c.level, got, c.want)
		}
	}
}

// TestUnderJournal: JOURNAL_STREAM counts when stderr is the stream it
// names (its device and inode), not when stderr was redirected elsewhere.
func TestUnderJournal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	same := fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)
	for _, c := range []struct {
		environ []string
		stderr  io.Writer
		want    bool
	}{
		{[]string{same}, f, true},
		{[]string{fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino+1)}, f, false},
		{nil, f, false},
		{[]string{"JOURNAL_STREAM="}, &syncBuffer{}, false},
		{[]string{"JOURNAL_STREAM=8:123"}, &syncBuffer{}, true},
	} {
		if got := underJournal(c.environ, c.stderr); got != c.want {
			t.Errorf("underJournal(%q, %T) = %v, want %v", c.environ, c.stderr, got, c.want)
		}
	}
}

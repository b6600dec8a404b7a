package reload

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// logBuffer is a log the test reads while a handler writes it.
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

// told records what a Reloader tells the chats, worded in English.
type told struct {
	mu      sync.Mutex
	replies []chat.Reply
}

func (t *told) notify(words func(i18n.Lang) chat.Reply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replies = append(t.replies, words(i18n.En))
}

func (t *told) all() []chat.Reply {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]chat.Reply(nil), t.replies...)
}

// A reload that applies is logged with its summary and told as a notice;
// one that fails is logged and told as an alert saying the old config
// stays; without a config file nothing is applied.
func TestReloadTellsTheOutcome(t *testing.T) {
	var log logBuffer
	var chats told
	fail := error(nil)
	applied := 0
	r := New(Options{Path: "/etc/trainbot/trainbot.toml", Notify: chats.notify, Logger: log.logger(),
		Apply: func(context.Context) (string, error) {
			applied++
			return "2 job(s), 1 operator(s)", fail
		}})
	r.Reload(context.Background())
	fail = errors.New("trainbot.toml:3: tail_lines: want 0 or more")
	r.Reload(context.Background())

	got := chats.all()
	if applied != 2 || len(got) != 2 {
		t.Fatalf("applied %d times, told %d times (%+v); want 2 and 2", applied, len(got), got)
	}
	if r := got[0]; r.Kind != chat.KindNotice || r.Text != "🔄 config reloaded from trainbot.toml: 2 job(s), 1 operator(s)" {
		t.Errorf("the reload's notice: %+v", r)
	}
	if r := got[1]; r.Kind != chat.KindAlert || r.Alert != chat.AlertTrainbot || r.Text != "⚠️ config reload failed; the old config stays:\ntrainbot.toml:3: tail_lines: want 0 or more" {
		t.Errorf("the failure's alert: %+v", r)
	}
	for _, want := range []string{
		`level=INFO msg="config reloaded" config=/etc/trainbot/trainbot.toml summary="2 job(s), 1 operator(s)"`,
		`level=ERROR msg="config reload failed; the old config stays" config=/etc/trainbot/trainbot.toml err="trainbot.toml:3: tail_lines: want 0 or more"`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, log.String())
		}
	}

	none := New(Options{Notify: chats.notify, Logger: log.logger(), Apply: func(context.Context) (string, error) {
		t.Error("applied without a config file")
		return "", nil
	}})
	none.Reload(context.Background())
	if !strings.Contains(log.String(), "SIGHUP: there is no config file to reload (trainbot runs without --config)") || len(chats.all()) != 2 {
		t.Errorf("without a config file: told %d, log:\n%s", len(chats.all()), log.String())
	}
}

// hangUp sends this process a SIGHUP (caught by OnHangup: the test goes on).
func hangUp(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// Each SIGHUP reloads until stop; a SIGHUP while trainbot starts is only
// logged.
func TestOnHangup(t *testing.T) {
	var log logBuffer
	ignoring := IgnoreHangup(log.logger())
	hangUp(t)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "SIGHUP ignored: trainbot is still starting; send it again to reload the config") {
		if time.Now().After(deadline) {
			t.Fatalf("the SIGHUP while starting was not logged:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond) // polling the log another goroutine writes
	}

	reloads := make(chan struct{}, 4)
	r := New(Options{Path: "trainbot.toml", Logger: log.logger(), Apply: func(context.Context) (string, error) {
		reloads <- struct{}{}
		return "ok", nil
	}})
	stop := r.OnHangup() // before the ignoring stops: no SIGHUP falls between
	ignoring()
	for i := range 2 {
		hangUp(t)
		select {
		case <-reloads:
		case <-time.After(10 * time.Second):
			t.Fatalf("SIGHUP %d did not reload", i+1)
		}
	}
	stop()
}

// serve's pid file names this process and its start; Signal finds it,
// checks it is still that process and sends SIGHUP; remove takes away only
// this process's file.
func TestPIDFileAndSignal(t *testing.T) {
	data := t.TempDir()
	reloads := make(chan struct{}, 1)
	stop := OnHangup(func(context.Context) { reloads <- struct{}{} })
	defer stop()

	if _, err := Signal(data); err == nil || !strings.HasPrefix(err.Error(), "no trainbot serve runs on "+data+" (") {
		t.Errorf("without a pid file: %v", err)
	}
	remove, err := WritePID(data)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, PIDFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the pid file: %v, %v; want it private", fi, err)
	}
	pid, err := Signal(data)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("Signal: pid %d, %v; want %d", pid, err, os.Getpid())
	}
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatal("Signal sent no SIGHUP")
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the pid file after remove: %v", err)
	}

	for _, c := range []struct{ name, content, want string }{
		{"not a pid", "serve\n", path + `: "serve" is not a pid`},
		{"empty", "", path + `: "" is not a pid`},
		{"a pid used again", strconv.Itoa(os.Getpid()) + " 1\n", "pid " + strconv.Itoa(os.Getpid()) + " in " + path + " is not that trainbot serve any more (it stopped without removing the file)"},
		{"a process gone", strconv.Itoa(deadPID(t)) + "\n", " is not that trainbot serve any more"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Signal(data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	select {
	case <-reloads:
		t.Error("a stale pid file was signalled")
	default:
	}

	// Another serve's file (it started after this one) is not removed.
	remove, err = WritePID(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("4242 99\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remove()
	if b, _ := os.ReadFile(path); string(b) != "4242 99\n" {
		t.Errorf("remove took another serve's pid file: %q", b)
	}
}

// deadPID is the pid of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

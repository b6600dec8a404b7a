package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

const testToken = "123456789:AAE-ServeTest_secretValue0123456789"

// telegramSection is the config of the fake Telegram server, with user
// 111 an operator.
func telegramSection(fake *telegramtest.Server) string {
	return fmt.Sprintf("[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [111]\n", fake.URL)
}

// startServe runs `trainbot serve --config cfg` with the test token (from
// the environment, with environ added) until ctx ends; done gets its exit
// status.
func startServe(ctx context.Context, cfg string, environ ...string) (done chan int, stdout, stderr *syncBuffer) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	e := env{stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, exe: os.Args[0],
		environ: append([]string{"TRAINBOT_TELEGRAM_TOKEN=" + testToken}, environ...)}
	done = make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	return done, stdout, stderr
}

// awaitMessage waits up to a minute for a message to chat with want in
// its text, after the first from messages (those before the action waited
// for: len(fake.Messages(chat)) before it), and returns its text.
func awaitMessage(t *testing.T, fake *telegramtest.Server, chat int64, from int, want string, stderr *syncBuffer) string {
	t.Helper()
	var found string
	if !fake.Await(time.Minute, func() bool {
		for _, m := range fake.Messages(chat)[from:] {
			if text := telegramtest.Plain(m.Text); strings.Contains(text, want) {
				found = text
				return true
			}
		}
		return false
	}) {
		t.Fatalf("chat %d: no message with %q after message %d; stderr:\n%s", chat, want, from, stderr.String())
	}
	return found
}

func TestServeTelegram(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	// The token comes from the environment, not the file.
	text := fmt.Sprintf("data_dir = %q\n", filepath.Join(dir, "data")) + telegramSection(fake)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, stdout, stderr := startServe(ctx, cfg)

	fake.UserSays(111, "帮助")
	fake.UserSays(999, "开始")
	awaitMessage(t, fake, 111, 0, "trainbot commands", stderr)
	awaitMessage(t, fake, 999, 0, "Your user id is 999", stderr)
	if !fake.Await(time.Minute, func() bool { return len(fake.Commands()) > 0 }) {
		t.Error("the command menu was not registered")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	secret := strings.SplitN(testToken, ":", 2)[1]
	if strings.Contains(stderr.String(), secret) || strings.Contains(stdout.String(), secret) {
		t.Errorf("the token was printed:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "connected") {
		t.Errorf("stderr should log the connection:\n%s", stderr.String())
	}
}

func TestServeNeedsATransport(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir = %q\n", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"serve", "--config", cfg}, env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, exe: os.Args[0]})
	if code != exitFail || !strings.Contains(stderr.String(), "set [telegram] token") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	code = run(context.Background(), []string{"serve", "--config", cfg}, env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, exe: os.Args[0],
		environ: []string{"TRAINBOT_TELEGRAM_TOKEN=not-a-token"}})
	if code != exitFail || !strings.Contains(stderr.String(), "telegram.token: does not look like a bot token") || strings.Contains(stderr.String(), "not-a-token") {
		t.Errorf("a bad token: exit %d, stderr %q", code, stderr.String())
	}
}

// TestServeGoesOnWhenATransportFails is issue 10's item 3: Telegram
// answering 401 mid-run and a terminal line over 1 MiB used to end serve,
// and with it the run. Now the run finishes, the console is told that
// Telegram stopped, and serve runs until it is stopped.
func TestServeGoesOnWhenATransportFails(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	// The job prints a step every 50 ms until the test lets it finish.
	release := filepath.Join(dir, "release")
	script := fmt.Sprintf(`i=0; while [ ! -e %q ] && [ $i -lt 1200 ]; do i=$((i+1)); echo "step $i loss=0.5"; sleep 0.05; done; echo "step $((i+1)) loss=0.25"`, release)
	text := fmt.Sprintf(`data_dir = %q
[telegram]
api_endpoint = %q
poll_timeout = "1s"
[auth]
operators = [111]
[console]
enabled = true
[[jobs]]
name = "count"
command = ["/bin/sh", "-c", %q]
`, filepath.Join(dir, "data"), fake.URL, script)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	e := env{stdin: pr, stdout: &stdout, stderr: &stderr, environ: []string{"TRAINBOT_TELEGRAM_TOKEN=" + testToken}, exe: os.Args[0]}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	say := func(s string) {
		t.Helper()
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	fake.UserSays(111, "帮助")
	if !fake.Await(time.Minute, func() bool { return len(fake.Messages(111)) > 0 }) {
		t.Fatalf("telegram never answered; stderr:\n%s", stderr.String())
	}
	say("开始 count")
	_, pos := waitFor(t, &stdout, 0, `run #1 started: count`)
	fake.Inject(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.Unauthorized, Times: -1})
	_, pos = waitFor(t, &stdout, pos, `⚠️ telegram stopped: token refused[^\n]*\ntrainbot goes on without it, and runs go on`)
	say(strings.Repeat("x", 1<<20+5))
	_, pos = waitFor(t, &stdout, pos, fmt.Sprintf(`message too long \(%d bytes, limit %d\)`, 1<<20+5, 1<<20))
	say("状态")
	_, pos = waitFor(t, &stdout, pos, `run #1 · count · running`)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &stdout, pos, `✅ run #1 \(count\) finished`)
	select {
	case code := <-done:
		t.Fatalf("serve ended (exit %d) before it was stopped; stderr:\n%s", code, stderr.String())
	default:
	}
	if !strings.Contains(stderr.String(), "transport stopped for good") {
		t.Errorf("stderr does not log that telegram stopped:\n%s", stderr.String())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	if n := len(fake.Requests("getMe")); n != 1 {
		t.Errorf("getMe called %d times: a refused token must not be tried again", n)
	}
}

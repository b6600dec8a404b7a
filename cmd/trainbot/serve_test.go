package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

const testToken = "123456789:AAE-ServeTest_secretValue0123456789"

func TestServeTelegram(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	// The token comes from the environment, not the file.
	text := fmt.Sprintf("data_dir = %q\n[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [111]\n", filepath.Join(dir, "data"), fake.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, environ: []string{"TRAINBOT_TELEGRAM_TOKEN=" + testToken}, exe: os.Args[0]}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()

	fake.UserSays(111, "帮助")
	fake.UserSays(999, "开始")
	await := func(chat int64, want string) {
		t.Helper()
		if !fake.Await(time.Minute, func() bool {
			for _, m := range fake.Messages(chat) {
				if strings.Contains(telegramtest.Plain(m.Text), want) {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("chat %d: no reply with %q; stderr:\n%s", chat, want, stderr.String())
		}
	}
	await(111, "trainbot commands")
	await(999, "Your user id is 999")
	if len(fake.Commands()) == 0 {
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

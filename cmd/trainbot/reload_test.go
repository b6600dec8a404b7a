package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/internal/reload"
)

// SIGHUP (through trainbot reload) adds an operator whose next 开始
// works; an invalid file changes nothing and says why, in the log and in
// the chat.
func TestReloadAddsAnOperator(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "trainbot.toml")
	write := func(operators, extra string) {
		t.Helper()
		doc := fmt.Sprintf("data_dir = %q\n[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [%s]\n"+
			"[[jobs]]\nname = \"quick\"\ncommand = [\"/bin/sh\", \"-c\", \"echo step 1 loss=0.5\"]\n%s", data, fake.URL, operators, extra)
		if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("111", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, _, stderr := startServe(ctx, cfgPath)
	waitFor(t, stderr, 0, `connected`)
	fake.UserSays(222, "开始")
	awaitMessage(t, fake, 222, 0, "Your user id is 222", stderr)

	hook := newHookServer(t)
	write("111, 222", fmt.Sprintf("\n[[push]]\nkind = \"webhook\"\nname = \"ops\"\nurl = %q\n", hook.srv.URL))
	logFrom := len(stderr.String())
	if code, out, errOut := trainbot(t, "", "reload", "--data", data); code != 0 || !strings.Contains(out, "sent SIGHUP to trainbot serve") {
		t.Fatalf("reload: %d %s %s", code, out, errOut)
	}
	waitFor(t, stderr, logFrom, `config reloaded`)
	from := len(fake.Messages(222))
	fake.UserSays(222, "开始")
	awaitMessage(t, fake, 222, from, "run #1 started", stderr)
	// The push channel the reload added gets the run's end.
	deadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(hook.got(), func(m push.WebhookMessage) bool { return m.Alert == "finished" }) {
		if time.Now().After(deadline) {
			t.Fatalf("the new push channel got %+v, want the run's end", hook.got())
		}
		time.Sleep(20 * time.Millisecond)
	}
	awaitMessage(t, fake, 222, from, "run #1 (quick) finished", stderr)

	write("111", "tail_lines = -5\n") // invalid: nothing changes
	logFrom, opFrom := len(stderr.String()), len(fake.Messages(111))
	if code, _, errOut := trainbot(t, "", "reload", "--data", data); code != 0 {
		t.Fatalf("reload: %d %s", code, errOut)
	}
	waitFor(t, stderr, logFrom, `config reload failed; the old config stays`)
	awaitMessage(t, fake, 111, opFrom, "config reload failed; the old config stays", stderr)
	// 222 is still allowed: 状态 answers them (a stranger would get a
	// refusal, or no second one).
	from = len(fake.Messages(222))
	fake.UserSays(222, "状态 1")
	awaitMessage(t, fake, 222, from, "run #1 · quick · finished", stderr)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	if _, err := os.Stat(filepath.Join(data, reload.PIDFile)); !os.IsNotExist(err) {
		t.Errorf("serve.pid left behind: %v", err)
	}
	if code, _, errOut := trainbot(t, "", "reload", "--data", data); code != 1 || !strings.Contains(errOut, "no trainbot serve runs") {
		t.Errorf("reload without serve: %d %s", code, errOut)
	}
}

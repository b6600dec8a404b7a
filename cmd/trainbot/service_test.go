package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnitVerifies runs `systemd-analyze verify` on
// contrib/trainbot.service. verify insists that ExecStart's program
// exists, so the copy it checks runs this test binary instead of
// /usr/local/bin/trainbot; nothing else is changed. verify exits 0 on a
// misspelt value (it only warns), so any output fails the test too.
func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "contrib", "trainbot.service"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	// What the issue asks of the unit, and the environment file it names.
	for _, want := range []string{"\nUser=", "\nStateDirectory=trainbot\n", "\nRestart=on-failure\n", "\nKillMode=process\n",
		"\nEnvironmentFile=/etc/trainbot/trainbot.env\n", "\nExecStart=/usr/local/bin/trainbot serve "} {
		if !strings.Contains(text, want) {
			t.Errorf("contrib/trainbot.service has no %q", strings.TrimSpace(want))
		}
	}
	if !regexp.MustCompile(`(?m)^#.*runs? go on`).MatchString(text) {
		t.Error("contrib/trainbot.service should say in a comment why KillMode=process (the runs go on)")
	}
	if env, err := os.ReadFile(filepath.Join("..", "..", "contrib", "trainbot.env")); err != nil || !strings.Contains(string(env), "TRAINBOT_TELEGRAM_TOKEN=") {
		t.Errorf("contrib/trainbot.env should set TRAINBOT_TELEGRAM_TOKEN (%v)", err)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (no systemd here): contrib/trainbot.service is not verified")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trainbot.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/trainbot", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

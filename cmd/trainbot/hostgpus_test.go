//go:build cgo && !nonvml

package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/internal/nvmltest"
	"github.com/trainbot/trainbot/internal/sshdtest"
)

// A remote trainbot (this test binary, TRAINBOT_TEST_MAIN=1) whose
// session has TRAINBOT_TEST_NVML=GPU:GiB samples a mock DGX A100 where
// another user's process holds that much on that GPU.
func init() {
	v := os.Getenv("TRAINBOT_TEST_NVML")
	if v == "" {
		return
	}
	host := nvmltest.NewHost()
	dev, gib, _ := strings.Cut(v, ":")
	i, _ := strconv.Atoi(dev)
	n, _ := strconv.Atoi(gib)
	host.Foreign(i, uint64(n)*nvmltest.GiB)
	openGPU = mockGPU(host)
}

// 显卡 lists both hosts' devices and holders, sampled over their SSH
// connections from their own (mock NVML) trainbot; a host whose sshd is
// stopped is shown unreachable since a time, with why, and the other
// still answers.
func TestGPUCommandShowsEveryHost(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h1 := sshdtest.Start(t, sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1", "TRAINBOT_TEST_NVML=2:7"}})
	h2 := sshdtest.Start(t, sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1", "TRAINBOT_TEST_NVML=5:11"}})
	transports = append(messengers.All(), exampleKind)
	t.Cleanup(func() { transports = messengers.All() })
	bin := fmt.Sprintf("trainbot = %q", exe)
	cfg := writeConfig(t, "[example]\ntoken = \"t\"\nlanguage = \"en\"\n[auth]\nexample_operators = [\"ana\"]\n[gpu]\ninterval = \"200ms\"\n"+
		hostEntry(t, "h1", h1, true, bin)+hostEntry(t, "h2", h2, true, bin))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ex, done, serr := serveExample(t, ctx, cfg, []string{"HOME=" + t.TempDir()})
	defer func() {
		cancel()
		<-done
	}()

	const chat = 7
	// ask sends 显卡 until an answer matches every pattern, and returns it.
	n := 0
	ask := func(what string, patterns ...string) string {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			began := time.Now()
			ex.says(chat, "ana", "显卡")
			n = ex.await(t, chat, n, "h2", serr) // every answer names every host
			text := ex.reply(chat, n-1)
			ok := true
			for _, p := range patterns {
				ok = ok && regexp.MustCompile(p).MatchString(text)
			}
			if ok {
				t.Logf("显卡 %s (answered in %s):\n%s", what, time.Since(began).Round(time.Millisecond), text)
				return text
			}
			if time.Now().After(deadline) {
				t.Fatalf("显卡 %s: the last answer does not match %q:\n%s\nstderr:\n%s", what, patterns, text, serr.String())
			}
			time.Sleep(100 * time.Millisecond) // polling the samples
		}
	}
	// Each host's devices: index, name, memory used/total, util, temp;
	// and its holder (pid 1 of the mock, with its memory).
	both := ask("with both hosts",
		`(?m)^── h1 ──\n\[0\] Mock NVIDIA A100-SXM4-40GB · 0 B/40\.00 GiB · 0% · 40°C`,
		`(?s)── h1 ──.*\[2\] Mock NVIDIA A100-SXM4-40GB · 7\.00/40\.00 GiB[^\n]*\n  \S+ pid 1: .*· 7\.00 GiB`,
		`(?s)── h2 ──.*\[5\] Mock NVIDIA A100-SXM4-40GB · 11\.00/40\.00 GiB[^\n]*\n  \S+ pid 1: .*· 11\.00 GiB`,
		`(?s)── h2 ──.*\[7\] Mock NVIDIA A100-SXM4-40GB`)
	if strings.Index(both, "── h1 ──") > strings.Index(both, "── h2 ──") {
		t.Errorf("the hosts are not in the config's order:\n%s", both)
	}

	stopped := time.Now()
	h2.Stop()
	down := ask("with h2 stopped",
		`(?m)^h2: unreachable since \d\d:\d\d:\d\d \(.+\); last answer \d\d:\d\d:\d\d$`,
		`(?s)── h1 ──.*\[2\] Mock NVIDIA A100-SXM4-40GB · 7\.00/40\.00 GiB`)
	t.Logf("h2 shown unreachable %s after its sshd was stopped", time.Since(stopped).Round(10*time.Millisecond))
	m := regexp.MustCompile(`unreachable since (\d\d:\d\d:\d\d)`).FindStringSubmatch(down)
	since, err := time.ParseInLocation("15:04:05", m[1], time.Local)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since = time.Date(now.Year(), now.Month(), now.Day(), since.Hour(), since.Minute(), since.Second(), 0, time.Local)
	if since.Before(stopped.Truncate(time.Second)) || since.After(now) {
		t.Errorf("unreachable since %s, want between the stop (%s) and now (%s)", m[1], stopped.Format("15:04:05"), now.Format("15:04:05"))
	}
	if strings.Contains(down, "── h2 ──") {
		t.Errorf("h2's old table is still shown:\n%s", down)
	}
}

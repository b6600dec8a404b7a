package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// TestChineseSessionReadsAsChinese drives `trainbot demo` with
// [chat] language = "zh" through the terminal chat — a real demo run, the
// real router, notifier and delivery — and reads every reply as a Chinese
// user would: no English outside the kept terms (i18n.LatinKept, metric
// names, paths, the script's own output), and every command word quoted
// 「…」 where it stands for something to send.
func TestChineseSessionReadsAsChinese(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "zh.toml")
	if err := os.WriteFile(cfg, []byte("[chat]\nlanguage = \"zh\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	e, out, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"demo", "--data", data, "--config", cfg, "--steps", "100000", "--pace", "5ms"}, e)
	}()
	pos := 0
	say := func(s, re string) {
		t.Helper()
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
		_, pos = waitFor(t, out, pos, re)
	}
	say("开始", `训练 #1 已开始`)
	// Ask for status until it shows a loss (bounded: 100 tries).
	for i := 0; i < 100; i++ {
		if _, err := io.WriteString(pw, "状态\n"); err != nil {
			t.Fatal(err)
		}
		var status string
		status, pos = waitFor(t, out, pos, `训练 #1 · demo[^\n]*\n(还没有指标|[^\n]*\n[^\n]*loss)`)
		if strings.Contains(status, "loss") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	say("日志 3", `训练 #1 的最后`)
	say("画图", `\[image\]`)
	say("开始", `未启动：训练 #1`)
	say("历史", `最近的训练`)
	say("显卡", `主机内存已用`)
	say("帮助", `例如：`)
	say("任务", `开始训练`)
	say("适配", `适配 · demo`)
	say("staus", `我不认识`)
	say("对比 1", `至少要两个训练编号`)
	say("日志 x", `“x”不是`)
	say("备注 99 x", `找不到训练 #99`)
	say("开始 batch_size=99999", `大于最大值 4096`)
	say("停止", `正在停止训练 #1`)
	_, pos = waitFor(t, out, pos, `训练 #1（demo）被 \S+ 停止`)
	say("开始 steps=30", `训练 #2 已开始`)
	_, pos = waitFor(t, out, pos, `训练 #2（demo）已完成`)
	say("对比 1 2", `#2 对比 #1`)
	say("历史", `最近的训练`)
	say("状态", `最近一次`)
	say("队列", `队列是空的`)
	endOfInput(t, pw, done, errOut)
	text := out.String()
	if n := strings.Count(text, "\n"); n < 60 {
		t.Fatalf("the session printed %d lines, too few to have walked it:\n%s", n, text)
	}
	var words []string
	for _, c := range chat.Commands {
		words = append(words, c.Chinese)
	}
	for _, line := range strings.Split(text, "\n") {
		if skipLine(line) {
			continue
		}
		line = typed.ReplaceAllString(metricNames.ReplaceAllString(line, " "), "“”")
		if w := i18n.LatinOutside(line); len(w) > 0 {
			t.Errorf("English %q in a zh reply: %s", w, line)
		}
		if b := i18n.BareCommandWords(line, words); len(b) > 0 && !helpRow.MatchString(line) {
			t.Errorf("command words %q unquoted: %s", b, line)
		}
	}
}

var (
	// metricNames are what the demo prints and the bot quotes: names, not prose.
	metricNames = regexp.MustCompile(`\b(val_loss|val_acc|acc|loss|batch_size|hidden|lr|pace_ms|seed|steps|demo|root)\b`)
	// helpRow is a row of the command table (帮助), or a heading the
	// command word leads (对比 · loss · …).
	helpRow = regexp.MustCompile(`^\S+ .*（/[a-z]+）— |^(对比|适配) · `)
	// typed is what the user typed, quoted back “…”.
	typed = regexp.MustCompile(`“[^”]*”`)
	// scriptOutput is the demo script's own output (日志) and the job's own
	// description and parameter help, written in the config.
	scriptOutput = regexp.MustCompile(`^(Epoch \[|demo: |\[trainbot\] )`)
)

// skipLine is a line a zh chat may show in English: the script's output,
// the job's own words, a chart's path and the terminal's [buttons] row.
// (The compare charts' captions are Chinese now and checked too.)
func skipLine(line string) bool {
	t := strings.TrimSpace(line)
	return scriptOutput.MatchString(line) || strings.HasPrefix(t, "[image]") || strings.HasPrefix(t, "[buttons]")
}

package command_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// What a Chinese input method types in full-width mode is read as the
// ASCII it stands for: the ideographic space, ＝, full-width digits and
// letters. 开始　demo　steps＝２００ starts a run with steps=200.
func TestFullWidthStart(t *testing.T) {
	e := newEnvJob(t, "demo")
	r := e.say(operator, "开始　demo　steps＝２００")
	mustContain(t, r, "run #1 started: demo", "steps=200")
	runs := e.runs()
	if len(runs) != 1 || runs[0].Params["steps"] != "200" || runs[0].Job != "demo" {
		t.Fatalf("runs %+v", runs)
	}
	if _, err := e.sup.Stop(1, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sup.WaitRun(context.Background(), 1); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	// Full-width letters in a name, a full-width slash and a number typed
	// against the command word.
	r = e.say(operator, "开始　ｄｅｍｏ　ｓｔｅｐｓ＝３")
	mustContain(t, r, "run #2 started: demo", "steps=3")
	if _, err := e.sup.WaitRun(context.Background(), 2); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	mustContain(t, e.say(operator, "／ｓｔａｔｕｓ　２"), "run #2")
	mustContain(t, e.say(operator, "日志３"), "Last 3 lines of run #2")
}

// A refusal echoes what was read when it is not what was typed, so the
// user sees how a full-width character was understood.
func TestRefusalEchoesTheNormalisedCommand(t *testing.T) {
	e := newEnvJob(t, "demo")
	r := e.say(operator, "开始　demo　steps＝ａｂｃ")
	mustContain(t, r, "Not started", `steps: "abc" is not an integer`, "(read as: 开始 demo steps=abc)")
	r = e.say(operator, "ｈｅｌｌｏ")
	mustContain(t, r, `I don't know "hello"`, "(read as: hello)")
	// Typed in ASCII: nothing to echo.
	if r := e.say(operator, "开始 demo steps=abc"); strings.Contains(r.Text, "read as") {
		t.Errorf("an ASCII command was echoed: %q", r.Text)
	}
	if len(e.runs()) != 0 {
		t.Fatal("a refused start recorded a run")
	}
}

// A note is free text: it keeps the Chinese punctuation it was typed with,
// while the command before it is read in ASCII.
func TestNoteKeepsWhatWasTyped(t *testing.T) {
	e := newEnvJob(t, "demo")
	r := e.say(operator, "开始　demo　steps＝２　备注：基线，ｂａｔｃｈ　６４（对照）")
	mustContain(t, r, "run #1 started", "steps=2", "📝 基线，ｂａｔｃｈ ６４（对照）")
	if _, err := e.sup.WaitRun(context.Background(), 1); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	mustContain(t, e.say(operator, "备注　１　改成：更小的学习率，lr＝1e-4"), "📝 run #1: 改成：更小的学习率，lr＝1e-4")
	run, err := e.st.Run(context.Background(), 1)
	if err != nil || run.Note != "改成：更小的学习率，lr＝1e-4" {
		t.Fatalf("stored note %q, %v", run.Note, err)
	}
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// With language = "zh" the router answers in Chinese, with "en" in
// English, and with "zh+en" (the default) as it always did.
func TestRouterSpeaksTheTransportsLanguage(t *testing.T) {
	e := newEnvJob(t, "demo")
	e.r.Languages = i18n.Languages{Default: i18n.ZhEn, ByTransport: map[string]i18n.Lang{"wecomlike": i18n.Zh, "englishlike": i18n.En}}
	say := func(transport, text string) chat.Reply {
		t.Helper()
		return e.r.Handle(context.Background(), chat.Message{Transport: transport, Chat: operator, User: chat.User{ID: operator, Name: "u"}, Text: text})
	}
	cases := []struct {
		name, text  string
		zh, en, mix []string
	}{
		{"unknown word", "hello",
			[]string{"我不认识“hello”", "发送「帮助」"},
			[]string{`I don't know "hello"`, "Send /help"},
			[]string{`I don't know "hello". Send 帮助 (/help) for the commands.`}},
		{"mistyped word", "staus",
			[]string{"我不认识“staus”。你是想发「状态」吗？"},
			[]string{`I don't know "staus". Did you mean /status?`},
			[]string{`I don't know "staus". Did you mean 状态 (/status)? Send 帮助 (/help) for the commands.`}},
		{"refused parameter", "开始 demo steps=abc",
			[]string{"未启动：steps=abc：不是整数", "发送「任务」查看参数"},
			[]string{`Not started: steps: "abc" is not an integer`, "Send /jobs for the parameters."},
			[]string{`Not started: steps: "abc" is not an integer`, "Send 任务 (/jobs) for the parameters."}},
		{"below the minimum", "开始 demo steps=0",
			[]string{"steps=0：小于最小值 1"},
			[]string{"below the minimum 1"},
			[]string{"below the minimum 1"}},
		{"unreadable", "开始 demo steps",
			[]string{"看不懂 steps", "名字=值"},
			[]string{"I could not read steps", "e.g. /train batch_size=32"},
			[]string{"I could not read steps", "e.g. 开始 batch_size=32"}},
		{"help", "帮助",
			[]string{"trainbot 命令", "开始 [任务] [参数=值…]（/train）— 开始训练", "停止 [编号]（/stop）— 停止正在运行的训练", "例如：「开始 batch_size=32"},
			[]string{"trainbot commands", "/train [job] [k=v…] — start a run", "/stop [run] — stop the active run", "Example: /train batch_size=32"},
			[]string{"trainbot commands (中文 or English, with or without /):", "开始 [job] [k=v…]  /train — start a run", "Example: 开始 batch_size=32"}},
		{"audit", "审计",
			[]string{"条命令，最新的在前：", "wecomlike 聊天 100", "允许"},
			[]string{"command(s), newest first:", "englishlike chat 100", "allowed"},
			[]string{"command(s), newest first:", "telegram chat 100", "allowed"}},
		{"fit", "适配",
			[]string{"适配 · demo", "❔ 估算不了"},
			[]string{"fit · demo", "❔ no answer"},
			[]string{"适配 fit · demo", "❔ no answer"}},
		{"no run yet", "历史",
			[]string{"还没有训练。发送「开始」开始训练。"},
			[]string{"No run yet. Send /train to start one."},
			[]string{"No run yet. Send 开始 to start one."}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			zh, en, mix := say("wecomlike", c.text), say("englishlike", c.text), say("telegram", c.text)
			mustContain(t, zh, c.zh...)
			mustContain(t, en, c.en...)
			mustContain(t, mix, c.mix...)
			// The English answer names commands in English only; the help
			// shows the arguments' own words (显存) and nothing else.
			if c.name != "help" && c.name != "audit" && hasHan(en.Text) {
				t.Errorf("en answer has Chinese: %q", en.Text)
			}
		})
	}
	// Buttons are labelled in the language, and send the same words.
	r := say("wecomlike", "开始 demo steps=2000")
	if len(r.Buttons) != 1 || r.Buttons[0][0].Label != "停止" || r.Buttons[0][0].Data != "停止" {
		t.Fatalf("zh buttons %+v", r.Buttons)
	}
	mustContain(t, r, "▶️ 训练 #1 已开始：demo")
	mustContain(t, say("englishlike", "开始 demo"), "Not started: run #1 (demo) is already running", "Send /stop to stop it first")
	st := say("wecomlike", "状态")
	mustContain(t, st, "训练 #1 · demo · 运行中，已运行 ")
	if _, err := e.sup.Stop(1, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sup.WaitRun(context.Background(), 1); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	mustContain(t, say("wecomlike", "历史"), "最近的训练", "#1 demo 已停止")
	mustContain(t, say("englishlike", "历史"), "Recent runs", "#1 demo stopped")
}

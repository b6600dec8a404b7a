package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// Each destination gets an event in its transport's language: the
// console in zh+en, a WeCom chat and a WeCom push channel in Chinese, a
// webhook in English. The alert is counted once, whatever the languages.
func TestEventsAreWordedPerDestination(t *testing.T) {
	p := &posts{}
	wecom := chat.ChatKey{Transport: "wecom", Chat: 7}
	lab, hook := chat.ChatKey{Transport: "wecom:lab"}, chat.ChatKey{Transport: "webhook:ops"}
	subs := subsFunc(func() []history.Subscription {
		return []history.Subscription{{Transport: "wecom", Chat: 7, Subscribed: true}}
	})
	var counted []string
	n := New(Options{Post: p.post, Always: []chat.ChatKey{console}, Subscriptions: subs, OOMGrace: 20 * time.Millisecond,
		Channels:  []Channel{{Name: "wecom:lab"}, {Name: "webhook:ops"}},
		Languages: i18n.Languages{Default: i18n.ZhEn, ByTransport: map[string]i18n.Lang{"wecom": i18n.Zh, "wecom:lab": i18n.Zh, "webhook:ops": i18n.En}},
		OnAlert:   func(kind string) { counted = append(counted, kind) }})
	n.Start()
	oom, _ := trainer.DetectOOM("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free.")
	peak := int64(78 << 30)
	run := &trainer.Run{ID: 3, Job: "mnist", Params: map[string]string{"batch_size": "64", "lr": "0.01", "precision": "fp32"}, PeakGPUMem: &peak, StartedAt: time.Now()}
	n.OnEvent(trainer.Event{Kind: trainer.EventAlert, Run: run, Job: mnistJob(false), At: time.Now(), Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: oom.Summary(), OOM: oom}})
	awaitPosts(t, "the OOM alert", func() bool { return len(p.to(hook)) == 1 })
	closeNotifier(t, n)

	want := map[chat.ChatKey][]string{
		console: {"💥 run #3 (mnist) hit out-of-memory", "peak before the crash: GPU 78.00 GiB", "What to try:", "a smaller batch: 开始 mnist batch_size=32"},
		wecom:   {"💥 训练 #3（mnist）OOM 了：CUDA 显存不足（GPU 0）：尝试分配 2.00 GiB", "崩溃前的峰值：显存 78.00 GiB", "可以试试：", "减小 batch：「开始 mnist batch_size=32", "梯度累积：2 步、每步 32，保持等效 batch 64", "混合精度：precision=bf16"},
		lab:     {"💥 训练 #3（mnist）OOM 了：CUDA 显存不足", "可以试试："},
		hook:    {"💥 run #3 (mnist) hit out-of-memory", "What to try:", "gradient accumulation: 2 steps of 32 keep the effective batch of 64"},
	}
	for to, subs := range want {
		got := p.to(to)
		if len(got) != 1 {
			t.Errorf("%v got %d posts, want 1: %q", to, len(got), got)
			continue
		}
		for _, s := range subs {
			if !strings.Contains(got[0], s) {
				t.Errorf("%v: %q lacks %q", to, got[0], s)
			}
		}
	}
	for _, e := range p.all() {
		label := e.Reply.Buttons[0][0].Label
		switch e.To {
		case wecom, lab:
			if label != "用一半 batch 重试" {
				t.Errorf("%v button %q", e.To, label)
			}
		case hook:
			if label != "Retry with half batch" {
				t.Errorf("%v button %q", e.To, label)
			}
		}
	}
	if len(counted) != 1 || counted[0] != chat.AlertOOM {
		t.Errorf("alerts counted %q, want one oom", counted)
	}
}

// The live progress is worded per destination too.
func TestProgressIsWordedPerDestination(t *testing.T) {
	p := &posts{}
	runs := &fakeRuns{}
	runs.set(status(1, 10, 100, 0.9))
	subs := fakeSubs{{Transport: "wecom", Chat: 2, Subscribed: true}}
	pub := NewProgressPublisher(ProgressOptions{Trainer: runs, Post: p.post, InPlace: func(t string) bool { return t == "tg" }, Subscriptions: subs,
		Interval: 20 * time.Millisecond, Languages: i18n.Languages{ByTransport: map[string]i18n.Lang{"wecom": i18n.Zh}}})
	pub.Start()
	tg1, wc := chat.ChatKey{Transport: "tg", Chat: 1}, chat.ChatKey{Transport: "wecom", Chat: 2}
	awaitPosts(t, "progress", func() bool { return len(p.to(tg1)) == 1 && len(p.to(wc)) == 1 })
	if err := pub.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.to(tg1)[0]; !strings.Contains(got, "▶️ run #1 · demo · running for 1m30s") || !strings.Contains(got, "step 10/100") || !strings.Contains(got, "12.5 steps/s · ETA 2m") {
		t.Errorf("zh+en progress %q", got)
	}
	if got := p.to(wc)[0]; !strings.Contains(got, "▶️ 训练 #1 · demo · 运行中，已运行 1 分 30 秒") || !strings.Contains(got, "第 10/100 步") || !strings.Contains(got, "12.5 步/秒 · 预计还要 2 分钟") {
		t.Errorf("zh progress %q", got)
	}
}

package notify

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

func mnistJob(onOOM bool) *trainer.Job {
	one := 1.0
	j := &trainer.Job{Name: "mnist", Command: []string{"python3", "train.py"}, Params: map[string]trainer.ParamSpec{
		"batch_size": {Type: trainer.ParamInt, Default: "64", HasDefault: true, Min: &one},
		"lr":         {Type: trainer.ParamFloat, Default: "0.001", HasDefault: true},
		"precision":  {Type: trainer.ParamString, Default: "fp32", HasDefault: true, Choices: []string{"fp32", "bf16"}},
	}}
	if onOOM {
		j.OnOOM = &trainer.OOMRetry{Retry: 2, Halve: "batch_size"}
	}
	return j
}

func TestOOMAlertSaysWhatToDo(t *testing.T) {
	line := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free. " +
		"Of the allocated memory 70.00 GiB is allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
	o, ok := trainer.DetectOOM(line)
	if !ok {
		t.Fatal("not an OOM line")
	}
	peak := int64(78 << 30)
	run := &trainer.Run{ID: 3, Job: "mnist", Params: map[string]string{"batch_size": "64", "lr": "0.01", "precision": "fp32"}, PeakGPUMem: &peak}
	e := trainer.Event{Kind: trainer.EventAlert, Run: run, Job: mnistJob(false), At: time.Now(), Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: o.Summary(), OOM: o}}
	r, _ := EventReply(i18n.ZhEn, e)
	for _, want := range []string{
		"💥 run #3 (mnist) hit out-of-memory: CUDA out of memory on GPU 0: tried to allocate 2.00 GiB",
		"1.25 GiB free of 79.15 GiB",
		"peak before the crash: GPU 78.00 GiB",
		"a smaller batch: 开始 mnist batch_size=32 lr=0.01",
		"gradient accumulation: 2 steps of 32 keep the effective batch of 64",
		"mixed precision: precision=bf16",
		"gradient checkpointing",
		"memory is fragmented (6.50 GiB reserved by PyTorch but unallocated): set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
	} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("alert lacks %q:\n%s", want, r.Text)
		}
	}
	if r.Kind != chat.KindAlert || r.Alert != chat.AlertOOM {
		t.Errorf("kind %v alert %q", r.Kind, r.Alert)
	}
	if len(r.Buttons) != 1 || r.Buttons[0][0].Label != "用一半 batch 重试 Retry with half batch" || r.Buttons[0][0].Data != "开始 mnist batch_size=32 lr=0.01" {
		t.Errorf("buttons %+v", r.Buttons)
	}

	// Not fragmented, no batch parameter: generic advice, no button.
	plain, _ := trainer.DetectOOM("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 5.12 GiB already allocated; 12.00 MiB free; 5.30 GiB reserved in total by PyTorch)")
	job := &trainer.Job{Name: "x", Command: []string{"x"}}
	e = trainer.Event{Kind: trainer.EventAlert, Run: &trainer.Run{ID: 4, Job: "x"}, Job: job, Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: plain.Summary(), OOM: plain}}
	r, _ = EventReply(i18n.ZhEn, e)
	if strings.Contains(r.Text, "expandable_segments") || !strings.Contains(r.Text, "a smaller batch size") || r.Buttons != nil {
		t.Errorf("plain OOM alert:\n%s\nbuttons %+v", r.Text, r.Buttons)
	}
}

func TestOOMButtonFitsTelegram(t *testing.T) {
	job := mnistJob(false)
	run := &trainer.Run{ID: 1, Job: "mnist", Params: map[string]string{"batch_size": "1", "lr": "0.001", "precision": "fp32"}}
	if b := render.OOMButtons(i18n.ZhEn, job, run, nil); b != nil {
		t.Errorf("batch_size=1 cannot be halved, got %+v", b)
	}
	run.Params["batch_size"] = "256"
	run.Params["lr"] = "0.000123456789012345678901234567890123456789"
	if b := render.OOMButtons(i18n.ZhEn, job, run, nil); b != nil {
		t.Errorf("a command over 64 bytes got a button: %+v", b)
	}
	bs := &trainer.Job{Name: "j", Params: map[string]trainer.ParamSpec{"bs": {Type: trainer.ParamInt}}}
	if b := render.OOMButtons(i18n.ZhEn, bs, &trainer.Run{Params: map[string]string{"bs": "10"}}, nil); len(b) != 1 || b[0][0].Data != "开始 j bs=5" {
		t.Errorf("a job with bs: %+v", b)
	}
}

func TestEndReportTellsWhatOnOOMDid(t *testing.T) {
	job := mnistJob(true)
	at := time.Now()
	mk := func(outcome trainer.Outcome, bs string, retryOf int64, rt *trainer.Retry) chat.Reply {
		run := &trainer.Run{ID: 13, Job: "mnist", Outcome: outcome, StartedAt: at.Add(-time.Minute), Params: map[string]string{"batch_size": bs}, RetryOf: retryOf,
			Detail: "CUDA out of memory on GPU 0"}
		r, _ := EventReply(i18n.ZhEn, trainer.Event{Kind: trainer.EventEnded, Run: run, Job: job, At: at, Retry: rt})
		return r
	}
	r := mk(trainer.OutcomeOOM, "64", 0, &trainer.Retry{Param: "batch_size", Value: "64", Limit: 2, Next: "32"})
	if !strings.Contains(r.Text, "↻ on_oom: starting it again with batch_size=32 (retry 1 of 2)") || strings.Count(r.Text, "What to try") != 1 || r.Buttons != nil {
		t.Errorf("retrying:\n%s\n%+v", r.Text, r.Buttons)
	}
	r = mk(trainer.OutcomeOOM, "16", 12, &trainer.Retry{Param: "batch_size", Value: "16", Attempt: 2, Limit: 2, Refused: "on_oom gives up after 2 retries (retry = 2)"})
	if !strings.Contains(r.Text, "on_oom: no retry: on_oom gives up after 2 retries") || !strings.Contains(r.Text, "What to try") || len(r.Buttons) != 1 {
		t.Errorf("given up:\n%s", r.Text)
	}
	r = mk(trainer.OutcomeFinished, "16", 12, &trainer.Retry{Param: "batch_size", Value: "16", Attempt: 2, Limit: 2})
	if !strings.Contains(r.Text, "✅ batch_size=16 fit, after 2 out-of-memory retries (previous run #12)") {
		t.Errorf("fit:\n%s", r.Text)
	}
	r = mk(trainer.OutcomeOOM, "64", 0, nil) // no on_oom: advice and the button
	if !strings.Contains(r.Text, "What to try:\n• a smaller batch: 开始 mnist batch_size=32") || len(r.Buttons) != 1 {
		t.Errorf("no on_oom:\n%s", r.Text)
	}
}

// With a memory fit of the job's runs, the alert names the batch that fits
// instead of half, with the prediction and the runs it comes from.
func TestOOMAlertNamesTheFittedBatch(t *testing.T) {
	line := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 24.00 GiB of which 1.25 GiB is free."
	o, _ := trainer.DetectOOM(line)
	const gib = 1 << 30
	var runs []*trainer.Run
	for i, bs := range []int{16, 32, 40} {
		peak := int64(5*gib + float64(bs)*0.35*gib)
		runs = append(runs, &trainer.Run{ID: int64(3 + i), Job: "mnist", Outcome: trainer.OutcomeFinished, PeakGPUMem: &peak,
			Params: map[string]string{"batch_size": strconv.Itoa(bs), "lr": "0.01", "precision": "fp32"}})
	}
	run := &trainer.Run{ID: 9, Job: "mnist", Outcome: trainer.OutcomeOOM, Params: map[string]string{"batch_size": "64", "lr": "0.01", "precision": "fp32"}}
	fit := trainer.FitMemory(append(runs, run), mnistJob(false), "mnist", "batch_size", run, o.TotalBytes)
	e := trainer.Event{Kind: trainer.EventAlert, Run: run, Job: mnistJob(false), At: time.Now(), Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: o.Summary(), OOM: o}, Fit: &fit}
	r, _ := EventReply(i18n.ZhEn, e)
	// 90 % of 24 GiB is 21.6 GiB: (21.6 − 5) / 0.35 = 47.4.
	for _, want := range []string{
		"a smaller batch: batch_size=47 should fit: predicted 21.4 GiB of 24 GiB, from runs #3 #4 #5: 开始 mnist batch_size=47 lr=0.01",
		"gradient accumulation: steps of 47, to keep an effective batch near 64",
	} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("alert lacks %q:\n%s", want, r.Text)
		}
	}
	if len(r.Buttons) != 1 || r.Buttons[0][0].Label != render.RetryFitLabel || r.Buttons[0][0].Data != "开始 mnist batch_size=47 lr=0.01" {
		t.Errorf("buttons %+v", r.Buttons)
	}
}

// A rule's alert names the run, says the rule and links the chart; a
// dropped queue entry is told to its chat.
func TestRuleAndQueueReplies(t *testing.T) {
	run := &trainer.Run{ID: 5, Job: "mnist", Origin: "telegram:1"}
	r, ok := EventReply(i18n.ZhEn, trainer.Event{Kind: trainer.EventAlert, Run: run, Alert: &trainer.Alert{Kind: trainer.OutcomeRule, Text: "loss plateaued (rule: loss no_improvement for 20 steps): loss is 0.5"}})
	if !ok || r.Text != "📏 run #5 (mnist): loss plateaued (rule: loss no_improvement for 20 steps): loss is 0.5" || r.Alert != chat.AlertRule ||
		len(r.Buttons) != 1 || r.Buttons[0][0].Data != "/plot 5" || chat.SeverityOf(r) != chat.SeverityWarning {
		t.Errorf("rule alert %+v", r)
	}
	q := trainer.QueueEntry{ID: 4, Job: "gone"}
	r, ok = EventReply(i18n.ZhEn, trainer.Event{Kind: trainer.EventQueue, Run: &trainer.Run{Job: "gone", Origin: "telegram:2"}, Queue: &trainer.QueueNotice{Entry: q, Text: "queued request #4 (gone, by bob) was dropped: job gone is no longer configured"}})
	if !ok || !strings.HasPrefix(r.Text, "🗑 queued request #4") {
		t.Errorf("queue notice %+v", r)
	}
}

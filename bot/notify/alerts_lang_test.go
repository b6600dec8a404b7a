package notify

import (
	"math"
	"testing"
	"time"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// TestNaNAndStallAlertsInTheChatsLanguage: the NaN and stalled alerts say
// what happened in the chat's language, from the alert's parts; zh+en and
// en keep the supervisor's own text.
func TestNaNAndStallAlertsInTheChatsLanguage(t *testing.T) {
	run := &trainer.Run{ID: 7, Job: "bert", State: trainer.StateRunning}
	nan := trainer.Event{Kind: trainer.EventAlert, Run: run, At: time.Now(), Alert: &trainer.Alert{Kind: trainer.OutcomeNaN,
		Text: "loss is NaN for 3 points in a row (step 400)",
		NaN:  &trainer.NaNStreak{Metric: "loss", Value: math.NaN(), Count: 3, Step: 400}}}
	stall := trainer.Event{Kind: trainer.EventAlert, Run: run, At: time.Now(), Alert: &trainer.Alert{Kind: trainer.OutcomeStalled,
		Text:  "no output and no metric for 10m0s (stall_after 10m0s); the process is still alive",
		Stall: &trainer.Stall{Quiet: 10 * time.Minute, After: 10 * time.Minute}}}
	for _, c := range []struct {
		e    trainer.Event
		lang i18n.Lang
		want string
	}{
		{nan, i18n.Zh, "⚠️ 训练 #7（bert）的 loss 出现 NaN：loss 为 NaN，已连续 3 个点（第 400 步）"},
		{nan, i18n.ZhEn, "⚠️ run #7 (bert) has a NaN loss: loss is NaN for 3 points in a row (step 400)"},
		{nan, i18n.En, "⚠️ run #7 (bert) has a NaN loss: loss is NaN for 3 points in a row (step 400)"},
		{stall, i18n.Zh, "⏸ 训练 #7（bert）好像卡住了：已经 " + i18n.Zh.Duration(10*time.Minute) + " 没有输出也没有指标（stall_after " + i18n.Zh.Duration(10*time.Minute) + "）；进程仍在运行"},
		{stall, i18n.ZhEn, "⏸ run #7 (bert) looks stalled: no output and no metric for 10m0s (stall_after 10m0s); the process is still alive"},
	} {
		r, ok := EventReply(c.lang, c.e)
		if !ok || r.Text != c.want {
			t.Errorf("%s %s: got %q, want %q", c.lang, c.e.Alert.Kind, r.Text, c.want)
		}
	}
}

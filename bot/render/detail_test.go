package render

import (
	"math"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// A Chinese chat words the end's facts; English and zh+en show the record;
// a run without facts (recorded before them, or decided by its owner)
// shows its detail as recorded.
func TestEndDetailWordsTheFacts(t *testing.T) {
	one, code := 1, 0
	nan := &trainer.NaNStreak{Metric: "loss", Value: math.NaN(), Count: 3, Step: 7}
	for _, c := range []struct {
		f    trainer.EndFacts
		want string
	}{
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &one, StderrTail: []string{"ValueError: exit status 2"}}, "退出码 1；stderr 最后几行：\nValueError: exit status 2"},
		{trainer.EndFacts{Why: trainer.WhySignal, Signal: 11}, "被 SIGSEGV 终止"},
		{trainer.EndFacts{Why: trainer.WhyNaN, NaN: nan}, "loss 为 NaN，已连续 3 个点（第 7 步）"},
		{trainer.EndFacts{Why: trainer.WhyStoppedNaN, NaN: nan, StoppedBy: "trainbot (NaN loss)"}, "loss 为 NaN，已连续 3 个点（第 7 步）；已被 trainbot 停止"},
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &code, NaN: nan}, "退出码 0；loss 为 NaN，已连续 3 个点（第 7 步），之后恢复了"},
		{trainer.EndFacts{Why: trainer.WhyNoStart, StartError: `exec: "python9": executable file not found in $PATH`}, `无法启动：exec: "python9": executable file not found in $PATH`},
		{trainer.EndFacts{Why: trainer.WhyStrayKill, Signal: 9, StderrTail: []string{"bye"}}, "被一个不是 trainbot 发出的 SIGKILL 终止；内存 cgroup 在训练期间没有记录 OOM kill，所以是别的东西杀死了它；stderr 最后几行：\nbye"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopKilledGrace, Signal: 9}, "由 ann 停止（宽限期过后用 SIGKILL 终止）"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopExit, ExitCode: &one, Notes: []string{"3 B of output were not written"}}, "由 ann 停止（退出码 1）；3 B of output were not written"},
	} {
		f := c.f
		r := &trainer.Run{Detail: f.English(), End: &f}
		if got := EndDetail(i18n.Zh, r); got != c.want {
			t.Errorf("%s: got %q, want %q", f.Why, got, c.want)
		}
		for _, l := range []i18n.Lang{i18n.En, i18n.ZhEn} {
			if got := EndDetail(l, r); got != r.Detail {
				t.Errorf("%s in %s: got %q, want the record %q", f.Why, l, got, r.Detail)
			}
		}
		head, _, _ := strings.Cut(EndDetail(i18n.Zh, r), "stderr")
		for _, en := range []string{"exit status", "killed by", "points in a row", "then it recovered", "stopped by", "could not start", "something else"} {
			if strings.Contains(head, en) {
				t.Errorf("%s in Chinese: %q is left in %q", f.Why, en, head)
			}
		}
	}
	old := &trainer.Run{Detail: "exit status 3"}
	if got := EndDetail(i18n.Zh, old); got != "exit status 3" {
		t.Errorf("a run without facts: got %q, want its detail as recorded", got)
	}
}

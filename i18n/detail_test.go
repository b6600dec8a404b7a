package i18n

import "testing"

// TestDetail: the forms trainer's end classification writes, in Chinese;
// stderr and unknown parts as recorded; other languages untouched.
func TestDetail(t *testing.T) {
	for in, want := range map[string]string{
		"exit status 3; last stderr:\nTraceback: boom\nValueError: x is not positive": "退出码 3；stderr 最后几行：\nTraceback: boom\nValueError: x is not positive",
		"killed by SIGSEGV":                                                            "被 SIGSEGV 终止",
		"loss is NaN for 3 points in a row (step 400)":                                 "loss 为 NaN，已连续 3 个点（第 400 步）",
		"train_loss is +Inf for 5 points in a row (step 12); stopped by trainbot":      "train_loss 为 +Inf，已连续 5 个点（第 12 步）；已被 trainbot 停止",
		"exit status 0; loss is NaN for 3 points in a row (step 7), then it recovered": "退出码 0; loss 为 NaN，已连续 3 个点（第 7 步），之后恢复了",
		"could not start: exec: \"python9\": executable file not found in $PATH":       "无法启动：exec: \"python9\": executable file not found in $PATH",
		"killed by SIGKILL that trainbot did not send; the memory cgroup counts no OOM kill during the run, so something else killed it; last stderr:\nbye": "被一个不是 trainbot 发出的 SIGKILL 终止；内存 cgroup 在训练期间没有记录 OOM kill，所以是别的东西杀死了它；stderr 最后几行：\nbye",
		"cancelled outside trainbot": "cancelled outside trainbot",
		// stderr is the program's own: never changed, even when it looks like a form.
		"exit status 1; last stderr:\nexit status 2": "退出码 1；stderr 最后几行：\nexit status 2",
	} {
		if got := Zh.Detail(in); got != want {
			t.Errorf("Zh.Detail(%q)\n got %q\nwant %q", in, got, want)
		}
		for _, l := range []Lang{En, ZhEn} {
			if got := l.Detail(in); got != in {
				t.Errorf("%s.Detail(%q) = %q, want it as recorded", l, in, got)
			}
		}
	}
}

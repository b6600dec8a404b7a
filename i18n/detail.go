package i18n

// A run's recorded detail (Run.Detail, `runs --json`'s "detail") is the
// supervisor's English, kept so in the record. A Chinese chat words the
// facts the end was classified from (trainer.EndFacts) with these
// messages instead (bot/render's EndDetail); nothing reads the English back.
var (
	DetailExit       = Def(Msg{Key: "detail.exit", EN: "exit status %s", ZH: "退出码 %s"})
	DetailKilledBy   = Def(Msg{Key: "detail.killed_by", EN: "killed by %s", ZH: "被 %s 终止"})
	DetailStderr     = Def(Msg{Key: "detail.last_stderr", EN: "; last stderr:\n", ZH: "；stderr 最后几行：\n"})
	DetailRecovered  = Def(Msg{Key: "detail.recovered", EN: ", then it recovered", ZH: "，之后恢复了"})
	DetailStoppedNaN = Def(Msg{Key: "detail.stopped_nan", EN: "; stopped by trainbot", ZH: "；已被 trainbot 停止"})
	DetailNoStart    = Def(Msg{Key: "detail.no_start", EN: "could not start: %s", ZH: "无法启动：%s"})
	DetailStrayKill  = Def(Msg{Key: "detail.stray_kill", EN: "killed by SIGKILL that trainbot did not send; the memory cgroup counts no OOM kill during the run, so something else killed it",
		ZH: "被一个不是 trainbot 发出的 SIGKILL 终止；内存 cgroup 在训练期间没有记录 OOM kill，所以是别的东西杀死了它"})
	DetailStoppedBy   = Def(Msg{Key: "detail.stopped_by", EN: "stopped by %s", ZH: "由 %s 停止"})
	DetailKilledNow   = Def(Msg{Key: "detail.killed_now", EN: " (killed with SIGKILL: trainbot was shutting down and could not wait longer)", ZH: "（用 SIGKILL 终止：trainbot 正在关闭，不能再等）"})
	DetailKilledGrace = Def(Msg{Key: "detail.killed_grace", EN: " (killed with SIGKILL after the grace periods)", ZH: "（宽限期过后用 SIGKILL 终止）"})
	DetailEndedBy     = Def(Msg{Key: "detail.ended_by", EN: " (ended by %s)", ZH: "（被 %s 结束）"})
	DetailExitIn      = Def(Msg{Key: "detail.exit_in", EN: " (exit status %d)", ZH: "（退出码 %d）"})
	DetailSep         = Def(Msg{Key: "detail.sep", EN: "; ", ZH: "；"})
)

package i18n

// Run events pushed to chats (bot/notify).
var (
	Watching      = Def(Msg{Key: "event.watching", EN: "👁 watching run #%d: %s — %s", ZH: "👁 已接入训练 #%d：%s —— %s"})
	WatchingPID   = Def(Msg{Key: "event.watching_pid", EN: " (pid %d)", ZH: "（进程 %d）"})
	FromQueue     = Def(Msg{Key: "event.from_queue", EN: ", from the queue (request #%d, queued %s ago)", ZH: "，来自队列（排队 #%d，%s前排的队）"})
	StartedBy     = Def(Msg{Key: "event.started_by", EN: " (by %s)", ZH: "，由 %s 发起"})
	Reattached    = Def(Msg{Key: "event.reattached", EN: "🔗 re-attached to run #%d (%s) — running for %s", ZH: "🔗 重新接上训练 #%d（%s）—— 已运行 %s"})
	AlertLine     = Def(Msg{Key: "event.alert", EN: "%s run #%d (%s): %s", ZH: "%s 训练 #%d（%s）：%s"})
	NaNAlert      = Def(Msg{Key: "event.nan", EN: "⚠️ run #%d (%s) has a NaN loss: %s", ZH: "⚠️ 训练 #%d（%s）的 loss 出现 NaN：%s"})
	NaNStreak     = Def(Msg{Key: "event.nan_streak", EN: "%s is %s for %v points in a row (step %v)", ZH: "%s 为 %s，已连续 %v 个点（第 %v 步）"})
	StallDetail   = Def(Msg{Key: "event.stall_detail", EN: "no output and no metric for %s (stall_after %s); the process is still alive", ZH: "已经 %s 没有输出也没有指标（stall_after %s）；进程仍在运行"})
	StalledAlert  = Def(Msg{Key: "event.stalled", EN: "⏸ run #%d (%s) looks stalled: %s", ZH: "⏸ 训练 #%d（%s）好像卡住了：%s"})
	Unsupervised  = Def(Msg{Key: "event.unsupervised", EN: "❔ run #%d (%s): its supervisor (pid %d) died; %d process(es) of the run (process group %d) live on unsupervised, their output no longer read. The job stays locked while they live; /stop %d ends them.", Mix: "❔ run #%d (%s): its supervisor (pid %d) died; %d process(es) of the run (process group %d) live on unsupervised, their output no longer read. The job stays locked while they live; 停止 %d ends them.", ZH: "❔ 训练 #%d（%s）：它的监管进程（%d）死了；训练的 %d 个进程（进程组 %d）仍在无人监管地运行，输出不再被读取。它们活着时任务保持锁定；发送「停止 %d」结束它们。"})
	RuleAlert     = Def(Msg{Key: "event.rule", EN: "📏 run #%d (%s): %s", ZH: "📏 训练 #%d（%s）：%s"})
	ReportNone    = Def(Msg{Key: "report.none_active", EN: "⏰ %s: no run is active.", ZH: "⏰ %s：没有正在运行的训练。"})
	ReportLastOne = Def(Msg{Key: "report.last_one", EN: " The last one:\n", ZH: "最近一次：\n"})
	ReportHead    = Def(Msg{Key: "report.scheduled", EN: "⏰ %s report\n%s", ZH: "⏰ %s 报告\n%s"})
	SchedBusy     = Def(Msg{Key: "schedule.busy", EN: "⏰ %s: %s not started: run #%d (%s) is still running — %s. Send /stop to stop it, or let it finish.", Mix: "⏰ %s: %s not started: run #%d (%s) is still running — %s. Send 停止 to stop it, or let it finish.", ZH: "⏰ %s：%s 未启动：训练 #%d（%s）还在运行 —— %s。发送「停止」停掉它，或等它结束。"})
	SchedRefused  = Def(Msg{Key: "schedule.refused", EN: "⏰ %s: %s not started: %s", ZH: "⏰ %s：%s 未启动：%s"})
)

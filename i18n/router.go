package i18n

// The command router's answers and refusals.
var (
	NotAllowed = Def(Msg{Key: "router.not_allowed",
		EN:  "Sorry, you are not allowed to use this bot.\nYour user id is %s: the owner can add it to [auth] %s or %s.",
		Mix: "Sorry, you are not allowed to use this bot. 你没有权限。\nYour user id is %s: the owner can add it to [auth] %s or %s.",
		ZH:  "抱歉，你没有权限使用这个机器人。\n你的用户 ID 是 %s：管理员可以把它加到 [auth] 的 %s 或 %s 里。"})
	EditedNotRun = Def(Msg{Key: "router.edited_not_run",
		EN:  "✏️ An edited message is not carried out, so an edit never starts a second run. To run %q, send it as a new message.",
		Mix: "✏️ An edited message is not carried out (编辑过的消息不执行), so an edit never starts a second run. To run %q, send it as a new message.",
		ZH:  "✏️ 编辑过的消息不会执行，以免一次编辑再启动一次训练。要执行“%s”，请把它作为新消息重新发送。"})
	UnknownWord = Def(Msg{Key: "router.unknown_word",
		EN:  "I don't know %q. Send /help for the commands.",
		Mix: "I don't know %q. Send 帮助 (/help) for the commands.",
		ZH:  "我不认识“%s”。发送「帮助」查看命令。"})
	CutNote = Def(Msg{Key: "chat.cut_note",
		EN:  "\n… (%d more bytes not sent: see /log or the run log)",
		Mix: "\n… (%d more bytes not sent: see 日志 or the run log)",
		ZH:  "\n…（还有 %d 字节没有发出：发送「日志」查看，或看训练的日志文件）"})
	ChartNotSentNote = Def(Msg{Key: "chat.chart_not_sent",
		EN: "(chart %s not sent: %d bytes; on the host: %s)",
		ZH: "（图表 %s 没有发出：%d 字节；在主机上运行：%s）"})
	UnknownWordNear = Def(Msg{Key: "router.unknown_word_near",
		EN:  "I don't know %q. Did you mean %s? Send /help for the commands.",
		Mix: "I don't know %q. Did you mean %s? Send 帮助 (/help) for the commands.",
		ZH:  "我不认识“%s”。你是想发「%s」吗？发送「帮助」查看所有命令。"})
	ViewerRefused = Def(Msg{Key: "router.viewer",
		EN: "Viewers can look but not %s. Your user id is %s: the owner can add it to [auth] %s.",
		ZH: "查看者只能查看，不能执行「%s」。你的用户 ID 是 %s：管理员可以把它加到 [auth] 的 %s 里。"})
	ReadAs = Def(Msg{Key: "router.read_as", EN: "(read as: %s)", ZH: "（按「%s」执行）"})
	OK     = Def(Msg{Key: "router.ok", EN: "OK", ZH: "好的"})

	AuditUsage     = Def(Msg{Key: "router.audit_usage", EN: "/audit takes a number of entries, e.g. /audit 50", Mix: "审计 takes a number of entries, e.g. 审计 50", ZH: "「审计」后面跟条数，例如「审计 50」"})
	AuditFailed    = Def(Msg{Key: "router.audit_failed", EN: "Could not read the audit: %s", ZH: "读不了审计记录：%s"})
	SaveFailed     = Def(Msg{Key: "router.save_failed", EN: "Could not save that: %s", ZH: "保存失败：%s"})
	Subscribed     = Def(Msg{Key: "router.subscribed", EN: "Subscribed: this chat gets run progress and reports. Send /mute to stop them. Alerts always come.", Mix: "Subscribed: this chat gets run progress and reports. Send 静音 (/mute) to stop them. Alerts always come.", ZH: "已订阅：这个聊天会收到训练进度和报告。发送「静音」关闭。告警照常发送。"})
	Muted          = Def(Msg{Key: "router.muted", EN: "Muted: no more progress pushes here (alerts still come). Send /subscribe to turn them back on.", Mix: "Muted: no more progress pushes here (alerts still come). Send 订阅 (/subscribe) to turn them back on.", ZH: "已静音：这里不再推送进度（告警照常）。发送「订阅」重新打开。"})
	NoGPU          = Def(Msg{Key: "router.no_gpu", EN: "/gpu is not available in this version yet: GPU telemetry through NVML is still being built.", Mix: "显卡 (/gpu) is not available in this version yet: GPU telemetry through NVML is still being built.", ZH: "这个版本还没有「显卡」命令：通过 NVML 读取显卡状态的功能还在开发中。"})
	ViewerQueue    = Def(Msg{Key: "router.viewer_queue", EN: "Viewers can look at the queue (/queued) but not add to it. Your user id is %d: the owner can add it to [auth] operators.", Mix: "Viewers can look at the queue (队列) but not add to it. Your user id is %d: the owner can add it to [auth] operators.", ZH: "查看者可以用「队列」查看队列，但不能排队。你的用户 ID 是 %d：管理员可以把它加到 [auth] operators 里。"})
	NoteUsage      = Def(Msg{Key: "router.note_usage", EN: "/note takes a run and a text, e.g. /note 12 checkpointing on (/note 12 alone removes the note).", Mix: "备注 takes a run and a text, e.g. 备注 12 checkpointing on (备注 12 alone removes the note).", ZH: "「备注」后面跟训练编号和文字，例如「备注 12 开了梯度检查点」（只发「备注 12」会删除备注）。"})
	NoteBadRun     = Def(Msg{Key: "router.note_bad_run", EN: "%q is not a run number: /note N text, e.g. /note 12 checkpointing on.", Mix: "%q is not a run number: 备注 N text, e.g. 备注 12 checkpointing on.", ZH: "“%s”不是训练编号：写成「备注 编号 文字」，例如「备注 12 开了梯度检查点」。"})
	NoSuchRun      = Def(Msg{Key: "router.no_such_run", EN: "There is no run #%d.", ZH: "找不到训练 #%d。"})
	NoteFailed     = Def(Msg{Key: "router.note_failed", EN: "Could not save the note: %s", ZH: "备注保存失败：%s"})
	NoteRemoved    = Def(Msg{Key: "router.note_removed", EN: "📝 run #%d has no note now.", ZH: "📝 训练 #%d 的备注已删除。"})
	NoteSet        = Def(Msg{Key: "router.note_set", EN: "📝 run #%d: %s", ZH: "📝 训练 #%d：%s"})
	ParamTwice     = Def(Msg{Key: "router.param_twice", EN: "%s is given twice (%q and %q): give it once", ZH: "%s 给了两次（“%s”和“%s”）：只给一次"})
	ParamUnread    = Def(Msg{Key: "router.param_unread", EN: "I could not read %s: parameters are written name=value without spaces, e.g. /train batch_size=32", Mix: "I could not read %s: parameters are written name=value without spaces, e.g. 开始 batch_size=32", ZH: "看不懂 %s：参数写成 名字=值，中间不要空格，例如「开始 batch_size=32」"})
	NotStarted     = Def(Msg{Key: "router.not_started", EN: "Not started: %s.\nSend /jobs for the parameters.", Mix: "Not started: %s.\nSend 任务 (/jobs) for the parameters.", ZH: "未启动：%s。\n发送「任务」查看参数。"})
	NotStartedP    = Def(Msg{Key: "router.not_started_param", EN: "Not started: %s\nSend /jobs for the parameters.", Mix: "Not started: %s\nSend 任务 (/jobs) for the parameters.", ZH: "未启动：%s\n发送「任务」查看参数。"})
	NotQueuedP     = Def(Msg{Key: "router.not_queued_param", EN: "Not queued: %s\nSend /jobs for the parameters.", Mix: "Not queued: %s\nSend 任务 (/jobs) for the parameters.", ZH: "未排队：%s\n发送「任务」查看参数。"})
	NotQueued      = Def(Msg{Key: "router.not_queued", EN: "Not queued: %s.\nSend /jobs for the parameters.", Mix: "Not queued: %s.\nSend 任务 (/jobs) for the parameters.", ZH: "未排队：%s。\n发送「任务」查看参数。"})
	NotQueuedErr   = Def(Msg{Key: "router.not_queued_err", EN: "Not queued: %s.", ZH: "未排队：%s。"})
	ParamSep       = Def(Msg{Key: "router.param_sep", EN: "; ", ZH: "；"})
	BusyHint       = Def(Msg{Key: "router.busy_hint", EN: " Send /stop to stop it first, or %s to start this when it ends.", Mix: " Send 停止 to stop it first, or %s to start this when it ends.", ZH: "可以先发送「停止」停掉它，或发送「%s」，等它结束后自动开始。"})
	BusyRun        = Def(Msg{Key: "router.busy_run", EN: "Not started: run #%d (%s) is already running — %s.", ZH: "未启动：训练 #%d（%s）正在运行 —— %s。"})
	BusyOrphan     = Def(Msg{Key: "router.busy_orphan", EN: "Not started: run #%d (%s) is still alive, unsupervised — its supervisor (pid %d) died and %d process(es) of process group %d live on. /stop %d ends them.", Mix: "Not started: run #%d (%s) is still alive, unsupervised — its supervisor (pid %d) died and %d process(es) of process group %d live on. 停止 %d ends them.", ZH: "未启动：训练 #%d（%s）仍在无人监管地运行 —— 它的监管进程（%d）已退出，进程组 %[5]d 的 %[4]d 个进程还活着。发送「停止 %[6]d」结束它们。"})
	BusyOther      = Def(Msg{Key: "router.busy_other", EN: "Not started: %s.", ZH: "未启动：%s。"})
	CouldNotRun    = Def(Msg{Key: "router.could_not_start", EN: "❌ run #%d could not start: %v", ZH: "❌ 训练 #%d 启动失败：%v"})
	NotStartedE    = Def(Msg{Key: "router.not_started_err", EN: "Not started: %s.", ZH: "未启动：%s。"})
	NotStartedRaw  = Def(Msg{Key: "router.not_started_raw", EN: "Not started: %s", ZH: "未启动：%s"})
	ShuttingDown   = Def(Msg{Key: "router.shutting_down", EN: "Not started: trainbot is shutting down.", ZH: "未启动：trainbot 正在关闭。"})
	RunStarted     = Def(Msg{Key: "router.run_started", EN: "▶️ run #%d started: %s", ZH: "▶️ 训练 #%d 已开始：%s"})
	SlurmLine      = Def(Msg{Key: "router.slurm_line", EN: "\nSlurm job %s · log %s", ZH: "\nSlurm 作业 %s · 日志 %s"})
	PIDLine        = Def(Msg{Key: "router.pid_line", EN: "\npid %d · log %s", ZH: "\n进程 %d · 日志 %s"})
	HostPIDLine    = Def(Msg{Key: "router.host_pid_line", EN: "\non %s: pid %d · log %s there, copied to %s", ZH: "\n在 %s 上运行：进程 %d · 日志 %s，复制到本机 %s"})
	NotRunID       = Def(Msg{Key: "router.not_run_id", EN: "%q is not a run id", ZH: "“%s”不是训练编号"})
	NotRunIDDot    = Def(Msg{Key: "router.not_run_id_dot", EN: "%q is not a run id.", ZH: "“%s”不是训练编号。"})
	KeepsGoing     = Def(Msg{Key: "router.keeps_going", EN: "OK, the run keeps going.", ZH: "好的，训练继续。"})
	AlreadyEnded   = Def(Msg{Key: "router.already_ended", EN: "Run #%d already ended: %s.", ZH: "训练 #%d 已经结束：%s。"})
	Ambiguous      = Def(Msg{Key: "router.ambiguous", EN: "Several runs are active: %s. Say which: /stop 12", Mix: "Several runs are active: %s. Say which: 停止 12", ZH: "有几个训练在运行：%s。请指明是哪个，例如「停止 12」"})
	NothingToStop  = Def(Msg{Key: "router.nothing_to_stop", EN: "No run is active, nothing to stop.", ZH: "没有正在运行的训练，无需停止。"})
	ConfirmStop    = Def(Msg{Key: "router.confirm_stop", EN: "Stop run #%d (%s)? %s", ZH: "停止训练 #%d（%s）？%s"})
	EndedBefore    = Def(Msg{Key: "router.ended_before", EN: "Run #%d already ended.", ZH: "训练 #%d 已经结束。"})
	Stopping       = Def(Msg{Key: "router.stopping", EN: "⏹ stopping run #%d (%s): %s sent so it can save a checkpoint; you will get a message when it has exited.", ZH: "⏹ 正在停止训练 #%d（%s）：已发送 %s，让它能保存检查点；进程退出后会通知你。"})
	NoRunYet       = Def(Msg{Key: "router.no_run_yet", EN: "No run yet. Send /train to start one.", Mix: "No run yet. Send 开始 to start one.", ZH: "还没有训练。发送「开始」开始训练。"})
	HistoryFailed  = Def(Msg{Key: "router.history_failed", EN: "Could not read the history: %s", ZH: "读不了历史记录：%s"})
	LastOne        = Def(Msg{Key: "router.last_one", EN: "No run is active. The last one:\n", ZH: "没有正在运行的训练。最近一次：\n"})
	NothingToDraw  = Def(Msg{Key: "router.nothing_to_draw", EN: "No run yet, so nothing to draw. Send /train to start one.", Mix: "No run yet, so nothing to draw. Send 开始 to start one.", ZH: "还没有训练，没有可画的。发送「开始」开始训练。"})
	PlotTooMany    = Def(Msg{Key: "router.plot_too_many", EN: "/plot takes a run, a metric and memory, util or time, e.g. /plot 12 val_loss; %q is one word too many.", Mix: "画图 takes a run, a metric and memory, util or time, e.g. 画图 12 val_loss; %q is one word too many.", ZH: "「画图」后面跟训练编号、一个指标，以及「显存」「利用率」或「时间」之一，例如「画图 12 val_loss」；“%s”是多出来的。"})
	NoCharts       = Def(Msg{Key: "router.no_charts", EN: "Charts are not available: the history cannot give series.", ZH: "画不了图：历史记录里取不到数据序列。"})
	LogUsage       = Def(Msg{Key: "router.log_usage", EN: "/log takes a number of lines, e.g. /log 50", Mix: "日志 takes a number of lines, e.g. 日志 50", ZH: "「日志」后面跟行数，例如「日志 50」"})
	NoOutput       = Def(Msg{Key: "router.no_output", EN: "No run yet, so no output.", ZH: "还没有训练，没有输出。"})
	LogFailed      = Def(Msg{Key: "router.log_failed", EN: "Could not read the log of run #%d: %v", ZH: "读不了训练 #%d 的日志：%v"})
	NotOne         = Def(Msg{Key: "router.not_one", EN: "%s; %q is not one.", ZH: "%s；“%s”不是。"})
	PrintedNothing = Def(Msg{Key: "router.printed_nothing", EN: "Run #%d has printed nothing yet.", ZH: "训练 #%d 还没有输出。"})
	LastLines      = Def(Msg{Key: "router.last_lines", EN: "Last %d lines of run #%d:\n%s", One: "Last line of run #%[2]d:\n%[3]s", ZH: "训练 #%[2]d 的最后 %[1]d 行：\n%[3]s"})
	RunsUsage      = Def(Msg{Key: "router.runs_usage", EN: "/runs takes a number of runs, e.g. /runs 20", Mix: "历史 takes a number of runs, e.g. 历史 20", ZH: "「历史」后面跟条数，例如「历史 20」"})
	RecentRuns     = Def(Msg{Key: "router.recent_runs", EN: "Recent runs:\n", ZH: "最近的训练：\n"})
	CompareBadID   = Def(Msg{Key: "router.compare_bad_id", EN: "%q is not a run id.", ZH: "“%s”不是训练编号。"})
	CompareTooMany = Def(Msg{Key: "router.compare_too_many", EN: "/compare takes run ids and one metric, e.g. /compare 12 13 val_loss; %q is one word too many.", Mix: "对比 takes run ids and one metric, e.g. 对比 12 13 val_loss; %q is one word too many.", ZH: "「对比」后面跟训练编号和一个指标，例如「对比 12 13 val_loss」；“%s”是多出来的。"})
	CompareTwo     = Def(Msg{Key: "router.compare_two", EN: "/compare takes two or more run ids, e.g. /compare 12 13.", Mix: "对比 takes two or more run ids, e.g. 对比 12 13.", ZH: "「对比」至少要两个训练编号，例如「对比 12 13」。"})
	CompareMost    = Def(Msg{Key: "router.compare_most", EN: "/compare compares at most %d runs at once.", Mix: "对比 compares at most %d runs at once.", ZH: "「对比」一次最多比较 %d 次训练。"})
	NoCompare      = Def(Msg{Key: "router.no_compare", EN: "Comparisons are not available: the history cannot give series.", ZH: "对比不了：历史记录里取不到数据序列。"})
	CompareEither  = Def(Msg{Key: "router.compare_either", EN: "/compare draws either a metric or memory; %q and memory together are one too many.", Mix: "对比 draws either a metric or memory; %q and 显存 together are one too many.", ZH: "「对比」只画一个指标或显存；“%s”和「显存」不能同时给。"})
	FitArgs        = Def(Msg{Key: "router.fit_args", EN: "/fit takes a job and a parameter, e.g. /fit mnist batch_size.", Mix: "适配 takes a job and a parameter, e.g. 适配 mnist batch_size.", ZH: "「适配」后面跟任务和参数，例如「适配 mnist batch_size」。"})
	FitNeither     = Def(Msg{Key: "router.fit_neither", EN: "/fit takes a job and a parameter; %q is neither a job nor the only parameter.", Mix: "适配 takes a job and a parameter; %q is neither a job nor the only parameter.", ZH: "「适配」后面跟任务和参数；“%s”既不是任务，也不是唯一的参数。"})
	FitWhichJob    = Def(Msg{Key: "router.fit_which_job", EN: "Which job? /fit JOB [param], with one of: %s", Mix: "Which job? 适配 JOB [param], with one of: %s", ZH: "哪个任务？写成「适配 任务 [参数]」，任务可以是：%s"})
	FitNoParam     = Def(Msg{Key: "router.fit_no_param", EN: "%s has no numeric parameter %q.", ZH: "%s 没有数值参数“%s”。"})
	NoFit          = Def(Msg{Key: "router.no_fit", EN: "/fit is not available: the history cannot give the job's runs.", Mix: "适配 is not available: the history cannot give the job's runs.", ZH: "「适配」用不了：历史记录里取不到这个任务的训练。"})
)

// The queue (排队, 队列, 取消).
var (
	Queued         = Def(Msg{Key: "queue.queued", EN: "🕒 queued #%d: %s", ZH: "🕒 已排队 #%d：%s"})
	QueuedTail     = Def(Msg{Key: "queue.queued_tail", EN: " — position %d; it starts when the job's lock is free, and this chat is told. /cancel %d removes it.", Mix: " — position %d; it starts when the job's lock is free, and this chat is told. 取消 %[2]d (/cancel %[2]d) removes it.", ZH: " —— 排在第 %d 位；任务空出来就开始，并在这个聊天里通知。发送「取消 %d」撤销。"})
	QueueFailed    = Def(Msg{Key: "queue.failed", EN: "Could not read the queue: %s", ZH: "读不了队列：%s"})
	QueueEmpty     = Def(Msg{Key: "queue.empty", EN: "The queue is empty. When a job is busy, /train offers [Queue]; /queue [job] [k=v…] queues a start.", Mix: "The queue is empty. When a job is busy, 开始 offers [排队 Queue]; 排队 [job] [k=v…] queues a start.", ZH: "队列是空的。任务忙时，「开始」会给出 [排队] 按钮；发送「排队 [任务] [参数=值…]」排一次训练。"})
	QueueHead      = Def(Msg{Key: "queue.head", EN: "Queue (oldest first):\n", ZH: "队列（最早的在前）：\n"})
	QueueLine      = Def(Msg{Key: "queue.line", EN: " · position %d · by %s · %s ago", ZH: " · 第 %d 位 · %s 发起 · %s前"})
	CancelUsage    = Def(Msg{Key: "queue.cancel_usage", EN: "/cancel takes a queue entry: /cancel N (/queued lists them).", Mix: "取消 takes a queue entry: 取消 N (队列 lists them).", ZH: "「取消」后面跟排队编号：「取消 编号」（发送「队列」查看编号）。"})
	CancelBadID    = Def(Msg{Key: "queue.cancel_bad_id", EN: "%q is not a queue entry number: /cancel N (/queued lists them).", Mix: "%q is not a queue entry number: 取消 N (队列 lists them).", ZH: "“%s”不是排队编号：写成「取消 编号」（发送「队列」查看编号）。"})
	CancelNone     = Def(Msg{Key: "queue.cancel_none", EN: "There is no queue entry #%d (it may have started already). /queued lists the queue.", Mix: "There is no queue entry #%d (it may have started already). 队列 lists the queue.", ZH: "找不到排队 #%d（可能已经开始了）。发送「队列」查看队列。"})
	CancelNotYours = Def(Msg{Key: "queue.cancel_not_yours", EN: "Queue entry #%d is %s's: only they or an operator may cancel it.", ZH: "排队 #%d 是 %s 的：只有本人或操作员能取消。"})
	CancelFailed   = Def(Msg{Key: "queue.cancel_failed", EN: "Could not cancel: %s", ZH: "取消失败：%s"})
	CancelDone     = Def(Msg{Key: "queue.cancel_done", EN: "🗑 queue entry #%d (%s) removed.", ZH: "🗑 排队 #%d（%s）已取消。"})
)

// 关注: runs trainbot did not start.
var (
	WatchOff        = Def(Msg{Key: "watch.off", EN: "/watch is off: the config's [watch] dirs names no directory whose logs a chat may watch. On the host: trainbot watch%s --log FILE [--pid PID].", Mix: "关注 is off: the config's [watch] dirs names no directory whose logs a chat may watch. On the host: trainbot watch%s --log FILE [--pid PID].", ZH: "「关注」没有启用：配置的 [watch] dirs 没有列出可以从聊天里接入的日志目录。在主机上可以运行：trainbot watch%s --log 日志文件 [--pid 进程号]。"})
	WatchUsage      = Def(Msg{Key: "watch.usage", EN: "/watch takes a log file and, optionally, the pid that writes it: /watch /data/exp1/train.log 12345", Mix: "关注 takes a log file and, optionally, the pid that writes it: 关注 /data/exp1/train.log 12345", ZH: "「关注」后面跟日志文件，还可以跟写它的进程号，例如「关注 /data/exp1/train.log 12345」"})
	NotWatched      = Def(Msg{Key: "watch.not_watched", EN: "Not watched: %s", ZH: "未接入：%s"})
	NotWatchedPID   = Def(Msg{Key: "watch.not_pid", EN: "Not watched: %q is not a process id.", ZH: "未接入：“%s”不是进程号。"})
	WatchingRun     = Def(Msg{Key: "watch.watching", EN: "👁 watching run #%d (%s): %s", ZH: "👁 已接入训练 #%d（%s），开始跟踪：%s"})
	WatchEndsPID    = Def(Msg{Key: "watch.ends_pid", EN: "; it ends when pid %d exits", ZH: "；进程 %d 退出时结束"})
	WatchEndsStop   = Def(Msg{Key: "watch.ends_stop", EN: "; with no pid it ends on /stop %d", Mix: "; with no pid it ends on 停止 %d", ZH: "；没有给进程号，发送「停止 %d」结束跟踪"})
	WatchKillAsk    = Def(Msg{Key: "watch.kill_ask", EN: "Kill the watched process of run #%d (%s, pid %d)? trainbot did not start it. SIGINT, then SIGTERM and SIGKILL.", ZH: "结束训练 #%d（%s，进程 %d）的进程？它不是 trainbot 启动的。会依次发送 SIGINT、SIGTERM 和 SIGKILL。"})
	WatchGone       = Def(Msg{Key: "watch.gone", EN: "Run #%d is no longer watched.", ZH: "训练 #%d 已经不再跟踪。"})
	WatchKilling    = Def(Msg{Key: "watch.killing", EN: "⏹ stopping the watched process of run #%d (pid %d): SIGINT sent; you will get a message when it has exited.", ZH: "⏹ 正在停止训练 #%d 的进程（进程 %d）：已发送 SIGINT，退出后会通知你。"})
	WatchUnwatched  = Def(Msg{Key: "watch.unwatched", EN: "⏏️ run #%d (%s) is no longer watched.", ZH: "⏏️ 训练 #%d（%s）已不再跟踪。"})
	WatchProcGoesOn = Def(Msg{Key: "watch.process_goes_on", EN: " Its process (pid %d) goes on; /stop %d kill stops it (asks first).", Mix: " Its process (pid %d) goes on; 停止 %d kill stops it (asks first).", ZH: "它的进程（%d）继续运行；发送「停止 %d kill」结束它（会先确认）。"})
)

// A start's GPUs.
var (
	GPUQueueHint = Def(Msg{Key: "gpu.queue_hint", EN: "\nSend %s to start it as soon as its GPUs are free.", ZH: "\n发送「%s」，显卡一空出来就开始。"})
	GPULine      = Def(Msg{Key: "gpu.line", EN: "\nGPUs: %s", ZH: "\n显卡：%s"})
	GPUNone      = Def(Msg{Key: "gpu.none", EN: "Not started: %s", ZH: "未启动：%s"})
)

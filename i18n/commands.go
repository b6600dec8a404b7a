package i18n

// One line of help per command (帮助 and /help list them; a viewer's
// refusal names what they may not do).
var (
	HelpTrain      = Def(Msg{Key: "help.train", EN: "start a run", ZH: "开始训练"})
	HelpStop       = Def(Msg{Key: "help.stop", EN: "stop the active run", ZH: "停止正在运行的训练"})
	HelpStatus     = Def(Msg{Key: "help.status", EN: "step, epoch, loss, speed, ETA, elapsed", ZH: "步数、epoch、loss、速度、预计剩余和已用时间"})
	HelpPlot       = Def(Msg{Key: "help.plot", EN: "loss and memory charts", ZH: "loss 曲线和显存/内存图"})
	HelpGPU        = Def(Msg{Key: "help.gpu", EN: "GPU table and which process holds memory", ZH: "显卡状态，以及哪个进程占着显存"})
	HelpLog        = Def(Msg{Key: "help.log", EN: "last n lines of output", ZH: "输出的最后 n 行"})
	HelpRuns       = Def(Msg{Key: "help.runs", EN: "recent runs with outcome and final loss", ZH: "最近的训练：结果和最终 loss"})
	HelpCompare    = Def(Msg{Key: "help.compare", EN: "compare runs: table, loss and memory overlaid", ZH: "对比训练：表格，以及叠在一起的 loss 和显存/内存曲线"})
	HelpFit        = Def(Msg{Key: "help.fit", EN: "which batch size fits, from past runs' peak memory", ZH: "按以往训练的显存峰值，估算放得下的 batch size"})
	HelpQueue      = Def(Msg{Key: "help.queue", EN: "queue a start for when the job's run ends (/queue alone lists the queue)", ZH: "排队：当前训练结束后再开始（只发「排队」查看队列）"})
	HelpQueued     = Def(Msg{Key: "help.queued", EN: "the queue: waiting starts, their positions and who asked", ZH: "查看队列：等待中的训练、位置和发起人"})
	HelpCancel     = Def(Msg{Key: "help.cancel", EN: "remove queue entry N (the one who queued it or an operator)", ZH: "撤销第 N 个排队（排队的人或操作员可以撤销）"})
	HelpWatch      = Def(Msg{Key: "help.watch", EN: "watch a run trainbot did not start: its log (in [watch] dirs) and its process", ZH: "接入不是 trainbot 启动的训练，跟踪它的日志（在 [watch] 目录下）和进程"})
	HelpNote       = Def(Msg{Key: "help.note", EN: "note on run N (shown in runs and compare); /train … note text notes a new run", Mix: "note on run N (shown in 历史, runs and 对比); 开始 … 备注 text notes a new run", ZH: "给训练 #N 加备注（显示在「历史」和「对比」里）；「开始 … 备注 文字」给新训练加备注"})
	HelpJobs       = Def(Msg{Key: "help.jobs", EN: "configured jobs and their parameters", ZH: "配置的任务和参数"})
	HelpAudit      = Def(Msg{Key: "help.audit", EN: "who sent which command, allowed or refused, and the run it touched", ZH: "操作审计：谁发了什么命令、是否允许、涉及哪次训练"})
	HelpSubscribe  = Def(Msg{Key: "help.subscribe", EN: "progress pushes on for this chat", ZH: "在这个聊天里打开进度推送"})
	HelpNotifyFree = Def(Msg{Key: "help.notifyfree", EN: "one message when n GPUs (default 1) with that much free memory each are free here (for a day; off cancels)", ZH: "这台主机空出 n 块（默认 1 块）空闲显存足够的显卡时通知一次（最多等一天；「通知空闲 关」取消）"})
	HelpMute       = Def(Msg{Key: "help.mute", EN: "progress pushes off for this chat", ZH: "在这个聊天里关闭进度推送"})
	HelpHelp       = Def(Msg{Key: "help.help", EN: "this table", ZH: "这张表"})

	HelpTitle   = Def(Msg{Key: "help.title", EN: "trainbot commands (with or without /):", Mix: "trainbot commands (中文 or English, with or without /):", ZH: "trainbot 命令（中文或英文，带不带 / 都行）："})
	HelpExample = Def(Msg{Key: "help.example", EN: "Example: /train batch_size=32 lr=3e-4", Mix: "Example: 开始 batch_size=32 lr=3e-4", ZH: "例如：「开始 batch_size=32 lr=3e-4」"})
)

package i18n

// 存档 and 调参: knobs on a live run.
var (
	HelpCheckpoint = Def(Msg{Key: "help.checkpoint", EN: "save a checkpoint now (sends the job's signals.checkpoint; says which file appeared)", ZH: "让训练立即保存 checkpoint（发送任务的 signals.checkpoint，并告诉你新出现的文件）"})
	HelpSet        = Def(Msg{Key: "help.set", EN: "change a declared live value of a run, e.g. /set lr=1e-4", Mix: "change a declared live value of a run, e.g. 调参 lr=1e-4", ZH: "修改正在运行的训练的 live 参数，例如「调参 lr=1e-4」"})

	KnobNothing  = Def(Msg{Key: "knob.nothing", EN: "No run is active: there is nothing to send it to.", ZH: "没有正在运行的训练，无从发送。"})
	KnobNoSignal = Def(Msg{Key: "knob.no_signal",
		EN:  "Job %s has no checkpoint signal, so /checkpoint cannot ask its runs to save. In its [[jobs]] entry, say where it saves and the signal it saves on:\ncheckpoint = \"ckpt/*.pt\"\n[jobs.signals]\ncheckpoint = \"SIGUSR1\"\nand have the script save when the signal arrives (docs/jobs.md: Knobs on a live run).",
		Mix: "Job %s has no checkpoint signal, so 存档 cannot ask its runs to save. In its [[jobs]] entry, say where it saves and the signal it saves on:\ncheckpoint = \"ckpt/*.pt\"\n[jobs.signals]\ncheckpoint = \"SIGUSR1\"\nand have the script save when the signal arrives (docs/jobs.md: Knobs on a live run).",
		ZH:  "任务 %s 没有配置存档信号，「存档」没法让它保存。在它的 [[jobs]] 里写上保存位置和保存用的信号：\ncheckpoint = \"ckpt/*.pt\"\n[jobs.signals]\ncheckpoint = \"SIGUSR1\"\n并让脚本收到信号时保存（见文档 docs/jobs.md）。"})
	KnobNoLive = Def(Msg{Key: "knob.no_live",
		EN: "Job %s declares no live values, so nothing can be changed while it runs. Declare them in its [[jobs]] entry, e.g.\n[jobs.live]\nlr = { type = \"float\", min = 0, max = 1 }\nand have the script read $TRAINBOT_CONTROL_FILE (docs/jobs.md: Knobs on a live run).",
		ZH: "任务 %s 没有声明 live 参数，运行中没有可改的值。在它的 [[jobs]] 里声明，例如\n[jobs.live]\nlr = { type = \"float\", min = 0, max = 1 }\n并让脚本读取 $TRAINBOT_CONTROL_FILE（见文档 docs/jobs.md）。"})
	KnobOnHost = Def(Msg{Key: "knob.on_host",
		EN: "Run #%d runs on host %s: %s does not reach runs on other hosts yet. Nothing was sent.",
		ZH: "训练 #%d 在主机 %s 上运行：「%s」暂时不支持其他主机上的训练，什么也没有发送。"})
	KnobWatched = Def(Msg{Key: "knob.watched",
		EN: "Run #%d is watched, not started by trainbot: %s cannot reach it. Nothing was sent.",
		ZH: "训练 #%d 是接入的外部训练，不是 trainbot 启动的：「%s」管不到它，什么也没有发送。"})
	KnobNoOwner = Def(Msg{Key: "knob.no_owner",
		EN: "Run #%d has no supervisor trainbot can reach (it lost its supervisor, or was restored from its directory): %s sent nothing.",
		ZH: "训练 #%d 没有 trainbot 能联系到的监管进程（监管进程已退出，或是从目录恢复的）：「%s」什么也没有发送。"})
	KnobNoSlurm = Def(Msg{Key: "knob.no_slurm",
		EN: "Slurm did not pass the signal to run #%d: %s",
		ZH: "Slurm 没有把信号发给训练 #%d：%s"})
	KnobNoShim = Def(Msg{Key: "knob.no_shim",
		EN: "The supervisor of run #%d did not send the signal: %s",
		ZH: "训练 #%d 的监管进程没有发出信号：%s"})

	CheckpointSaved = Def(Msg{Key: "checkpoint.saved",
		EN: "💾 Run #%d (%s): %s sent; new checkpoint %s (%s) %s after it.",
		ZH: "💾 训练 #%d（%s）：已发送 %s；新 checkpoint %s（%s），发送后 %s 出现。"})
	CheckpointSent = Def(Msg{Key: "checkpoint.sent",
		EN: "💾 Run #%d (%s): %s sent. I will say which file matching %s appears (waiting up to %s).",
		ZH: "💾 训练 #%d（%s）：已发送 %s。匹配 %s 的新文件出现后会告诉你（最多等 %s）。"})
	CheckpointUnwatched = Def(Msg{Key: "checkpoint.unwatched",
		EN: "💾 Run #%d (%s): %s sent. Job %s has no checkpoint key, so I cannot tell when the file appears: add checkpoint = \"ckpt/*.pt\" (where it saves) to the job.",
		ZH: "💾 训练 #%d（%s）：已发送 %s。任务 %s 没有配置 checkpoint，我看不到文件何时出现：在任务里加上 checkpoint = \"ckpt/*.pt\"（保存的位置）。"})
	CheckpointNotSeen = Def(Msg{Key: "checkpoint.not_seen",
		EN: "💾 Run #%d (%s): %s sent, but no new file matching %s appeared within %s. Does the script save when it gets %s?",
		ZH: "💾 训练 #%d（%s）：已发送 %s，但 %s内没有出现匹配 %s 的新文件。脚本收到 %s 时会保存吗？"})

	SetUsage = Def(Msg{Key: "set.usage",
		EN:  "/set takes name=value, e.g. /set lr=1e-4 (or /set 12 lr=1e-4 for run 12). Live values of %s: %s.",
		Mix: "调参 takes name=value, e.g. 调参 lr=1e-4 (or 调参 12 lr=1e-4 for run 12). Live values of %s: %s.",
		ZH:  "「调参」后面跟 名字=值，例如「调参 lr=1e-4」（或「调参 12 lr=1e-4」指定训练 #12）。%s 的 live 参数：%s。"})
	SetDone = Def(Msg{Key: "set.done",
		EN: "🎛 Run #%d (%s): %s written to its control file (version %d); %s.",
		ZH: "🎛 训练 #%d（%s）：%s 已写入控制文件（第 %d 版）；%s。"})
	SetSignalled = Def(Msg{Key: "set.signalled", EN: "%s sent so the script reads it now; the chart marks the change", ZH: "已发送 %s，让脚本立即读取；图上会标出这次修改"})
	SetPolled    = Def(Msg{Key: "set.polled", EN: "the job has no signals.control, so the script reads it when it next looks; the chart marks the change", ZH: "任务没有配置 signals.control，脚本下次查看时才会读到；图上会标出这次修改"})
	SetNotSent   = Def(Msg{Key: "set.not_sent", EN: "but the signal did not reach it: %s", ZH: "但信号没有送到：%s"})
)

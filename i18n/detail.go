package i18n

// A run's recorded detail (Run.Detail, `runs --json`'s "detail") is the
// supervisor's English, kept so in the record. A Chinese chat words the
// facts the end was classified from (trainer.EndFacts) with these
// messages instead (bot/render's EndDetail); nothing reads the English back.
var (
	DetailHostReboot = Def(Msg{Key: "detail.host_reboot", EN: "the host rebooted while it ran (boot id %s at the start, %s now)", ZH: "训练期间主机重启了（开始时 boot id 为 %s，现在为 %s）"})
	DetailBootedAt   = Def(Msg{Key: "detail.booted_at", EN: "; up since %s", ZH: "；本次开机于 %s"})
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

// The ends a run's owner decided (Slurm's states, a watched process), the
// ends nobody could tell (interrupted), and the parts of an out-of-memory
// end: trainer.EndFacts's English, message by message.
var (
	DetailStoppedForNaN = Def(Msg{Key: "detail.stopped_for_nan", EN: "stopped by %s for a NaN loss", ZH: "loss 为 NaN，由 %s 停止"})
	DetailRunDirTaken   = Def(Msg{Key: "detail.run_dir_taken", EN: "its directory %s already exists: another trainbot with another database uses this data directory? (the next run takes a higher id)",
		ZH: "它的目录 %s 已经存在：是否有另一个使用别的数据库的 trainbot 也在用这个数据目录？（下一个训练会用更大的编号）"})
	DetailParen = Def(Msg{Key: "detail.paren", EN: " (%s)", ZH: "（%s）"})

	DetailSlurmSignal    = Def(Msg{Key: "detail.slurm_signal", EN: "killed by signal %d (Slurm state FAILED%s)", ZH: "被信号 %d 终止（Slurm 状态 FAILED%s）"})
	DetailSlurmExit      = Def(Msg{Key: "detail.slurm_exit", EN: "exit code %d (Slurm state FAILED%s)", ZH: "退出码 %d（Slurm 状态 FAILED%s）"})
	DetailSlurmNodeFail  = Def(Msg{Key: "detail.slurm_node_fail", EN: "node failure (Slurm state NODE_FAIL%s)", ZH: "节点故障（Slurm 状态 NODE_FAIL%s）"})
	DetailSlurmPreempted = Def(Msg{Key: "detail.slurm_preempted", EN: "preempted (Slurm state PREEMPTED%s)", ZH: "被抢占（Slurm 状态 PREEMPTED%s）"})
	DetailSlurmTimeout   = Def(Msg{Key: "detail.slurm_timeout", EN: "time limit %s reached (Slurm state TIMEOUT)", ZH: "达到时间限制 %s（Slurm 状态 TIMEOUT）"})
	DetailSlurmOOM       = Def(Msg{Key: "detail.slurm_oom", EN: "out of memory (Slurm state OUT_OF_MEMORY%s)", ZH: "内存不足（Slurm 状态 OUT_OF_MEMORY%s）"})
	DetailSlurmState     = Def(Msg{Key: "detail.slurm_state", EN: "Slurm state %s", ZH: "Slurm 状态 %s"})
	DetailSlurmOn        = Def(Msg{Key: "detail.slurm_on", EN: " on %s", ZH: "，节点 %s"})
	DetailSlurmOutside   = Def(Msg{Key: "detail.slurm_outside", EN: "cancelled outside trainbot", ZH: "在 trainbot 之外被取消"})
	DetailSlurmCancelled = Def(Msg{Key: "detail.slurm_cancelled", EN: " (Slurm job cancelled)", ZH: "（Slurm 作业已取消）"})
	DetailSlurmForgot    = Def(Msg{Key: "detail.slurm_forgot", EN: "Slurm no longer knows job %s%s: it ended while no trainbot watched it, longer ago than the cluster's MinJobAge, on a cluster without accounting; how it ended is unknown",
		ZH: "Slurm 已不知道作业 %s%s：它在没有 trainbot 跟踪时结束，早于集群的 MinJobAge，而集群没有作业记账；无从得知它是怎么结束的"})

	DetailSupervisorGone = Def(Msg{Key: "detail.supervisor_gone", EN: "the run's supervisor (pid %d) ended without recording how the run ended", ZH: "训练的监管进程（%d）已退出，没有记录训练是怎么结束的"})
	DetailOrphansLived   = Def(Msg{Key: "detail.orphans_lived", EN: "; its processes (group %d) lived on unsupervised until %s", ZH: "；它的进程（进程组 %d）在无人监管下一直运行到 %s"})
	DetailOrphansStopped = Def(Msg{Key: "detail.orphans_stopped", EN: ", stopped by %s (%s)", ZH: "，由 %s 停止（%s）"})
	DetailTrainbotGone   = Def(Msg{Key: "detail.trainbot_gone", EN: "trainbot (pid %d) stopped while the run was active; found at the next start", ZH: "训练进行时 trainbot（pid %d）停止了；在它下次启动时发现"})
	DetailLogWritten     = Def(Msg{Key: "detail.log_written", EN: "; its log was last written %s", ZH: "；日志最后写入于 %s"})
	DetailStillAlive     = Def(Msg{Key: "detail.still_alive", EN: "; its process group %d is still alive, unsupervised", ZH: "；它的进程组 %d 仍在运行，无人监管"})
	DetailWatchEnded     = Def(Msg{Key: "detail.watch_ended", EN: "the watch ended", ZH: "跟踪已结束"})

	DetailUnwatched  = Def(Msg{Key: "detail.unwatched", EN: "no longer watched: stopped by %s", ZH: "不再跟踪：由 %s 停止"})
	DetailGoesOn     = Def(Msg{Key: "detail.goes_on", EN: "; the process (pid %d) goes on", ZH: "；进程（pid %d）继续运行"})
	DetailSignalled  = Def(Msg{Key: "detail.signalled", EN: " (the watched process, pid %d, was signalled)", ZH: "（已向跟踪的进程 %d 发送信号）"})
	DetailWatchOOM   = Def(Msg{Key: "detail.watch_oom", EN: "the process (pid %d) exited; its log's last lines say: %s", ZH: "进程（pid %d）已退出；日志最后几行说：%s"})
	DetailWatchError = Def(Msg{Key: "detail.watch_error", EN: "the process (pid %d) exited; its log ends with an error: %s", ZH: "进程（pid %d）已退出；日志以一个错误结尾：%s"})
	DetailWatchExit  = Def(Msg{Key: "detail.watch_exit", EN: "the process (pid %d) exited; its exit status is unknown (it is not trainbot's child)", ZH: "进程（pid %d）已退出；退出码未知（它不是 trainbot 的子进程）"})

	DetailThenStopped   = Def(Msg{Key: "detail.then_stopped", EN: "; then stopped by %s", ZH: "；之后由 %s 停止"})
	DetailOOMKills      = Def(Msg{Key: "detail.oom_kills", EN: " (the memory cgroup counts %d OOM kill(s) during the run)", ZH: "（内存 cgroup 在训练期间记录了 %d 次 OOM kill）"})
	DetailOOMKillLikely = Def(Msg{Key: "detail.oom_kill_likely", EN: "killed by SIGKILL that trainbot did not send: most likely the kernel's OOM killer (host memory; the cgroup's OOM count is not readable here)",
		ZH: "被一个不是 trainbot 发出的 SIGKILL 终止：很可能是内核的 OOM killer（主机内存；这里读不到 cgroup 的 OOM 计数）"})
	DetailListSep  = Def(Msg{Key: "detail.list_sep", EN: ", ", ZH: "，"})
	PeakHowSampled = Def(Msg{Key: "peak.how_sampled", EN: "largest sample", ZH: "采样中的最大值"})
	PeakHowMain    = Def(Msg{Key: "peak.how_main", EN: "VmHWM of its process, exact", ZH: "其进程的 VmHWM，精确值"})
	PeakHowTreeSum = Def(Msg{Key: "peak.how_tree_sum", EN: "sum of its processes' VmHWM, an upper bound", ZH: "其各进程 VmHWM 之和，是上限"})
	PeakHowCgroup  = Def(Msg{Key: "peak.how_cgroup", EN: "cgroup memory.peak", ZH: "cgroup 的 memory.peak"})
)

// An end's remarks (trainer.EndNotes).
var (
	DetailDropped      = Def(Msg{Key: "detail.dropped", EN: "%s of output were not written to the log (%s)", ZH: "有 %s 的输出没有写入日志（%s）"})
	DetailSlowDisk     = Def(Msg{Key: "detail.slow_disk", EN: "the disk did not keep up", ZH: "磁盘跟不上"})
	DetailLogCut       = Def(Msg{Key: "detail.log_cut", EN: "the log passed max_log_bytes (%s): %s of older output after its first %s were freed", ZH: "日志超过了 max_log_bytes（%s）：释放了 %s 较早的输出（保留开头的 %s）"})
	DetailSurvivors    = Def(Msg{Key: "detail.survivors", EN: "%d process(es) of the run survived SIGKILL", ZH: "训练有 %d 个进程在 SIGKILL 之后仍然存活"})
	DetailUnseenRule   = Def(Msg{Key: "detail.unseen_rule", EN: "alert rule %q watched %s, %s", ZH: "告警规则 %q 监视 %s，%s"})
	DetailNeverPrinted = Def(Msg{Key: "detail.never_printed", EN: "which the run never printed", ZH: "但训练从未输出它"})
	DetailNotMeasured  = Def(Msg{Key: "detail.not_measured", EN: "which could not be measured (no step was printed)", ZH: "但它无法测量（没有输出过步数）"})
	DetailNoNVML       = Def(Msg{Key: "detail.no_nvml", EN: "which NVML never reported for the run's processes", ZH: "但 NVML 从未报告训练进程的这个值"})
	DetailMetricNames  = Def(Msg{Key: "detail.metric_names", EN: "the output named more than %d metrics: points of further metric names were not recorded (%s)", ZH: "输出中的指标名超过了 %d 个：更多指标名的点没有记录（%s）"})
	DetailLogHasThem   = Def(Msg{Key: "detail.log_has_them", EN: "the log has them", ZH: "日志里有它们"})
	DetailLogHasUncut  = Def(Msg{Key: "detail.log_has_uncut", EN: "the log has those max_log_bytes did not free", ZH: "日志里有 max_log_bytes 没有释放的那部分"})
)

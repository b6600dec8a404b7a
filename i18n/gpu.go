package i18n

// GPU alerts (gpu): thresholds crossed, ECC errors and Xid events.
var (
	GPUMemory = Def(Msg{Key: "gpu.memory", EN: "⚠️ %s memory at %.0f%% (%s of %s; alert at %g%%): run #%d holds %s. " +
		"The next allocation may fail with CUDA out of memory: a smaller batch, gradient checkpointing or mixed precision (bf16/fp16) would leave room.",
		ZH: "⚠️ %s 显存占用 %.0f%%（%s / %s；告警线 %g%%）：训练 #%d 占了 %s。下一次分配可能因 CUDA 显存不足而失败：减小 batch、梯度检查点或混合精度（bf16/fp16）能腾出空间。"})
	GPUTemp = Def(Msg{Key: "gpu.temp", EN: "🌡 %s at %d°C (alert at %d°C).%s A hot GPU slows its clocks down: check the fans and the airflow.",
		ZH: "🌡 %s 温度 %d°C（告警线 %d°C）。%s显卡过热会降频：检查风扇和风道。"})
	GPUECC = Def(Msg{Key: "gpu.ecc", EN: "🛑 %s reported a double bit ECC error: data in its memory was corrupted beyond repair.%s Reset the GPU (nvidia-smi -r) or reboot; if it happens again the card needs replacing.",
		ZH: "🛑 %s 报告了双比特 ECC 错误：显存里的数据已损坏且无法修复。%s请重置显卡（nvidia-smi -r）或重启；再次出现就需要换卡。"})
	GPUECCUntrusted = Def(Msg{Key: "gpu.ecc_untrusted", EN: " Results computed on it from now on cannot be trusted.", ZH: "从现在起在它上面算出的结果都不可信。"})
	GPUXid          = Def(Msg{Key: "gpu.xid", EN: "🛑 %s reported Xid %d", ZH: "🛑 %s 报告了 Xid %d"})
	GPUUsedBy       = Def(Msg{Key: "gpu.used_by", EN: " Run %s uses it.", ZH: "训练 %s 在用它。"})
	GPUUsedByMany   = Def(Msg{Key: "gpu.used_by_many", EN: " Runs %s use it.", ZH: "训练 %s 在用它。"})
	GPUAny          = Def(Msg{Key: "gpu.any", EN: "a GPU", ZH: "一块显卡"})

	XidAdviceApp    = Def(Msg{Key: "xid.advice_app", EN: "Usually a bug in the program (e.g. an out-of-bounds index in a kernel): rerun with CUDA_LAUNCH_BLOCKING=1 to find the line.", ZH: "通常是程序的 bug（例如 kernel 里下标越界）：用 CUDA_LAUNCH_BLOCKING=1 重跑以找到出错的行。"})
	XidAdviceReset  = Def(Msg{Key: "xid.advice_reset", EN: "Reset the GPU (nvidia-smi -r) or reboot before the next run; if it happens again the card needs replacing.", ZH: "下次训练前重置显卡（nvidia-smi -r）或重启；再次出现就需要换卡。"})
	XidAdviceReboot = Def(Msg{Key: "xid.advice_reboot", EN: "The GPU is unreachable until the machine is rebooted (a reset is not enough); check its power, cooling and seating.", ZH: "重启机器之前这块显卡都无法访问（重置不够）；检查供电、散热和插接。"})
	XidAdviceDriver = Def(Msg{Key: "xid.advice_driver", EN: "Restart the run; if it happens again, update the driver or reset the GPU (nvidia-smi -r).", ZH: "重新开始训练；再次出现就更新驱动或重置显卡（nvidia-smi -r）。"})
	XidAdvice45     = Def(Msg{Key: "xid.advice_45", EN: "Another Xid came first: look for it.", ZH: "之前还有别的 Xid：先找它。"})
	XidAdvice63     = Def(Msg{Key: "xid.advice_63", EN: "The faulty memory was mapped out; reset the GPU when convenient for it to take effect.", ZH: "坏掉的显存已被隔离；方便时重置显卡使其生效。"})
	XidAdvice74     = Def(Msg{Key: "xid.advice_74", EN: "Check the NVLink bridges and the other GPUs' logs; Reset the GPU (nvidia-smi -r) or reboot before the next run; if it happens again the card needs replacing.", ZH: "检查 NVLink 桥和其它显卡的日志；下次训练前重置显卡（nvidia-smi -r）或重启；再次出现就需要换卡。"})
	XidAdvice92     = Def(Msg{Key: "xid.advice_92", EN: "The memory is wearing out: plan to replace the card.", ZH: "显存正在老化：准备换卡。"})
	XidAdvice94     = Def(Msg{Key: "xid.advice_94", EN: "Restart the run; reset the GPU when convenient.", ZH: "重新开始训练；方便时重置显卡。"})
	XidAdviceOther  = Def(Msg{Key: "xid.advice_other", EN: "See NVIDIA's Xid catalog: https://docs.nvidia.com/deploy/xid-errors/", ZH: "见 NVIDIA 的 Xid 目录：https://docs.nvidia.com/deploy/xid-errors/"})

	Xid8   = Def(Msg{Key: "xid.8", EN: "GPU stopped processing", ZH: "GPU 停止处理"})
	Xid13  = Def(Msg{Key: "xid.13", EN: "graphics engine exception", ZH: "图形引擎异常"})
	Xid31  = Def(Msg{Key: "xid.31", EN: "GPU memory page fault (illegal memory access)", ZH: "显存页错误（非法内存访问）"})
	Xid43  = Def(Msg{Key: "xid.43", EN: "GPU stopped processing (the application faulted)", ZH: "GPU 停止处理（应用程序出错）"})
	Xid45  = Def(Msg{Key: "xid.45", EN: "preemptive cleanup after previous errors (the process was ended)", ZH: "之前出错后的预防性清理（进程已被结束）"})
	Xid48  = Def(Msg{Key: "xid.48", EN: "double bit ECC error (uncorrectable memory error)", ZH: "双比特 ECC 错误（不可纠正的显存错误）"})
	Xid61  = Def(Msg{Key: "xid.61", EN: "internal micro-controller breakpoint/warning", ZH: "内部微控制器断点/警告"})
	Xid62  = Def(Msg{Key: "xid.62", EN: "internal micro-controller halt", ZH: "内部微控制器停机"})
	Xid63  = Def(Msg{Key: "xid.63", EN: "ECC page retirement or row remapping event", ZH: "ECC 页面退役或行重映射事件"})
	Xid64  = Def(Msg{Key: "xid.64", EN: "ECC page retirement or row remapping failure", ZH: "ECC 页面退役或行重映射失败"})
	Xid74  = Def(Msg{Key: "xid.74", EN: "NVLink error", ZH: "NVLink 错误"})
	Xid79  = Def(Msg{Key: "xid.79", EN: "the GPU has fallen off the bus", ZH: "GPU 从总线上掉了"})
	Xid92  = Def(Msg{Key: "xid.92", EN: "high single bit ECC error rate", ZH: "单比特 ECC 错误率过高"})
	Xid94  = Def(Msg{Key: "xid.94", EN: "contained ECC error (the application using the memory was affected)", ZH: "受控的 ECC 错误（使用这块显存的应用受影响）"})
	Xid95  = Def(Msg{Key: "xid.95", EN: "uncontained ECC error (every application on the GPU was affected)", ZH: "未受控的 ECC 错误（这块 GPU 上的所有应用都受影响）"})
	Xid119 = Def(Msg{Key: "xid.119", EN: "GSP RPC timeout (the GPU's system processor stopped answering)", ZH: "GSP RPC 超时（GPU 的系统处理器不再响应）"})
	Xid120 = Def(Msg{Key: "xid.120", EN: "GSP error", ZH: "GSP 错误"})
)

// The 显卡 table (render.GPUTable) and the notes about Slurm runs under it.
var (
	GPUTableNone      = Def(Msg{Key: "gpu.table_none", EN: "No NVIDIA GPU: %s. Memory below is host memory.\n", ZH: "没有 NVIDIA 显卡：%s。下面是主机内存。\n"})
	GPUWhyNoDriver    = Def(Msg{Key: "gpu.why_no_driver", EN: "no NVIDIA driver (libnvidia-ml.so.1 not found)", ZH: "没有装 NVIDIA 驱动（找不到 libnvidia-ml.so.1）"})
	GPUWhyNotLoaded   = Def(Msg{Key: "gpu.why_not_loaded", EN: "the NVIDIA driver is not loaded", ZH: "NVIDIA 驱动没有加载"})
	GPUWhyPermission  = Def(Msg{Key: "gpu.why_permission", EN: "no permission to use the NVIDIA driver", ZH: "没有使用 NVIDIA 驱动的权限"})
	GPUWhyMismatch    = Def(Msg{Key: "gpu.why_mismatch", EN: "the NVIDIA driver and its library do not match (reboot after a driver update?)", ZH: "NVIDIA 驱动与它的库版本不一致（更新驱动后需要重启？）"})
	GPUWhyNoGPU       = Def(Msg{Key: "gpu.why_no_gpu", EN: "the NVIDIA driver sees no GPU", ZH: "NVIDIA 驱动看不到显卡"})
	GPUWhyNoNVML      = Def(Msg{Key: "gpu.why_no_nvml", EN: "this trainbot was built without NVML (no cgo, or -tags nonvml)", ZH: "这个 trainbot 编译时没有带 NVML（没有 cgo，或用了 -tags nonvml）"})
	GPUTableNoTelem   = Def(Msg{Key: "gpu.table_no_telemetry", EN: "no GPU telemetry", ZH: "没有显卡监控数据"})
	GPUTableSilent    = Def(Msg{Key: "gpu.table_silent", EN: "No GPU answered this time.\n", ZH: "这次没有显卡回应。\n"})
	GPUTableHost      = Def(Msg{Key: "gpu.table_host", EN: "host memory %s used of %s (%s available)\n", ZH: "主机内存已用 %s，共 %s（可用 %s）\n"})
	GPUTableRunGPU    = Def(Msg{Key: "gpu.table_run_gpu", EN: "GPU %s", ZH: "显存 %s"})
	GPUTableOn        = Def(Msg{Key: "gpu.table_on", EN: " on %s", ZH: "（%s）"})
	GPUTableRunHost   = Def(Msg{Key: "gpu.table_run_host", EN: "host %s in %d processes", One: "host %s in %d process", N: 2, ZH: "内存 %s，%d 个进程"})
	GPUTableNoFigures = Def(Msg{Key: "gpu.table_no_figures", EN: "no figures", ZH: "没有数据"})
	GPUTableRun       = Def(Msg{Key: "gpu.table_run", EN: "run #%d (pid %d): %s\n", ZH: "训练 #%d（进程 %d）：%s\n"})
	SlurmRunNode      = Def(Msg{Key: "gpu.slurm_run", EN: "run #%d (%s) is Slurm job %s", ZH: "训练 #%d（%s）是 Slurm 作业 %s"})
	SlurmNotYet       = Def(Msg{Key: "gpu.slurm_not_yet", EN: ", not running yet: its GPUs will be those of its node, not this host's", ZH: "，还没运行：它的显卡将是它所在节点的，不是这台主机的"})
	SlurmOnNode       = Def(Msg{Key: "gpu.slurm_on_node", EN: " on %s: its GPUs are that node's, not in the figures above", ZH: "，在 %s 上：它的显卡属于那个节点，不在上面的数据里"})
	SlurmMaxRSS       = Def(Msg{Key: "gpu.slurm_maxrss", EN: "; MaxRSS (sstat) %s", ZH: "；MaxRSS（sstat）%s"})
	SlurmNoMaxRSS     = Def(Msg{Key: "gpu.slurm_no_maxrss", EN: "; sstat cannot tell its memory (%s)", ZH: "；sstat 查不到它的内存（%s）"})
	// Each [[hosts]] host's section under this host's table.
	GPUHostHead    = Def(Msg{Key: "gpu.host_head", EN: "── %s ──\n", ZH: "── 主机 %s ──\n"})
	GPUHostDown    = Def(Msg{Key: "gpu.host_down", EN: "%s: unreachable since %s (%s)", ZH: "%s：自 %s 起连不上（%s）"})
	GPUHostPending = Def(Msg{Key: "gpu.host_pending", EN: "%s: no answer yet", ZH: "%s：还没有应答"})
	GPUHostLast    = Def(Msg{Key: "gpu.host_last", EN: "; last answer %s", ZH: "；上次应答 %s"})
	GPUSomeMissing = Def(Msg{Key: "gpu.some_missing", EN: "\n(some figures could not be read: %s)", ZH: "\n（有些数据读不到：%s）"})

	// Each holder of a device, under its line: a run (with its job and who
	// started it when known) or another process.
	GPUHolderRun     = Def(Msg{Key: "gpu.holder_run", EN: "  run #%d (%s, started by %s): %s", ZH: "  训练 #%d（%s，%s 启动）：%s"})
	GPUHolderRunJob  = Def(Msg{Key: "gpu.holder_run_job", EN: "  run #%d (%s): %s", ZH: "  训练 #%d（%s）：%s"})
	GPUHolderRunBare = Def(Msg{Key: "gpu.holder_run_bare", EN: "  run #%d: %s", ZH: "  训练 #%d：%s"})
	GPUHolderProcs   = Def(Msg{Key: "gpu.holder_procs", EN: " in %d processes", One: " in %d process", ZH: "，%d 个进程"})
	GPUHolderOther   = Def(Msg{Key: "gpu.holder_other", EN: "  %s, pid %d: %s · %s", ZH: "  %s，进程 %d：%s · %s"})
	GPUHolderFor     = Def(Msg{Key: "gpu.holder_for", EN: " · for %s", ZH: " · 已占用 %s"})
)

// The idle_held alert (render.GPUAlert).
var (
	GPUIdleHeld = Def(Msg{Key: "gpu.idle_held", EN: "💤 %s has been at 0%% for %s while %s holds %s on it (idle_held: %s or more at 0%% for %s). If it is not in use, ask for it to be freed.",
		ZH: "💤 %s 利用率为 0%% 已有 %s，%s 却在上面占着 %s（idle_held：0%% 下占用 %s 以上达 %s）。如果没有在用，请让它释放。"})
	GPUIdleByRun   = Def(Msg{Key: "gpu.idle_by_run", EN: "process %d of run #%d", ZH: "训练 #%[2]d 的进程 %[1]d"})
	GPUIdleByOther = Def(Msg{Key: "gpu.idle_by_other", EN: "%s's process %d (%s)", ZH: "%s 的进程 %d（%s）"})
)

// Why a run cannot have the GPUs it asks for (render.GPURefusal): never on
// this host, or not now, with each GPU's reason.
var (
	GPUReqCount   = Def(Msg{Key: "gpu.req_count", EN: "%d GPUs", One: "%d GPU", ZH: "%d 块显卡"})
	GPUReqIndex   = Def(Msg{Key: "gpu.req_index", EN: "GPU %s", ZH: "显卡 %s"})
	GPUReqIndices = Def(Msg{Key: "gpu.req_indices", EN: "GPUs %s", ZH: "显卡 %s"})
	GPUReqMemory  = Def(Msg{Key: "gpu.req_memory", EN: " with %s free each", ZH: "（每块空闲 %s）"})

	GPUNeverUnavailable = Def(Msg{Key: "gpu.never_unavailable", EN: "🚫 No GPUs for %s on this host: %s.", ZH: "🚫 这台主机满足不了 %s：%s。"})
	GPUNeverMissing     = Def(Msg{Key: "gpu.never_missing", EN: "🚫 No GPUs for %s: this host has no GPU %s (it has %d).", ZH: "🚫 满足不了 %s：这台主机没有显卡 %s（它有 %d 块）。"})
	GPUNeverSmall       = Def(Msg{Key: "gpu.never_small", EN: "🚫 No GPUs for %s: GPU %s has less memory than that in all.", ZH: "🚫 满足不了 %s：显卡 %s 的显存总共也没有这么多。"})
	GPUNeverFit         = Def(Msg{Key: "gpu.never_fit", EN: "🚫 No GPUs for %s: this host has %d GPUs, %d of them with that much memory.", ZH: "🚫 满足不了 %s：这台主机有 %d 块显卡，其中 %d 块有这么多显存。"})
	GPUNeverFew         = Def(Msg{Key: "gpu.never_few", EN: "🚫 No GPUs for %s: this host has only %d.", ZH: "🚫 满足不了 %s：这台主机只有 %d 块。"})

	GPUBusyHead        = Def(Msg{Key: "gpu.busy_head", EN: "⏳ Not enough free GPUs for %s now (%d free):", ZH: "⏳ 现在的空闲显卡（%[2]d 块）不够 %[1]s："})
	GPUBusyLine        = Def(Msg{Key: "gpu.busy_line", EN: "GPU %d: %s", ZH: "显卡 %d：%s"})
	GPUBusyFree        = Def(Msg{Key: "gpu.busy_free", EN: "free", ZH: "空闲"})
	GPUBusyRun         = Def(Msg{Key: "gpu.busy_run", EN: "taken by run #%d (%s, started by %s)", ZH: "被训练 #%d（%s，%s 启动）占用"})
	GPUBusyRunJob      = Def(Msg{Key: "gpu.busy_run_job", EN: "taken by run #%d (%s)", ZH: "被训练 #%d（%s）占用"})
	GPUBusyRunBare     = Def(Msg{Key: "gpu.busy_run_bare", EN: "taken by run #%d", ZH: "被训练 #%d 占用"})
	GPUBusyLockedBy    = Def(Msg{Key: "gpu.busy_locked_by", EN: "taken by run #%d (%s) of %s's trainbot", ZH: "被 %[3]s 的 trainbot 的训练 #%[1]d（%[2]s）占用"})
	GPUBusyOrphan      = Def(Msg{Key: "gpu.busy_orphan", EN: ", whose supervisor is gone", ZH: "，其监管进程已退出"})
	GPUBusyLocked      = Def(Msg{Key: "gpu.busy_locked", EN: "taken by another trainbot's run", ZH: "被另一个 trainbot 的训练占用"})
	GPUBusyHeld        = Def(Msg{Key: "gpu.busy_held", EN: "%s's process %d (%s) holds %s", ZH: "%s 的进程 %d（%s）占着 %s"})
	GPUBusyHeldMore    = Def(Msg{Key: "gpu.busy_held_more", EN: " (and %d more processes)", One: " (and %d more process)", ZH: "（还有 %d 个进程）"})
	GPUBusyUtil        = Def(Msg{Key: "gpu.busy_util", EN: "busy at %d%% (busy from %d%%)", ZH: "利用率 %d%%（%d%% 起算忙）"})
	GPUBusyTooLittle   = Def(Msg{Key: "gpu.busy_too_little", EN: "%s free, %s needed", ZH: "空闲 %s，需要 %s"})
	GPUBusyNotQuietYet = Def(Msg{Key: "gpu.busy_recent", EN: "free for %s of the %s it must be", ZH: "已空闲 %s，需要 %s"})
)

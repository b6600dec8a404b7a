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
	GPUTableNoTelem   = Def(Msg{Key: "gpu.table_no_telemetry", EN: "no GPU telemetry", ZH: "没有显卡遥测"})
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
	GPUSomeMissing    = Def(Msg{Key: "gpu.some_missing", EN: "\n(some figures could not be read: %s)", ZH: "\n（有些数据读不到：%s）"})
)

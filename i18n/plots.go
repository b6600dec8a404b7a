package i18n

// Chart axes, legends and notes (plots), and the captions and refusals of
// charts (bot/render). A chart's kind in its title is bilingual in zh+en
// ("损失 Loss") when a Chinese font is there: plots words it.
var (
	AxisStep        = Def(Msg{Key: "plot.axis_step", EN: "step", ZH: "步数"})
	AxisTime        = Def(Msg{Key: "plot.axis_time", EN: "time", ZH: "时间"})
	AxisSinceStart  = Def(Msg{Key: "plot.axis_since_start", EN: "time since start", ZH: "开始后的时间"})
	AxisLoss        = Def(Msg{Key: "plot.axis_loss", EN: "loss", ZH: "损失"})
	AxisMemory      = Def(Msg{Key: "plot.axis_memory", EN: "memory", ZH: "内存占用"})
	AxisUtil        = Def(Msg{Key: "plot.axis_util", EN: "utilisation", ZH: "利用率"})
	AxisTemp        = Def(Msg{Key: "plot.axis_temp", EN: "temperature", ZH: "温度"})
	LegendNaN       = Def(Msg{Key: "plot.legend_nan", EN: "NaN/Inf ×%d (skipped)", ZH: "NaN/Inf ×%d（已跳过）"})
	LegendTotal     = Def(Msg{Key: "plot.legend_total", EN: "total %s", ZH: "总量 %s"})
	LegendGPUTotal  = Def(Msg{Key: "plot.legend_gpu_total", EN: "GPU total %s", ZH: "显存总量 %s"})
	LegendGPURun    = Def(Msg{Key: "plot.legend_gpu_run", EN: "GPU memory of the run", ZH: "本次训练的显存"})
	LegendHostRun   = Def(Msg{Key: "plot.legend_host_run", EN: "host memory of the process tree", ZH: "进程树的内存"})
	LegendPeak      = Def(Msg{Key: "plot.legend_peak", EN: "peak %s", ZH: "峰值 %s"})
	NoteSmoothed    = Def(Msg{Key: "plot.note_smoothed", EN: "light: raw values · bold: smoothed (EMA %.2g, less on short series) · label: latest value", ZH: "浅色：原始值 · 粗线：平滑（EMA %.2g，序列短时更少）· 标注：最新值"})
	NoteNarrowRange = Def(Msg{Key: "plot.note_narrow_range", EN: "the values differ by only %s: the Y axis spans 2 %% of them", ZH: "数值只相差 %s：纵轴按数值的 2%% 显示"})
	KindLoss        = Def(Msg{Key: "plot.kind_loss", EN: "Loss", ZH: "损失"})
	KindMemoryGPU   = Def(Msg{Key: "plot.kind_memory_gpu", EN: "Memory", ZH: "显存"})
	KindMemoryHost  = Def(Msg{Key: "plot.kind_memory_host", EN: "Memory", ZH: "内存"})
	KindUtilTemp    = Def(Msg{Key: "plot.kind_util_temp", EN: "GPU utilisation & temperature", Mix: "显卡 GPU utilisation & temperature", ZH: "显卡利用率和温度"})
	KindUtil        = Def(Msg{Key: "plot.kind_util", EN: "GPU utilisation", Mix: "显卡 GPU utilisation", ZH: "显卡利用率"})
)

// Chart titles, captions and what is said when there is nothing to draw.
var (
	ChartRunTitle     = Def(Msg{Key: "chart.run_title", EN: "%s · run #%d · %s", ZH: "%s · 训练 #%d · %s"})
	ChartNoMetric     = Def(Msg{Key: "chart.no_metric", EN: "run #%d has no metric yet, so there is nothing to draw", ZH: "训练 #%d 还没有指标，没有可画的"})
	ChartNoSuchMetric = Def(Msg{Key: "chart.no_such_metric", EN: "run #%d has no metric %q; it has %s", ZH: "训练 #%d 没有指标“%s”；它有 %s"})
	ChartAllNaN       = Def(Msg{Key: "chart.all_nan", EN: "run #%d has no finite value of %s to draw (%d points, all NaN or Inf)", ZH: "训练 #%d 的 %s 没有可画的有限值（%d 个点，全是 NaN 或 Inf）"})
	ChartLossCaption  = Def(Msg{Key: "chart.loss_caption", EN: "run #%d %s · %s · %d points", ZH: "训练 #%d %s · %s · %d 个点"})
	ChartNaNCaption   = Def(Msg{Key: "chart.nan_caption", EN: " (%d NaN/Inf)", ZH: "（%d 个 NaN/Inf）"})
	ChartNoMemory     = Def(Msg{Key: "chart.no_memory", EN: "run #%d has no memory sample, so there is no memory chart", ZH: "训练 #%d 没有内存采样，画不了内存图"})
	ChartPeakGPU      = Def(Msg{Key: "chart.peak_gpu", EN: "peak GPU %s", ZH: "显存峰值 %s"})
	ChartPeakGPUOf    = Def(Msg{Key: "chart.peak_gpu_of", EN: "peak GPU %s of %s", ZH: "显存峰值 %s / %s"})
	ChartPeakHost     = Def(Msg{Key: "chart.peak_host", EN: "peak host %s", ZH: "内存峰值 %s"})
	ChartMemCaption   = Def(Msg{Key: "chart.memory_caption", EN: "run #%d %s · memory · %s", ZH: "训练 #%d %s · 显存 · %s"})
	ChartNoDevice     = Def(Msg{Key: "chart.no_device", EN: "no GPU was sampled while run #%d ran, so there is no utilisation chart", ZH: "训练 #%d 运行时没有采样到显卡，画不了利用率图"})
	ChartDevCaption   = Def(Msg{Key: "chart.device_caption", EN: "run #%d %s · utilisation and temperature · %s", ZH: "训练 #%d %s · 利用率和温度 · %s"})
)

// The compare charts' titles and captions, in the chat's language (issue
// 31: a zh user saw them in English), and the memory chart of a run
// without a GPU (内存, not 显存).
var (
	CmpChartTitle       = Def(Msg{Key: "compare.chart_title", EN: "%s · runs %s", ZH: "%s · 训练 %s"})
	CmpChartCaption     = Def(Msg{Key: "compare.chart_caption", EN: "%s of runs %s", ZH: "训练 %[2]s 的 %[1]s"})
	CmpChartIdentical   = Def(Msg{Key: "compare.chart_identical", EN: " · identical point for point (drawn dashed): %s", ZH: " · 逐点相同（画成虚线）：%s"})
	CmpMemTitleHost     = Def(Msg{Key: "compare.mem_title_host", EN: "host memory of each run's process tree (RSS samples%s) · runs %s", ZH: "各训练进程树的内存（RSS 采样%s）· 训练 %s"})
	CmpMemTitleGPU      = Def(Msg{Key: "compare.mem_title_gpu", EN: "GPU memory of each run's processes (NVML samples%s) · runs %s", ZH: "各训练进程的显存（NVML 采样%s）· 训练 %s"})
	CmpMemTitlePeaks    = Def(Msg{Key: "compare.mem_title_peaks", EN: "; peaks: %s", ZH: "；峰值：%s"})
	CmpMemCaptionHost   = Def(Msg{Key: "compare.mem_caption_host", EN: "memory of runs %s", ZH: "训练 %s 的内存"})
	CmpMemCaptionGPU    = Def(Msg{Key: "compare.mem_caption_gpu", EN: "memory of runs %s", ZH: "训练 %s 的显存"})
	CmpMemCaptionPeaks  = Def(Msg{Key: "compare.mem_caption_peaks", EN: " · peaks %s", ZH: " · 峰值 %s"})
	PeakShortMain       = Def(Msg{Key: "peak.short_main", EN: "VmHWM, exact", ZH: "VmHWM，精确值"})
	PeakShortTreeSum    = Def(Msg{Key: "peak.short_tree_sum", EN: "ΣVmHWM, upper bound", ZH: "ΣVmHWM，上限"})
	PeakShortCgroup     = Def(Msg{Key: "peak.short_cgroup", EN: "cgroup peak", ZH: "cgroup 峰值"})
	ChartMemCaptionHost = Def(Msg{Key: "chart.memory_caption_host", EN: "run #%d %s · host memory · %s", ZH: "训练 #%d %s · 内存 · %s"})
)

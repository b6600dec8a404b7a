package i18n

// Button labels: Lang.Button shows both words in zh+en ([停止 Stop]).
var (
	BtnStop      = Def(Msg{Key: "button.stop", EN: "Stop", ZH: "停止"})
	BtnStatus    = Def(Msg{Key: "button.status", EN: "Status", ZH: "状态"})
	BtnPlot      = Def(Msg{Key: "button.plot", EN: "Plot", ZH: "画图"})
	BtnQueue     = Def(Msg{Key: "button.queue", EN: "Queue", ZH: "排队"})
	BtnYes       = Def(Msg{Key: "button.yes", EN: "Yes", ZH: "确认"})
	BtnNo        = Def(Msg{Key: "button.no", EN: "No", ZH: "取消"})
	BtnOpen      = Def(Msg{Key: "button.open", EN: "Open", ZH: "网页"})
	BtnRetryHalf = Def(Msg{Key: "button.retry_half", EN: "Retry with half batch", ZH: "用一半 batch 重试"})
	BtnRetryFit  = Def(Msg{Key: "button.retry_fit", EN: "Retry with the batch that fits", ZH: "用放得下的 batch 重试"})
)

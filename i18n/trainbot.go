package i18n

// trainbot's own news: its store, its transports, its config.
var (
	DiskFull       = Def(Msg{Key: "health.disk_full", EN: "⚠️ disk full on %s: history is not being saved", ZH: "⚠️ %s 磁盘已满：历史记录没有保存"})
	DiskBack       = Def(Msg{Key: "health.disk_back", EN: "✅ disk space is back on %s: history is saved again", ZH: "✅ %s 磁盘空间恢复：历史记录重新开始保存"})
	DBReplaced     = Def(Msg{Key: "health.db_replaced", EN: "⚠️ %s on %s was deleted or replaced while trainbot ran: history is not being saved; restart trainbot", ZH: "⚠️ trainbot 运行时 %s（在 %s）被删除或替换：历史记录没有保存；请重启 trainbot"})
	DBDamaged      = Def(Msg{Key: "health.db_damaged", EN: "⚠️ trainbot's database %s on %s is damaged (%v): history is not being saved; the runs go on and their logs keep every line. Restart trainbot: it starts a new database and rebuilds every run's history from its directory.", ZH: "⚠️ trainbot 的数据库 %s（在 %s）损坏了（%v）：历史记录没有保存；训练继续运行，日志保留每一行。请重启 trainbot：它会启用新的数据库，并从每次训练的目录重建历史。"})
	DBMovedAside   = Def(Msg{Key: "health.db_moved_aside", EN: "🔧 trainbot's database on %s was damaged: %v. A new one was started; every run's history is rebuilt from its directory.", ZH: "🔧 trainbot 的数据库（在 %s）损坏了：%v。已启用新的数据库；每次训练的历史会从它的目录重建。"})
	DBOther        = Def(Msg{Key: "health.db_other", EN: "trainbot's database on %s: %s", ZH: "trainbot 的数据库（%s）：%s"})
	TransportGone  = Def(Msg{Key: "transport.gone", EN: "⚠️ %s stopped: %v\ntrainbot goes on without it, and runs go on; fix the config and restart trainbot.", ZH: "⚠️ %s 停止了：%v\ntrainbot 没有它也继续运行，训练也继续；请修正配置后重启 trainbot。"})
	TransportRetry = Def(Msg{Key: "transport.retry", EN: "⚠️ %s stopped: %v\ntrainbot goes on, and runs go on; it starts %s again in %s (then less often while it fails).", ZH: "⚠️ %s 停止了：%v\ntrainbot 继续运行，训练也继续；%s 会在 %s后重新启动（失败时间隔会变长）。"})
	ReloadFailed   = Def(Msg{Key: "reload.failed", EN: "⚠️ config reload failed; the old config stays:\n%s", ZH: "⚠️ 重新加载配置失败，旧配置继续生效：\n%s"})
	Reloaded       = Def(Msg{Key: "reload.done", EN: "🔄 config reloaded from %s: %s", ZH: "🔄 已从 %s 重新加载配置：%s"})
)

// What a channel that cannot show a reply's charts or buttons says instead.
var (
	PushButton       = Def(Msg{Key: "push.button", EN: "\n↪ %s: send「%s」to the bot", ZH: "\n↪ %s：向机器人发送「%s」"})
	PushNotShown     = Def(Msg{Key: "push.not_shown", EN: "(%d charts not shown here: %s; send /plot to the bot)", One: "(%d chart not shown here: %s; send /plot to the bot)", Mix: "(%d charts not shown here: %s; send 画图 to the bot)", MixOne: "(%d chart not shown here: %s; send 画图 to the bot)", ZH: "（这里显示不了 %d 张图：%s；向机器人发送「画图」查看）"})
	PushNoDingTalk   = Def(Msg{Key: "push.dingtalk_no_images", EN: "DingTalk robots cannot upload images", ZH: "钉钉机器人不能上传图片"})
	PushNoFeishu     = Def(Msg{Key: "push.feishu_no_images", EN: "Feishu custom bots cannot upload images", ZH: "飞书自定义机器人不能上传图片"})
	PushNoSlack      = Def(Msg{Key: "push.slack_no_images", EN: "Slack incoming webhooks cannot upload images", ZH: "Slack 的传入 Webhook 不能上传图片"})
	PushNoBark       = Def(Msg{Key: "push.bark_no_images", EN: "Bark cannot show images", ZH: "Bark 不能显示图片"})
	PushNoServerChan = Def(Msg{Key: "push.serverchan_no_images", EN: "ServerChan cannot upload images", ZH: "Server酱不能上传图片"})
	PushNoPushPlus   = Def(Msg{Key: "push.pushplus_no_images", EN: "PushPlus cannot upload images", ZH: "PushPlus 不能上传图片"})
	PushOpenPage     = Def(Msg{Key: "push.open_page", EN: "open the run's page", ZH: "打开训练页面"})
	PushMailTooLarge = Def(Msg{Key: "push.email_too_large", EN: "the mail would pass %d MiB", ZH: "邮件会超过 %d MiB"})
	PushChartNotSent = Def(Msg{Key: "push.chart_not_sent", EN: "(chart %s not sent: %v)", ZH: "（图 %s 没有发出：%v）"})
	ChartsNotSent    = Def(Msg{Key: "deliver.charts_not_sent", EN: "📉 %d charts not sent: %s", One: "📉 chart not sent: %[2]s", ZH: "📉 %d 张图没有发出：%s"})
	OnTheHost        = Def(Msg{Key: "deliver.on_the_host", EN: "\nOn the host: %s", ZH: "\n在主机上：%s"})
)

// The terminal chat's greeting.
var Greet = Def(Msg{Key: "console.greet", EN: "trainbot terminal chat — %d job(s). Type /train to start, /status for status, /plot for a chart, /stop to stop, /help for help.",
	Mix: "trainbot terminal chat — %d job(s). Type 开始 to start, 状态 for status, 画图 for a chart, 停止 to stop, 帮助 for help.",
	ZH:  "trainbot 终端聊天 —— %d 个任务。输入「开始」开始训练，「状态」查看进度，「画图」看曲线，「停止」停止训练，「帮助」查看全部命令。"})

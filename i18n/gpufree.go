package i18n

// 通知空闲 (/notifyfree): what a chat waits for, the router's answers, and
// the one message bot/gpufree sends when the GPUs are free or the wait
// expires.
var (
	// What a chat waits for: the count first (plural), then the size.
	GPUFreeWant    = Def(Msg{Key: "gpufree.want", EN: "%d free GPUs", One: "%d free GPU", ZH: "%d 块空闲显卡"})
	GPUFreeWantMem = Def(Msg{Key: "gpufree.want_memory", EN: "%d free GPUs with ≥ %s of free memory each", One: "%d free GPU with ≥ %s of free memory", ZH: "%d 块空闲显卡（每块空闲显存 ≥ %s）"})

	NotifyFreeSet = Def(Msg{Key: "gpufree.set",
		EN: "🔔 I'll tell this chat once, when this host has %s (watching until %s; send it again to renew, %s to cancel).",
		ZH: "🔔 这台主机一有 %s，就在这个聊天里通知一次（等到 %s；再发一次可续期，发送「%s」取消）。"})
	NotifyFreeRenewed = Def(Msg{Key: "gpufree.renewed",
		EN: "🔔 Renewed: I'll tell this chat once, when this host has %s (watching until %s now; %s cancels).",
		ZH: "🔔 已续期：这台主机一有 %s，就在这个聊天里通知一次（现在等到 %s；发送「%s」取消）。"})
	NotifyFreeCancelled = Def(Msg{Key: "gpufree.cancelled",
		EN: "🔕 No longer waiting: %d GPU watches of this chat cancelled.", One: "🔕 No longer waiting: %d GPU watch of this chat cancelled.",
		ZH: "🔕 不再等了：已取消这个聊天的 %d 个空闲显卡通知。"})
	NotifyFreeNone  = Def(Msg{Key: "gpufree.none", EN: "This chat was not waiting for free GPUs.", ZH: "这个聊天没有在等空闲显卡。"})
	NotifyFreeNoGPU = Def(Msg{Key: "gpufree.no_gpu",
		EN:  "This trainbot sees no GPU, so there is nothing to wait for: /notifyfree needs a host with NVIDIA GPUs.",
		Mix: "This trainbot sees no GPU, so there is nothing to wait for: 通知空闲 (/notifyfree) needs a host with NVIDIA GPUs.",
		ZH:  "这个 trainbot 看不到显卡，没有可等的：「通知空闲」需要一台有 NVIDIA 显卡的主机。"})
	NotifyFreeBadN = Def(Msg{Key: "gpufree.bad_n",
		EN:  "%q is not a number of GPUs: give 1 to %d, e.g. /notifyfree 2 20GiB.",
		Mix: "%q is not a number of GPUs: give 1 to %d, e.g. 通知空闲 2 20GiB.",
		ZH:  "“%s”不是显卡数量：请给 1 到 %d，例如「通知空闲 2 20GiB」。"})
	NotifyFreeBadSize = Def(Msg{Key: "gpufree.bad_size",
		EN: "%q is not a size: give the free memory each GPU needs with its unit, e.g. 20GiB, 20G or 20000MiB (G and M are GiB and MiB; GB and MB are 10⁹ and 10⁶ bytes).",
		ZH: "“%s”不是大小：请写每块显卡需要的空闲显存，带上单位，例如 20GiB、20G 或 20000MiB（G、M 即 GiB、MiB；GB、MB 是 10⁹、10⁶ 字节）。"})
	NotifyFreeTooBig = Def(Msg{Key: "gpufree.too_big", EN: "%q is more free memory than any GPU has: at most %s.", ZH: "“%s”比任何显卡的显存都大：最多 %s。"})
	NotifyFreeExtra  = Def(Msg{Key: "gpufree.extra",
		EN:  "%q is one word too many: /notifyfree takes a number of GPUs and a size, e.g. /notifyfree 2 20GiB; /notifyfree off cancels.",
		Mix: "%q is one word too many: 通知空闲 takes a number of GPUs and a size, e.g. 通知空闲 2 20GiB; 通知空闲 关 cancels.",
		ZH:  "“%s”是多出来的：「通知空闲」后面跟显卡数量和大小，例如「通知空闲 2 20GiB」；「通知空闲 关」取消。"})
	NotifyFreeLimit = Def(Msg{Key: "gpufree.limit",
		EN:  "Not added: this chat already waits for %d sets of GPUs, the most it may. /notifyfree off cancels them.",
		Mix: "Not added: this chat already waits for %d sets of GPUs, the most it may. 通知空闲 关 cancels them.",
		ZH:  "未添加：这个聊天已经在等 %d 组显卡，不能再多了。发送「通知空闲 关」取消它们。"})

	// bot/gpufree's message when the GPUs are free: the count, the NVML
	// indices ("0, 3") and, with a size, the size.
	GPUFreeNow = Def(Msg{Key: "gpufree.now",
		EN:     "🟢 %d GPUs free now (%s): send /train to use them. They are not held for you: first come, first served.",
		One:    "🟢 %d GPU free now (%s): send /train to use it. It is not held for you: first come, first served.",
		Mix:    "🟢 %d GPUs free now (%s): send 开始 to use them. They are not held for you: first come, first served.",
		MixOne: "🟢 %d GPU free now (%s): send 开始 to use it. It is not held for you: first come, first served.",
		ZH:     "🟢 现在有 %d 块显卡空闲（%s 号）：发送「开始」使用。不会为你预留，先到先得。"})
	GPUFreeNowMem = Def(Msg{Key: "gpufree.now_memory",
		EN:     "🟢 %d GPUs free now (%s), each with ≥ %s: send /train to use them. They are not held for you: first come, first served.",
		One:    "🟢 %d GPU free now (%s), with ≥ %s: send /train to use it. It is not held for you: first come, first served.",
		Mix:    "🟢 %d GPUs free now (%s), each with ≥ %s: send 开始 to use them. They are not held for you: first come, first served.",
		MixOne: "🟢 %d GPU free now (%s), with ≥ %s: send 开始 to use it. It is not held for you: first come, first served.",
		ZH:     "🟢 现在有 %d 块显卡空闲（%s 号），每块空闲显存 ≥ %s：发送「开始」使用。不会为你预留，先到先得。"})
	// The wait ended unmet: what it waited for, how long, the command
	// that waits again.
	GPUFreeExpired = Def(Msg{Key: "gpufree.expired",
		EN: "⌛ No longer waiting for %s: %s passed without a match. Send %s to wait again.",
		ZH: "⌛ 不再等 %s 了：%s内都没有等到。发送「%s」再等。"})
)

package chat

import (
	"strings"
	"unicode"
)

// Command is one entry of the command table.
type Command struct {
	Name     string   // canonical English name: "train"
	Chinese  string   // 开始
	Aliases  []string // other English names: "run"
	Args     string   // usage of the arguments: "[job] [k=v…]"
	Help     string   // one line, English
	HelpZH   string   // one line, Chinese (Telegram's command menu)
	Operator bool     // only operators may use it
}

// Commands is the command table, in the order help shows it.
var Commands = []Command{
	{Name: "train", Chinese: "开始", Aliases: []string{"run"}, Args: "[job] [k=v…]", Help: "start a run", HelpZH: "开始训练", Operator: true},
	{Name: "stop", Chinese: "停止", Args: "[run]", Help: "stop the active run", HelpZH: "停止训练", Operator: true},
	{Name: "status", Chinese: "状态", Args: "[run]", Help: "step, epoch, loss, speed, ETA, elapsed", HelpZH: "训练状态"},
	{Name: "plot", Chinese: "画图", Args: "[run] [metric|memory|util] [time]", Help: "loss and memory charts", HelpZH: "损失曲线和显存图"},
	{Name: "gpu", Chinese: "显卡", Help: "GPU table and which process holds memory", HelpZH: "显卡状态"},
	{Name: "log", Chinese: "日志", Args: "[n]", Help: "last n lines of output", HelpZH: "最近的输出"},
	{Name: "runs", Chinese: "历史", Args: "[n]", Help: "recent runs with outcome and final loss", HelpZH: "历史记录"},
	{Name: "compare", Chinese: "对比", Args: "A B [C…] [metric|显存]", Help: "compare runs: table, loss and memory overlaid", HelpZH: "对比训练"},
	{Name: "fit", Chinese: "适配", Args: "[job] [param]", Help: "which batch size fits, from past runs' peak memory", HelpZH: "哪个 batch 放得下"},
	{Name: "queue", Chinese: "排队", Args: "[job] [k=v…]", Help: "queue a start for when the job's run ends (/queue alone lists the queue)", HelpZH: "排队等待训练"},
	{Name: "queued", Chinese: "队列", Help: "the queue: waiting starts, their positions and who asked", HelpZH: "查看队列"},
	{Name: "cancel", Chinese: "取消", Args: "N", Help: "remove queue entry N (the one who queued it or an operator)", HelpZH: "取消排队"},
	{Name: "watch", Chinese: "关注", Args: "PATH [pid]", Help: "watch a run trainbot did not start: its log (in [watch] dirs) and its process", HelpZH: "关注外部训练", Operator: true},
	{Name: "note", Chinese: "备注", Args: "N text", Help: "note on run N (shown in 历史, runs and 对比); 开始 … 备注 text notes a new run", HelpZH: "给训练加备注", Operator: true},
	{Name: "jobs", Chinese: "任务", Help: "configured jobs and their parameters", HelpZH: "任务列表"},
	{Name: "audit", Chinese: "审计", Args: "[n]", Help: "who sent which command, allowed or refused, and the run it touched", HelpZH: "操作审计记录", Operator: true},
	{Name: "subscribe", Chinese: "订阅", Help: "progress pushes on for this chat", HelpZH: "订阅进度推送"},
	{Name: "mute", Chinese: "静音", Help: "progress pushes off for this chat", HelpZH: "关闭进度推送"},
	{Name: "help", Chinese: "帮助", Help: "this table", HelpZH: "帮助"},
}

// command returns the table entry of a canonical name.
func command(name string) *Command {
	for i := range Commands {
		if Commands[i].Name == name {
			return &Commands[i]
		}
	}
	return nil
}

// Parsed is a message split into a command and its arguments.
type Parsed struct {
	Cmd  *Command // nil when the text is not a command
	Word string   // the command word as typed, lower-case, without '/' and '@bot'
	Args []string
	// Start is Telegram's bare "/start" greeting: answered with help.
	Start bool
}

// Parse recognises a command in Chinese or English, with or without a
// slash, in any case, addressed to a bot ("/status@MyBot") or not.
func Parse(text string) Parsed {
	fields := strings.FieldsFunc(strings.TrimSpace(text), unicode.IsSpace)
	if len(fields) == 0 {
		return Parsed{}
	}
	word := fields[0]
	args := fields[1:]
	word = strings.TrimLeft(word, "/／")
	if at := strings.IndexByte(word, '@'); at >= 0 {
		word = word[:at]
	}
	word = strings.ToLower(word)
	// Chinese commands are often typed without a space: "画图3", "日志50".
	if c, rest := splitChinese(word); c != nil {
		if rest != "" {
			args = append([]string{rest}, args...)
		}
		return Parsed{Cmd: c, Word: c.Chinese, Args: args}
	}
	if word == "start" {
		return Parsed{Cmd: command("help"), Word: word, Args: args, Start: true}
	}
	for i := range Commands {
		c := &Commands[i]
		if word == c.Name {
			return Parsed{Cmd: c, Word: word, Args: args}
		}
		for _, a := range c.Aliases {
			if word == a {
				return Parsed{Cmd: c, Word: word, Args: args}
			}
		}
	}
	return Parsed{Word: word, Args: args}
}

func splitChinese(word string) (*Command, string) {
	for i := range Commands {
		c := &Commands[i]
		if rest, ok := strings.CutPrefix(word, c.Chinese); ok {
			return c, rest
		}
	}
	return nil, ""
}

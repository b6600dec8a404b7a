package chat

import (
	"slices"
	"strings"
	"unicode"

	"github.com/trainbot/trainbot/i18n"
	"golang.org/x/text/unicode/norm"
)

// Command is one entry of the command table.
type Command struct {
	Name     string   // canonical English name: "train"
	Chinese  string   // 开始
	Aliases  []string // other English names: "run"
	Args     string   // usage of the arguments: "[job] [k=v…]"
	ArgsZH   string   // the same in Chinese: "[任务] [参数=值…]" ("" when Args has no words)
	Help     i18n.Msg // one line of help, in each language
	HelpZH   string   // a few Chinese words (Telegram's command menu)
	Operator bool     // only operators may use it
}

// Commands is the command table, in the order help shows it.
var Commands = []Command{
	{Name: "train", Chinese: "开始", Aliases: []string{"run"}, Args: "[job] [k=v…]", ArgsZH: "[任务] [参数=值…]", Help: i18n.HelpTrain, HelpZH: "开始训练", Operator: true},
	{Name: "stop", Chinese: "停止", Args: "[run]", ArgsZH: "[编号]", Help: i18n.HelpStop, HelpZH: "停止训练", Operator: true},
	{Name: "checkpoint", Chinese: "存档", Args: "[run]", ArgsZH: "[编号]", Help: i18n.HelpCheckpoint, HelpZH: "立即保存检查点", Operator: true},
	{Name: "set", Chinese: "调参", Args: "[run] k=v…", ArgsZH: "[编号] 参数=值…", Help: i18n.HelpSet, HelpZH: "修改运行中的参数", Operator: true},
	{Name: "status", Chinese: "状态", Args: "[run]", ArgsZH: "[编号]", Help: i18n.HelpStatus, HelpZH: "训练状态"},
	{Name: "plot", Chinese: "画图", Args: "[run] [metric|memory|util] [time]", ArgsZH: "[编号] [指标|显存|利用率] [时间]", Help: i18n.HelpPlot, HelpZH: "损失曲线和显存图"},
	{Name: "gpu", Chinese: "显卡", Help: i18n.HelpGPU, HelpZH: "显卡状态"},
	{Name: "notifyfree", Chinese: "通知空闲", Args: "[n] [memory]", ArgsZH: "[块数] [显存]", Help: i18n.HelpNotifyFree, HelpZH: "显卡空闲时通知"},
	{Name: "log", Chinese: "日志", Args: "[n]", ArgsZH: "[行数]", Help: i18n.HelpLog, HelpZH: "最近的输出"},
	{Name: "runs", Chinese: "历史", Args: "[n]", ArgsZH: "[条数]", Help: i18n.HelpRuns, HelpZH: "历史记录"},
	{Name: "compare", Chinese: "对比", Args: "A B [C…] [metric|显存]", ArgsZH: "编号 编号 [编号…] [指标|显存]", Help: i18n.HelpCompare, HelpZH: "对比训练"},
	{Name: "fit", Chinese: "适配", Args: "[job] [param]", ArgsZH: "[任务] [参数]", Help: i18n.HelpFit, HelpZH: "哪个 batch 放得下"},
	{Name: "queue", Chinese: "排队", Args: "[job] [k=v…]", ArgsZH: "[任务] [参数=值…]", Help: i18n.HelpQueue, HelpZH: "排队等待训练"},
	{Name: "queued", Chinese: "队列", Help: i18n.HelpQueued, HelpZH: "查看队列"},
	{Name: "cancel", Chinese: "取消", Args: "N", ArgsZH: "编号", Help: i18n.HelpCancel, HelpZH: "取消排队"},
	{Name: "watch", Chinese: "关注", Args: "PATH [pid]", ArgsZH: "日志路径 [进程号]", Help: i18n.HelpWatch, HelpZH: "关注外部训练", Operator: true},
	{Name: "note", Chinese: "备注", Args: "N text", ArgsZH: "编号 文字", Help: i18n.HelpNote, HelpZH: "给训练加备注", Operator: true},
	{Name: "jobs", Chinese: "任务", Help: i18n.HelpJobs, HelpZH: "任务列表"},
	{Name: "audit", Chinese: "审计", Args: "[n]", ArgsZH: "[条数]", Help: i18n.HelpAudit, HelpZH: "操作审计记录", Operator: true},
	{Name: "subscribe", Chinese: "订阅", Help: i18n.HelpSubscribe, HelpZH: "订阅进度推送"},
	{Name: "mute", Chinese: "静音", Help: i18n.HelpMute, HelpZH: "关闭进度推送"},
	{Name: "help", Chinese: "帮助", Help: i18n.HelpHelp, HelpZH: "帮助"},
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
	Word string   // the command word as read, lower-case, without '/' and '@bot'
	Args []string // the arguments as read (Normalize)
	// Raw are the arguments as typed, one for each of Args: for what must
	// stay as the user wrote it (a note's Chinese punctuation, a path).
	Raw []string
	// Text is the whole message as read (Normalize), its words joined by
	// one space, for a refusal to echo: what the user typed may not be what
	// trainbot read. Typed is the message as typed, joined the same way.
	Text, Typed string
	// Start is Telegram's bare "/start" greeting: answered with help.
	Start bool
}

// Normalize is text as trainbot reads a command: NFKC, which turns what a
// Chinese input method types in full-width mode into ASCII — digits and
// letters (１２８ → 128, ｌｒ → lr), the ideographic space, and the
// separators ＝ ： ， ／ ＠ (→ = : , / @) — and leaves Chinese characters
// and CJK punctuation that has no ASCII twin (。、“”「」) as they are.
func Normalize(text string) string { return norm.NFKC.String(text) }

// Parse recognises a command in Chinese or English, with or without a
// slash, in any case, addressed to a bot ("/status@MyBot") or not, typed
// in full-width characters or not (Normalize).
func Parse(text string) Parsed {
	var raw, fields []string
	for _, f := range strings.FieldsFunc(strings.TrimSpace(text), unicode.IsSpace) {
		// Each word is read on its own so that the word as typed stays
		// beside it; NFKC can make one word two (a compatibility space).
		parts := strings.FieldsFunc(Normalize(f), unicode.IsSpace)
		if len(parts) == 1 {
			raw = append(raw, f)
		} else {
			raw = append(raw, parts...)
		}
		fields = append(fields, parts...)
	}
	if len(fields) == 0 {
		return Parsed{}
	}
	read, typed := strings.Join(fields, " "), strings.Join(raw, " ")
	word := fields[0]
	args, rawArgs := fields[1:], raw[1:]
	word = strings.TrimLeft(word, "/")
	if at := strings.IndexByte(word, '@'); at >= 0 {
		word = word[:at]
	}
	word = strings.ToLower(word)
	// Chinese commands are often typed without a space: "画图3", "日志50".
	if c, rest := splitChinese(word); c != nil {
		if rest != "" {
			args = append([]string{rest}, args...)
			rawArgs = append([]string{rest}, rawArgs...)
		}
		return Parsed{Cmd: c, Word: c.Chinese, Args: args, Raw: rawArgs, Text: read, Typed: typed}
	}
	if word == "start" {
		return Parsed{Cmd: command("help"), Word: word, Args: args, Raw: rawArgs, Text: read, Typed: typed, Start: true}
	}
	for i := range Commands {
		c := &Commands[i]
		if word == c.Name || slices.Contains(c.Aliases, word) {
			return Parsed{Cmd: c, Word: word, Args: args, Raw: rawArgs, Text: read, Typed: typed}
		}
	}
	return Parsed{Word: word, Args: args, Raw: rawArgs, Text: read, Typed: typed}
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

// Nearest is the command a mistyped word most likely meant ("staus" →
// status, "stpo" → stop, "状体" → 状态): the one command whose English name,
// alias or Chinese word is within a small edit distance of word (one
// edit for words of up to four letters and for Chinese words, two for
// longer ones), and nearer than any other command. ok is false when no
// command is near, or two are equally near.
func Nearest(word string) (c *Command, ok bool) {
	w := []rune(strings.ToLower(strings.TrimLeft(word, "/")))
	if len(w) < 2 || len(w) > 24 {
		return nil, false
	}
	best, tie := 1<<30, false
	for i := range Commands {
		cmd := &Commands[i]
		d := 1 << 30
		for _, name := range append([]string{cmd.Name, cmd.Chinese}, cmd.Aliases...) {
			n := []rune(name)
			limit := 1
			if !isHan(n[0]) && len(n) > 4 {
				limit = 2
			}
			if e := editDistance(w, n); e <= limit && e < d {
				d = e
			}
		}
		switch {
		case d < best:
			best, c, tie = d, cmd, false
		case d == best && d < 1<<30 && c != cmd:
			tie = true
		}
	}
	if c == nil || tie || best == 0 {
		return nil, false
	}
	return c, true
}

func isHan(r rune) bool { return unicode.Is(unicode.Han, r) }

// editDistance is the Levenshtein distance of a and b, with a swap of two
// neighbours counted as one edit ("stpo" is one from "stop").
func editDistance(a, b []rune) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

package chat

import (
	"slices"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/i18n"
)

func TestParseCommands(t *testing.T) {
	cases := []struct {
		text  string
		cmd   string // "" when not a command
		args  []string
		start bool
	}{
		{"开始", "train", nil, false},
		{"  开始 train batch_size=32 lr=3e-4 ", "train", []string{"train", "batch_size=32", "lr=3e-4"}, false},
		{"/train", "train", nil, false},
		{"/TRAIN@MyTrainBot demo", "train", []string{"demo"}, false},
		{"run", "train", nil, false},
		{"Run steps=10", "train", []string{"steps=10"}, false},
		{"停止", "stop", nil, false},
		{"/stop 12 confirm", "stop", []string{"12", "confirm"}, false},
		{"状态", "status", nil, false},
		{"/status@bot", "status", nil, false},
		{"STATUS", "status", nil, false},
		{"画图 3 val_loss", "plot", []string{"3", "val_loss"}, false},
		{"画图3", "plot", []string{"3"}, false},
		{"显卡", "gpu", nil, false},
		{"/gpu", "gpu", nil, false},
		{"通知空闲", "notifyfree", nil, false},
		{"通知空闲 2 20GiB", "notifyfree", []string{"2", "20GiB"}, false},
		{"通知空闲关", "notifyfree", []string{"关"}, false},
		{"/notifyfree@MyTrainBot 1 8G", "notifyfree", []string{"1", "8G"}, false},
		{"日志 50", "log", []string{"50"}, false},
		{"日志50", "log", []string{"50"}, false},
		{"历史", "runs", nil, false},
		{"/runs", "runs", nil, false},
		{"对比 1 2", "compare", []string{"1", "2"}, false},
		{"任务", "jobs", nil, false},
		{"/jobs", "jobs", nil, false},
		{"订阅", "subscribe", nil, false},
		{"静音", "mute", nil, false},
		{"/mute", "mute", nil, false},
		{"帮助", "help", nil, false},
		{"/help", "help", nil, false},
		{"/start", "help", nil, true},
		{"/start@MyTrainBot", "help", nil, true},
		{"／状态", "status", nil, false},
		{"hello", "", nil, false},
		{"/unknown", "", nil, false},
		{"", "", nil, false},
	}
	for _, c := range cases {
		p := Parse(c.text)
		got := ""
		if p.Cmd != nil {
			got = p.Cmd.Name
		}
		if got != c.cmd || !slices.Equal(p.Args, c.args) || p.Start != c.start {
			t.Errorf("Parse(%q) = %q %q start=%v, want %q %q start=%v", c.text, got, p.Args, p.Start, c.cmd, c.args, c.start)
		}
	}
}

func TestEveryCommandHasChineseAndHelp(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Commands {
		if c.Chinese == "" || c.Help.EN == "" || c.Help.ZH == "" || c.HelpZH == "" {
			t.Errorf("command %s lacks a word or help", c.Name)
		}
		for _, w := range append([]string{c.Name, c.Chinese}, c.Aliases...) {
			if seen[w] {
				t.Errorf("word %q used twice", w)
			}
			seen[w] = true
		}
	}
}

// What a Chinese input method types in full-width mode is read as ASCII;
// the words as typed stay beside the words as read.
func TestParseNormalisesFullWidth(t *testing.T) {
	cases := []struct {
		text, cmd string
		args, raw []string
		read      string
	}{
		{"开始　demo　steps＝２００", "train", []string{"demo", "steps=200"}, []string{"demo", "steps＝２００"}, "开始 demo steps=200"},
		{"开始 ｌｒ＝３ｅ－４", "train", []string{"lr=3e-4"}, []string{"ｌｒ＝３ｅ－４"}, "开始 lr=3e-4"},
		{"／ｓｔａｔｕｓ＠ＭｙＢｏｔ　１２", "status", []string{"12"}, []string{"１２"}, "/status@MyBot 12"},
		{"画图１２", "plot", []string{"12"}, []string{"12"}, "画图12"},
		{"备注 3 基线，batch：64", "note", []string{"3", "基线,batch:64"}, []string{"3", "基线，batch：64"}, "备注 3 基线,batch:64"},
	}
	for _, c := range cases {
		p := Parse(c.text)
		if p.Cmd == nil || p.Cmd.Name != c.cmd || !slices.Equal(p.Args, c.args) || !slices.Equal(p.Raw, c.raw) || p.Text != c.read {
			t.Errorf("Parse(%q) = %v %q raw %q read %q; want %s %q raw %q read %q", c.text, p.Cmd, p.Args, p.Raw, p.Text, c.cmd, c.args, c.raw, c.read)
		}
	}
	if p := Parse("状态 1"); p.Text != p.Typed {
		t.Errorf("ASCII text read as %q, typed %q", p.Text, p.Typed)
	}
}

// A mistyped command word finds the command it meant, in both languages;
// a word near nothing, or as near two commands, finds none.
func TestNearest(t *testing.T) {
	for word, want := range map[string]string{
		"staus": "status", "/stauts": "status", "stpo": "stop", "stop1": "stop", "trian": "train",
		"hepl": "help", "状体": "status", "画土": "plot", "comapre": "compare", "/Histroy": "",
		"hello": "", "x": "", "lr=0.1": "", "status": "",
	} {
		c, ok := Nearest(word)
		got := ""
		if ok {
			got = c.Name
		}
		if got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

// The note of a reply cut short is in the chat's language: a zh chat
// read "(N more bytes not sent: see 日志 or the run log)".
func TestCutNoteInTheChatsLanguage(t *testing.T) {
	long := strings.Repeat("一行输出\n", 2000)
	zh := SplitText(long, 1000, 2, i18n.Zh)
	if last := zh[len(zh)-1]; !strings.Contains(last, "字节没有发出：发送「日志」查看") || strings.Contains(last, "not sent") {
		t.Errorf("zh note: %q", last[max(0, len(last)-120):])
	}
	en := SplitText(long, 1000, 2, i18n.En)
	if last := en[len(en)-1]; !strings.Contains(last, "more bytes not sent: see /log") {
		t.Errorf("en note: %q", last[max(0, len(last)-120):])
	}
	if len(zh) != 2 || len(zh[1]) > 1000 {
		t.Errorf("%d parts, the last %d bytes", len(zh), len(zh[1]))
	}
}

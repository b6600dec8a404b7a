package chat

import (
	"regexp"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/i18n"
)

// argWords are words typed after a command word (画图 12 显存, 通知空闲 关):
// quoted as what to send, as the commands are.
var argWords = []string{"显存", "内存", "利用率", "时间", "步数", "关"}

// sendArg is a verb of sending followed by an unquoted argument: the
// command the code fills in ("发送 %s"); 已发送 %s is a signal sent.
var sendArg = regexp.MustCompile(`(^|[^已])(发送|输入)\s*%`)

// ChineseWords are the Chinese command words.
func chineseWords() []string {
	var ws []string
	for _, c := range Commands {
		ws = append(ws, c.Chinese)
	}
	return ws
}

// nounUses are the catalog messages where a command word stands alone as
// the noun it is, not as something to send ("任务：" heading the job list).
var nounUses = map[string][]string{
	"jobs.head":              {"任务"},
	"knob.no_signal":         {"任务"},
	"knob.no_live":           {"任务"},
	"checkpoint.unwatched":   {"任务"},
	"queue.head":             {"队列"},
	"queue.cancel_not_yours": {"排队"},
	"queue.cancel_done":      {"排队"},
	"gpu.line":               {"显卡"},
	"gpu.busy_line":          {"显卡"},
	"gpu.req_index":          {"显卡"},
	"gpu.req_indices":        {"显卡"},
	"gpu.never_missing":      {"显卡"},
	"gpu.never_small":        {"显卡"},
	"compare.head":           {"对比"},
	"compare.vs":             {"对比"},
	"fit.head":               {"适配"},
	"event.from_queue":       {"排队"},
	"router.pid_line":        {"日志"},
	"router.slurm_line":      {"日志"},
	"router.host_pid_line":   {"日志"},
	"detail.slurm_state":     {"状态"},
	"detail.slurm_node_fail": {"状态"},
	"button.stop":            {"停止"},
	"button.status":          {"状态"},
	"button.plot":            {"画图"},
	"button.queue":           {"排队"},
	"button.no":              {"取消"},
}

// TestChineseQuotesEveryCommandWord holds the catalog's Chinese to one
// quoting style: a command word that stands for something to send is in
// 「」 (发送「停止」, 例如「日志 50」), and 「」 holds nothing else.
func TestChineseQuotesEveryCommandWord(t *testing.T) {
	words := chineseWords()
	for _, m := range i18n.Catalog() {
		bare := i18n.BareCommandWords(m.ZH, words)
		var left []string
		for _, w := range bare {
			if !containsString(nounUses[m.Key], w) {
				left = append(left, w)
			}
		}
		if len(left) > 0 {
			t.Errorf("%s: %q has the command words %q unquoted: write 「%s」", m.Key, m.ZH, left, left[0])
		}
		if sendArg.MatchString(m.ZH) {
			t.Errorf("%s: %q sends a command it is given unquoted: write 发送「%%s」", m.Key, m.ZH)
		}
		if q := i18n.QuotedNotCommands(m.ZH, append(words, argWords...)); len(q) > 0 {
			t.Errorf("%s: %q quotes %q with 「」, which is kept for commands", m.Key, m.ZH, q)
		}
		if strings.ContainsAny(m.ZH, "\"'") && !strings.Contains(m.ZH, "=") {
			t.Errorf("%s: %q has ASCII quotes: Chinese text quotes “…” (what was typed) or 「…」 (commands)", m.Key, m.ZH)
		}
	}
}

func TestQuotingCheckFindsBareWords(t *testing.T) {
	words := chineseWords()
	for s, want := range map[string]string{
		"发送 停止 停掉它": "停止", "输入 开始 开始训练": "开始", "（队列 可查看）": "队列", "例如 日志 50": "日志",
		"发送「停止」停掉它": "", "开始训练": "", "已取消": "", "「对比 12 13」": "",
	} {
		got := strings.Join(i18n.BareCommandWords(s, words), " ")
		if got != want {
			t.Errorf("%q: got %q, want %q", s, got, want)
		}
	}
	if q := i18n.QuotedNotCommands("见「说明」", words); len(q) != 1 {
		t.Errorf("「说明」 is not a command: got %q", q)
	}
}

// TestChineseHasNoEnglishProse fails on a catalog message whose Chinese
// still holds English words outside the kept terms (i18n.LatinKept).
func TestChineseHasNoEnglishProse(t *testing.T) {
	for _, m := range i18n.Catalog() {
		if w := i18n.LatinOutside(m.ZH); len(w) > 0 {
			t.Errorf("%s: %q has English %q", m.Key, m.ZH, w)
		}
	}
	if w := i18n.LatinOutside("上限 23 GiB（host MemAvailable now）"); strings.Join(w, " ") != "host now" {
		t.Errorf("the check misses English: got %q", w)
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

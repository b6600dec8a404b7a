package i18n

import (
	"regexp"
	"strings"
)

// A run's recorded detail (Run.Detail, `runs --json`'s "detail") is the
// supervisor's English, kept so in the record. Detail words its common
// forms — the ones trainer's end classification writes — in Chinese for a
// Chinese chat; a part it does not know stays as written (quoted English
// inside the Chinese report, as before).
var (
	DetailExit       = Def(Msg{Key: "detail.exit", EN: "exit status %s", ZH: "退出码 %s"})
	DetailKilledBy   = Def(Msg{Key: "detail.killed_by", EN: "killed by %s", ZH: "被 %s 终止"})
	DetailStderr     = Def(Msg{Key: "detail.last_stderr", EN: "; last stderr:\n", ZH: "；stderr 最后几行：\n"})
	DetailRecovered  = Def(Msg{Key: "detail.recovered", EN: ", then it recovered", ZH: "，之后恢复了"})
	DetailStoppedNaN = Def(Msg{Key: "detail.stopped_nan", EN: "; stopped by trainbot", ZH: "；已被 trainbot 停止"})
	DetailNoStart    = Def(Msg{Key: "detail.no_start", EN: "could not start: ", ZH: "无法启动："})
	DetailStrayKill  = Def(Msg{Key: "detail.stray_kill", EN: "killed by SIGKILL that trainbot did not send; the memory cgroup counts no OOM kill during the run, so something else killed it",
		ZH: "被一个不是 trainbot 发出的 SIGKILL 终止；内存 cgroup 在训练期间没有记录 OOM kill，所以是别的东西杀死了它"})
)

var (
	detailNaN  = regexp.MustCompile(`([^\s;]+) is (NaN|\+Inf|-Inf) for (\d+) points in a row \(step (-?\d+)\)`)
	detailExit = regexp.MustCompile(`^(?:exit status (\d+)|killed by (SIG[A-Z0-9]+))`)
)

// Detail is a run's recorded detail in l: in Chinese for Zh where its
// forms are known, as recorded otherwise. What follows "last stderr:" is
// the program's own output and is never changed.
func (l Lang) Detail(d string) string {
	if l != Zh || d == "" {
		return d
	}
	head, stderr, hasStderr := strings.Cut(d, DetailStderr.EN)
	if head == DetailStrayKill.EN {
		head = DetailStrayKill.ZH
	}
	if rest, ok := strings.CutPrefix(head, DetailNoStart.EN); ok {
		head = DetailNoStart.ZH + rest
	}
	if m := detailExit.FindStringSubmatchIndex(head); m != nil {
		var w string
		if m[2] >= 0 {
			w = l.T(DetailExit, head[m[2]:m[3]])
		} else {
			w = l.T(DetailKilledBy, head[m[4]:m[5]])
		}
		head = w + head[m[1]:]
	}
	head = detailNaN.ReplaceAllStringFunc(head, func(s string) string {
		m := detailNaN.FindStringSubmatch(s)
		return l.T(NaNStreak, m[1], m[2], m[3], m[4]) // the alert's own words
	})
	head = strings.ReplaceAll(head, DetailRecovered.EN, DetailRecovered.ZH)
	head = strings.ReplaceAll(head, DetailStoppedNaN.EN, DetailStoppedNaN.ZH)
	if hasStderr {
		return head + DetailStderr.ZH + stderr
	}
	return head
}

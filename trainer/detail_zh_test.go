package trainer

import (
	"strings"
	"syscall"
	"testing"

	"github.com/trainbot/trainbot/i18n"
)

// TestClassifyDetailsInChinese holds i18n's Chinese wording of run details
// to the forms classify writes: none of its English phrases is left.
func TestClassifyDetailsInChinese(t *testing.T) {
	nan := "loss is NaN for 3 points in a row (step 5)"
	for _, e := range []ending{
		{exitCode: 1, stderrTail: []string{"Traceback", "ValueError: x"}},
		{exitCode: -1, signal: syscall.SIGSEGV},
		{exitCode: -1, signal: syscall.SIGKILL, oomKills: 0, stderrTail: []string{"bye"}},
		{exitCode: 0, nanSeen: nan},
		{exitCode: 2, nanSeen: nan, nanRecovered: true},
		{exitCode: 130, stopBy: "trainbot (NaN loss)", stopReason: OutcomeNaN, nanSeen: nan},
		{startErr: syscall.ENOENT},
	} {
		_, d := classify(e)
		zh := i18n.Zh.Detail(d)
		head, _, _ := strings.Cut(zh, "stderr")
		for _, en := range []string{"exit status", "killed by", "points in a row", "then it recovered", "stopped by", "could not start", "last stderr", "something else"} {
			if strings.Contains(head, en) {
				t.Errorf("%q in Chinese is %q: %q is left", d, zh, en)
			}
		}
	}
}

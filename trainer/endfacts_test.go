package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
)

// The record's detail is made from the end's facts: the same English as
// before there were facts, so histories, --json and scripts read alike.
func TestEndFactsEnglishIsTheRecordedDetail(t *testing.T) {
	nan := &NaNStreak{Metric: "loss", Value: math.NaN(), Count: 3, Step: 5}
	for _, c := range []struct {
		e    ending
		want string
	}{
		{ending{exitCode: 1, stderrTail: []string{"Traceback", "", "ValueError: x"}}, "exit status 1; last stderr:\nTraceback\nValueError: x"},
		{ending{exitCode: -1, signal: syscall.SIGSEGV, stderrTail: []string{"core"}}, "killed by SIGSEGV (segmentation fault); last stderr:\ncore"},
		{ending{exitCode: -1, signal: syscall.SIGKILL, oomKills: 0, stderrTail: []string{"bye"}}, "killed by SIGKILL that trainbot did not send; the memory cgroup counts no OOM kill during the run, so something else killed it; last stderr:\nbye"},
		{ending{exitCode: 0, nan: nan}, "loss is NaN for 3 points in a row (step 5)"},
		{ending{exitCode: 2, nan: nan, nanRecovered: true, stderrTail: []string{"e"}}, "exit status 2; loss is NaN for 3 points in a row (step 5), then it recovered; last stderr:\ne"},
		{ending{exitCode: 130, stopBy: "trainbot (NaN loss)", stopReason: OutcomeNaN, nan: nan}, "loss is NaN for 3 points in a row (step 5); stopped by trainbot"},
		{ending{exitCode: 130, stopBy: "ann", stopReason: OutcomeStopped}, "stopped by ann (exit status 130)"},
		{ending{exitCode: -1, signal: syscall.SIGKILL, sentKill: true, stopBy: "ann", stopReason: OutcomeStopped}, "stopped by ann (killed with SIGKILL after the grace periods)"},
		{ending{startErr: syscall.ENOENT}, "could not start: no such file or directory"},
		{ending{exitCode: 0}, "exit status 0"},
		{ending{exitCode: 130, stopBy: "alice", stopReason: OutcomeNaN}, "stopped by alice for a NaN loss"},
	} {
		_, f := classify(c.e)
		if got := f.English(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
		f.Notes = []string{"12 B of output were not written"}
		if got := f.English(); !strings.HasSuffix(got, "; 12 B of output were not written") {
			t.Errorf("with a note: %q", got)
		}
	}
}

// The end of a NaN run is recorded: its streak's value (NaN, ±Inf) is
// text in JSON, which has no such numbers.
func TestNaNStreakIsRecordable(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, f := classify(ending{exitCode: 0, nan: &NaNStreak{Metric: "loss", Value: v, Count: 3, Step: 5}})
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		var back EndFacts
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%v: read %s: %v", v, b, err)
		}
		if back.English() != f.English() || back.NaN.Count != 3 || back.NaN.Step != 5 || back.NaN.Metric != "loss" {
			t.Errorf("%v: %s read back as %q, want %q", v, b, back.English(), f.English())
		}
		if !strings.Contains(string(b), `"nan":{"metric":"loss","value":"`+fmt.Sprint(v)+`","count":3,"step":5}`) {
			t.Errorf("%v: %s", v, b)
		}
	}
}

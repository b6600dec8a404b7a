package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"
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

// The ends a run's owner decided, or nobody could tell, are facts too: their
// English is the detail as it was written before there were facts, and it
// reads back the same from JSON.
func TestOwnerEndsEnglishIsTheRecordedDetail(t *testing.T) {
	until := time.Date(2026, 12, 1, 9, 30, 0, 0, time.FixedZone("CST", 8*3600))
	written := until.Add(-time.Hour)
	for _, c := range []struct {
		f    EndFacts
		want string
	}{
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptSupervisorGone, SupervisorPID: 7},
			"the run's supervisor (pid 7) ended without recording how the run ended"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptSupervisorGone, SupervisorPID: 7, Orphans: &Orphans{PGID: 8, Until: until}},
			"the run's supervisor (pid 7) ended without recording how the run ended; its processes (group 8) lived on unsupervised until 2026-12-01T09:30:00+08:00"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptSupervisorGone, SupervisorPID: 7, Orphans: &Orphans{PGID: 8, Until: until, StoppedBy: "ann", Signal: int(syscall.SIGTERM)}},
			"the run's supervisor (pid 7) ended without recording how the run ended; its processes (group 8) lived on unsupervised until 2026-12-01T09:30:00+08:00, stopped by ann (SIGTERM)"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptTrainbotGone, SupervisorPID: 41},
			"trainbot (pid 41) stopped while the run was active; found at the next start"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptTrainbotGone, SupervisorPID: 41, LogWritten: &written, AlivePGID: 42},
			"trainbot (pid 41) stopped while the run was active; found at the next start; its log was last written 2026-12-01T08:30:00+08:00; its process group 42 is still alive, unsupervised"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptSlurmForgot, Slurm: &SlurmEnd{JobID: "12"}},
			"Slurm no longer knows job 12: it ended while no trainbot watched it, longer ago than the cluster's MinJobAge, on a cluster without accounting; how it ended is unknown"},
		{EndFacts{Why: WhyInterrupted, Interrupted: InterruptWatchEnded}, "the watch ended"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "TIMEOUT", TimeLimit: "00:01:00", Node: "n1"}, Signal: 15},
			"time limit 00:01:00 reached (Slurm state TIMEOUT)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "TIMEOUT"}}, "time limit ? reached (Slurm state TIMEOUT)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "FAILED", Node: "n1"}, Signal: 9}, "killed by signal 9 (Slurm state FAILED on n1)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "NODE_FAIL", Node: "n1"}}, "node failure (Slurm state NODE_FAIL on n1)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "OUT_OF_MEMORY"}}, "out of memory (Slurm state OUT_OF_MEMORY)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "PREEMPTED", Node: "n1"}}, "preempted (Slurm state PREEMPTED on n1)"},
		{EndFacts{Why: WhySlurm, Slurm: &SlurmEnd{JobID: "3", State: "CANCELLED", Node: "n1"}}, "cancelled outside trainbot"},
		{EndFacts{Why: WhyStopped, StoppedBy: "ann", StopHow: StopSlurmCancel, Slurm: &SlurmEnd{JobID: "3", State: "CANCELLED"}}, "stopped by ann (Slurm job cancelled)"},
		{EndFacts{Why: WhyStopped, StoppedBy: "bob", StopHow: StopSignalled, PID: 99}, "stopped by bob (the watched process, pid 99, was signalled)"},
		{EndFacts{Why: WhyUnwatched, StoppedBy: "ann", PID: 99, GoesOn: true}, "no longer watched: stopped by ann; the process (pid 99) goes on"},
		{EndFacts{Why: WhyUnwatched, StoppedBy: "ann"}, "no longer watched: stopped by ann"},
		{EndFacts{Why: WhyWatchExit, PID: 99}, "the process (pid 99) exited; its exit status is unknown (it is not trainbot's child)"},
		{EndFacts{Why: WhyWatchExit, PID: 99, ErrorLine: "ValueError: bad shape"}, "the process (pid 99) exited; its log ends with an error: ValueError: bad shape"},
		{EndFacts{Why: WhyWatchExit, PID: 99, OOM: &OOM{Kind: "host", GPU: -1, FreeBytes: -1}}, "the process (pid 99) exited; its log's last lines say: host memory exhausted"},
		{EndFacts{Why: WhyNoStart, StartError: "its directory /d/runs/1 already exists: …", RunDirTaken: "/d/runs/1"}, "could not start: its directory /d/runs/1 already exists: …"},
	} {
		f := c.f
		if got := f.English(); got != c.want {
			t.Errorf("%s/%s: got %q\nwant %q", f.Why, f.Interrupted, got, c.want)
		}
		b, err := json.Marshal(&f)
		if err != nil {
			t.Fatal(err)
		}
		var back EndFacts
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := back.English(); got != c.want {
			t.Errorf("%s read back: got %q, want %q", b, got, c.want)
		}
		if cl := f.clone(); cl.English() != c.want {
			t.Errorf("%s: a clone says %q", f.Why, cl.English())
		}
	}
}

// Facts recorded by the version before these fields read as they were.
func TestEndFactsOfEarlierRowsRead(t *testing.T) {
	var f EndFacts
	if err := json.Unmarshal([]byte(`{"why":"exit","exit_code":1,"stderr_tail":["boom"],"notes":["n"]}`), &f); err != nil {
		t.Fatal(err)
	}
	if got, want := f.English(), "exit status 1; last stderr:\nboom; n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// An end's remarks are facts too, worded after the rest as before.
func TestEndNotesEnglish(t *testing.T) {
	f := EndFacts{Why: WhyInterrupted, Interrupted: InterruptWatchEnded, EndNotes: EndNotes{
		Dropped:        &Dropped{Bytes: 2048},
		LogCut:         &LogCut{MaxLogBytes: 1 << 20, From: 1024, To: 4096},
		Survivors:      2,
		UnseenRules:    []UnseenRule{{Rule: "val_acc below 0.5", Metric: "val_acc"}, {Rule: "steps_per_s below 1 for 5m", Metric: MetricStepsPerSec}, {Rule: "gpu_util below 10 for 10m", Metric: MetricGPUUtil}},
		MetricNamesMax: 256,
	}}
	want := "the watch ended; 2.00 KiB of output were not written to the log (the disk did not keep up); " +
		"the log passed max_log_bytes (1.00 MiB): 3.00 KiB of older output after its first 1.00 KiB were freed; " +
		"2 process(es) of the run survived SIGKILL; " +
		`alert rule "val_acc below 0.5" watched val_acc, which the run never printed; ` +
		`alert rule "steps_per_s below 1 for 5m" watched steps_per_s, which could not be measured (no step was printed); ` +
		`alert rule "gpu_util below 10 for 10m" watched gpu_util, which NVML never reported for the run's processes; ` +
		"the output named more than 256 metrics: points of further metric names were not recorded (the log has those max_log_bytes did not free)"
	if got := f.English(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	f.LogCut, f.Dropped.Reason = nil, "no space left on device"
	if got := f.English(); !strings.Contains(got, "(no space left on device)") || !strings.HasSuffix(got, "(the log has them)") {
		t.Errorf("got %q", got)
	}
	b, _ := json.Marshal(&f)
	if !strings.Contains(string(b), `"dropped":{"bytes":2048,"reason":"no space left on device"}`) || !strings.Contains(string(b), `"unseen_rules":[{"rule":"val_acc below 0.5","metric":"val_acc"}`) ||
		!strings.Contains(string(b), `"metric_names_max":256`) || !strings.Contains(string(b), `"survivors":2`) {
		t.Errorf("JSON %s", b)
	}
}

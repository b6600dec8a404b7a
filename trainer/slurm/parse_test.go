package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func localTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// want is what a fixture must parse to and how it must be classified.
type want struct {
	id, name, state, reason, partition, node, limit string
	exit, signal                                    int
	start, end                                      string // "" for the zero time
	outcome                                         string
	detail                                          string // a part of Classify's detail
}

func checkJob(t *testing.T, j Job, w want) {
	t.Helper()
	for _, c := range []struct{ field, got, want string }{
		{"ID", j.ID, w.id}, {"Name", j.Name, w.name}, {"State", j.State, w.state},
		{"Reason", j.Reason, w.reason}, {"Partition", j.Partition, w.partition},
		{"Node", j.Node, w.node}, {"TimeLimit", j.TimeLimit, w.limit},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.field, c.got, c.want)
		}
	}
	if j.ExitCode != w.exit || j.Signal != w.signal {
		t.Errorf("exit code: got %d:%d, want %d:%d", j.ExitCode, j.Signal, w.exit, w.signal)
	}
	for _, c := range []struct {
		field string
		got   time.Time
		want  string
	}{{"Start", j.Start, w.start}, {"End", j.End, w.end}} {
		if c.want == "" {
			if !c.got.IsZero() {
				t.Errorf("%s: got %v, want the zero time", c.field, c.got)
			}
		} else if want := localTime(t, c.want); !c.got.Equal(want) {
			t.Errorf("%s: got %v, want %v", c.field, c.got, want)
		}
	}
	outcome, detail := Classify(j)
	if outcome != w.outcome || !strings.Contains(detail, w.detail) {
		t.Errorf("Classify: got %q, %q; want %q and a detail with %q", outcome, detail, w.outcome, w.detail)
	}
}

func TestParseScontrolFixtures(t *testing.T) {
	const at = "2026-11-30T23:32:34"
	for _, tc := range []struct {
		file string
		want want
	}{
		{"scontrol-completed.txt", want{id: "1", name: "trainbot-1-ok", state: "COMPLETED", partition: "debug", node: "vm",
			limit: "365-00:00:00", start: at, end: at, outcome: Finished}},
		{"scontrol-failed-exit3.txt", want{id: "2", name: "trainbot-2-fail", state: "FAILED", reason: "NonZeroExitCode",
			partition: "debug", node: "vm", limit: "365-00:00:00", exit: 3, start: at, end: at,
			outcome: Failed, detail: "exit code 3"}},
		{"scontrol-timeout.txt", want{id: "3", name: "trainbot-3-timeout", state: "TIMEOUT", reason: "TimeLimit",
			partition: "debug", node: "vm", limit: "00:01:00", signal: 15,
			start: "2026-11-30T23:32:35", end: "2026-11-30T23:33:47",
			outcome: Timeout, detail: "time limit 00:01:00 reached"}},
		{"scontrol-running.txt", want{id: "6", name: "trainbot-6-run", state: "RUNNING", partition: "debug", node: "vm",
			limit: "UNLIMITED", start: "2026-11-30T23:32:46", outcome: "", detail: "RUNNING on vm"}},
		{"scontrol-pending-begintime.txt", want{id: "4", name: "trainbot-4-begin", state: "PENDING", reason: "BeginTime",
			partition: "debug", limit: "UNLIMITED", start: "2026-12-01T00:32:34", outcome: "", detail: "PENDING (BeginTime)"}},
		{"scontrol-pending-resources.txt", want{id: "7", name: "trainbot-7-res", state: "PENDING", reason: "Resources",
			partition: "debug", limit: "UNLIMITED", outcome: "", detail: "PENDING (Resources)"}},
		{"scontrol-cancelled-running.txt", want{id: "6", name: "trainbot-6-run", state: "CANCELLED", partition: "debug",
			node: "vm", limit: "UNLIMITED", signal: 15, start: "2026-11-30T23:32:46", end: "2026-11-30T23:32:49",
			outcome: Stopped, detail: "CANCELLED"}},
		{"scontrol-cancelled-pending.txt", want{id: "7", name: "trainbot-7-res", state: "CANCELLED", reason: "Resources",
			partition: "debug", limit: "UNLIMITED", start: "2026-11-30T23:32:49", end: "2026-11-30T23:32:49",
			outcome: Stopped, detail: "CANCELLED"}},
		{"scontrol-completing.txt", want{id: "14", name: "trainbot-14-completing", state: "COMPLETING", partition: "debug",
			node: "vm", limit: "365-00:00:00", start: "2026-11-30T23:40:07", end: "2026-11-30T23:40:08",
			outcome: "", detail: "COMPLETING"}},
		{"scontrol-deadline.txt", want{id: "5", name: "trainbot-5-deadline", state: "DEADLINE", reason: "DeadLine",
			partition: "debug", limit: "00:10:00", signal: 1, start: at, end: at,
			outcome: Interrupted, detail: "DEADLINE"}},
		{"scontrol-node-fail.txt", want{id: "11", name: "trainbot-8-nodefail", state: "NODE_FAIL", reason: "NodeDown",
			partition: "debug", node: "vm", limit: "UNLIMITED", signal: 15,
			start: "2026-11-30T23:35:00", end: "2026-11-30T23:35:01", outcome: NodeFailure, detail: "NODE_FAIL on vm"}},
		{"scontrol-requeued-after-node-fail.txt", want{id: "12", name: "trainbot-9-requeue", state: "PENDING",
			reason: "BeginTime", partition: "debug", limit: "365-00:00:00",
			start: "2026-11-30T23:37:06", end: "2027-11-30T23:37:06", outcome: "", detail: "PENDING (BeginTime)"}},
		{"scontrol-preempted.txt", want{id: "1", name: "trainbot-10-low", state: "PREEMPTED", partition: "low", node: "vm",
			limit: "UNLIMITED", signal: 15, start: "2026-11-30T23:35:21", end: "2026-11-30T23:35:22",
			outcome: Preempted, detail: "PREEMPTED"}},
		{"scontrol-out-of-memory.txt", want{id: "21", name: "trainbot-21-oom", state: "OUT_OF_MEMORY", reason: "OutOfMemory",
			partition: "debug", node: "vm", limit: "365-00:00:00", signal: 125, start: at, end: at,
			outcome: OOM, detail: "OUT_OF_MEMORY"}},
		{"scontrol-boot-fail.txt", want{id: "22", name: "trainbot-22-bootfail", state: "BOOT_FAIL", reason: "JobLaunchFailure",
			partition: "debug", node: "vm", limit: "365-00:00:00", signal: 1, start: at, end: at,
			outcome: Interrupted, detail: "BOOT_FAIL"}},
		// The job is named "odd name Reason=x": a name is cut where a key that
		// Slurm prints later appears in it; the real fields are all right.
		{"scontrol-spaces.txt", want{id: "13", name: "odd name", state: "RUNNING", partition: "debug", node: "vm",
			limit: "UNLIMITED", start: "2026-11-30T23:35:32", outcome: "", detail: "RUNNING on vm"}},
		{"scontrol-multiline.txt", want{id: "13", name: "odd name", state: "RUNNING", partition: "debug", node: "vm",
			limit: "UNLIMITED", start: "2026-11-30T23:35:32", outcome: "", detail: "RUNNING on vm"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			j, err := ParseScontrol(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if j.Source != "scontrol" {
				t.Errorf("Source: got %q, want scontrol", j.Source)
			}
			checkJob(t, j, tc.want)
		})
	}
}

// The free-text values of scontrol-spaces.txt: a path with spaces, a comment
// that contains "JobState=FAKE" and ends with scontrol's extra space.
func TestParseScontrolFreeText(t *testing.T) {
	for _, file := range []string{"scontrol-spaces.txt", "scontrol-multiline.txt"} {
		t.Run(file, func(t *testing.T) {
			j, err := ParseScontrol(readFixture(t, file))
			if err != nil {
				t.Fatal(err)
			}
			if j.State != "RUNNING" || j.Reason != "" {
				t.Errorf("got state %q reason %q, want RUNNING and none (the comment and name hold fakes)", j.State, j.Reason)
			}
			if j.BatchHost != "vm" {
				t.Errorf("BatchHost: got %q, want vm", j.BatchHost)
			}
		})
	}
}

func TestParseScontrolTakesTheFirstRecord(t *testing.T) {
	one := readFixture(t, "scontrol-completed.txt")
	two := readFixture(t, "scontrol-failed-exit3.txt")
	j, err := ParseScontrol(one + two)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "1" || j.State != "COMPLETED" {
		t.Errorf("got job %s %s, want job 1 COMPLETED", j.ID, j.State)
	}
}

func TestParseScontrolRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"slurm_load_jobs error: Invalid job id specified\n",
		"JobId=1 JobName=x\n", // no JobState
		"JobId=1 JobState=FAILED ExitCode=three\n",
		"JobId=1 JobState=FAILED StartTime=yesterday\n",
	} {
		if j, err := ParseScontrol(in); err == nil {
			t.Errorf("ParseScontrol(%q): got %+v, want an error", in, j)
		}
	}
}

func TestParseSacctFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want want
	}{
		{"sacct-completed.txt", want{id: "1", name: "trainbot-1-ok", state: "COMPLETED", partition: "debug", node: "vm",
			limit: "365-00:00:00", start: "2026-11-30T23:32:34", end: "2026-11-30T23:32:34", outcome: Finished}},
		{"sacct-failed-exit3.txt", want{id: "2", name: "trainbot-2-a|b", state: "FAILED", partition: "debug", node: "vm",
			limit: "365-00:00:00", exit: 3, start: "2026-11-30T23:32:34", end: "2026-11-30T23:32:34",
			outcome: Failed, detail: "exit code 3"}},
		{"sacct-cancelled.txt", want{id: "6", name: "trainbot-6-run", state: "CANCELLED", partition: "debug", node: "vm",
			limit: "UNLIMITED", signal: 15, start: "2026-11-30T23:32:46", end: "2026-11-30T23:32:49",
			outcome: Stopped, detail: "CANCELLED"}},
		{"sacct-timeout.txt", want{id: "3", name: "trainbot-3-timeout", state: "TIMEOUT", partition: "debug", node: "vm",
			limit: "00:01:00", signal: 15, start: "2026-11-30T23:32:35", end: "2026-11-30T23:33:47",
			outcome: Timeout, detail: "time limit 00:01:00"}},
		{"sacct-out-of-memory.txt", want{id: "21", name: "trainbot-21-oom", state: "OUT_OF_MEMORY", partition: "gpu",
			node: "gpu01", limit: "04:00:00", signal: 125, start: "2026-11-30T23:40:02", end: "2026-11-30T23:40:09",
			outcome: OOM, detail: "gpu01"}},
		{"sacct-pending.txt", want{id: "4", name: "trainbot-4-begin", state: "PENDING", partition: "debug",
			limit: "UNLIMITED", outcome: "", detail: "PENDING"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			j, err := ParseSacct(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if j.Source != "sacct" {
				t.Errorf("Source: got %q, want sacct", j.Source)
			}
			checkJob(t, j, tc.want)
		})
	}
}

func TestParseSacctRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"1|COMPLETED|0:0\n",
		"1.batch|COMPLETED|0:0|Unknown|Unknown|vm||Unknown||batch\n", // steps only
	} {
		if j, err := ParseSacct(in); err == nil {
			t.Errorf("ParseSacct(%q): got %+v, want an error", in, j)
		}
	}
}

// Every outcome of the table, and states Classify must not guess.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		job             Job
		outcome, detail string
	}{
		{Job{State: "COMPLETED"}, Finished, ""},
		{Job{State: "FAILED", ExitCode: 3}, Failed, "exit code 3 (Slurm state FAILED)"},
		{Job{State: "FAILED", Signal: 9, Node: "n1"}, Failed, "killed by signal 9 (Slurm state FAILED on n1)"},
		{Job{State: "NODE_FAIL", Node: "n1"}, NodeFailure, "node failure (Slurm state NODE_FAIL on n1)"},
		{Job{State: "TIMEOUT", TimeLimit: "1-00:00:00"}, Timeout, "time limit 1-00:00:00 reached (Slurm state TIMEOUT)"},
		{Job{State: "OUT_OF_MEMORY", Node: "n1"}, OOM, "out of memory (Slurm state OUT_OF_MEMORY on n1)"},
		{Job{State: "CANCELLED", Reason: "Resources"}, Stopped, "CANCELLED"},
		{Job{State: "PREEMPTED"}, Preempted, "preempted (Slurm state PREEMPTED)"},
		{Job{State: "BOOT_FAIL"}, Interrupted, "Slurm state BOOT_FAIL"},
		{Job{State: "DEADLINE"}, Interrupted, "Slurm state DEADLINE"},
		{Job{State: "PENDING", Reason: "Resources"}, "", "PENDING (Resources)"},
		{Job{State: "RUNNING", Node: "gpu[01-02]"}, "", "RUNNING on gpu[01-02]"},
		{Job{State: "COMPLETING", Node: "n1"}, "", "COMPLETING on n1"},
		{Job{State: "SUSPENDED", Node: "n1"}, "", "SUSPENDED on n1"},
		{Job{State: "REQUEUE_HOLD", Reason: "JobHeldAdmin"}, "", "REQUEUE_HOLD (JobHeldAdmin)"},
		{Job{State: "SPECIAL_EXIT"}, "", "SPECIAL_EXIT"},
		{Job{State: "REVOKED"}, "", "REVOKED"},
		{Job{State: "SOMETHING_NEW"}, "", "SOMETHING_NEW"},
		{Job{}, "", "no state"},
	} {
		t.Run(tc.job.State, func(t *testing.T) {
			outcome, detail := Classify(tc.job)
			if outcome != tc.outcome || detail != tc.detail {
				t.Errorf("got %q, %q; want %q, %q", outcome, detail, tc.outcome, tc.detail)
			}
		})
	}
}

func TestParseSstat(t *testing.T) {
	for _, c := range []struct {
		out  string
		want int64
		err  string
	}{
		{"86.batch|219812K\n", 219812 << 10, ""},
		{"86.batch|219812K\n86.0|1.50G\n86.extern|0\n", 3 << 29, ""},
		{"86.batch|\n", 0, "no step"},
		{"", 0, "no step"},
		{"87.batch|5K\n", 0, "no step"}, // another job's line
		{"86.batch|lots\n", 0, `MaxRSS "lots"`},
		{"garbage\n", 0, "unexpected line"},
	} {
		got, err := parseSstat(c.out, "86")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %d, %v; want an error with %q", c.out, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %d, %v; want %d", c.out, got, err, c.want)
		}
	}
}

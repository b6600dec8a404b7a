package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownJob is returned by Query when neither scontrol nor sacct knows
// the job: it ended more than MinJobAge ago on a cluster without accounting,
// or it never existed.
var ErrUnknownJob = errors.New("slurm: unknown job")

// Job is what Slurm says about a job.
type Job struct {
	ID   string
	Name string
	// State is Slurm's name for it: PENDING, RUNNING, COMPLETING, COMPLETED,
	// FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED,
	// BOOT_FAIL, DEADLINE, SUSPENDED, REQUEUED, ... scontrol shows a flag
	// (COMPLETING, CONFIGURING, REQUEUED, ...) instead of the base state while
	// it is set.
	State string
	// Reason is why a job waits (Resources, Priority, BeginTime, ...) or why
	// it ended (NonZeroExitCode, TimeLimit, NodeDown, OutOfMemory, ...); ""
	// for Slurm's "None". A job cancelled while pending keeps its pending
	// reason. sacct does not report it.
	Reason    string
	Partition string
	Node      string // the nodes allocated (NodeList, e.g. "gpu[01-02]"); "" while pending
	BatchHost string // the node that runs the batch script and writes the log (scontrol only)
	ExitCode  int    // the batch script's exit status: the command's, thanks to exec
	Signal    int    // the signal that ended it, 0 if none
	// Submit, Start and End are zero when Slurm does not know them. For a
	// pending job Start is Slurm's expected start, for a running one End is
	// when its time limit runs out.
	Submit, Start, End time.Time
	// TimeLimit as Slurm prints it: "1-00:00:00", "01:00:00", "UNLIMITED",
	// "Partition_Limit"; "" when not known.
	TimeLimit string
	Restarts  int    // how many times Slurm requeued it (scontrol only)
	Source    string // "scontrol" or "sacct"
}

// Query asks `scontrol show job -o ID`, then, when scontrol no longer knows
// the job, `sacct -j ID`. It returns ErrUnknownJob when neither knows it;
// another error (the controller not answering, a timeout) says nothing about
// the job.
func Query(ctx context.Context, id string) (Job, error) {
	return query(ctx, id, run)
}

// sacctFields are asked of sacct, in this order; JobName comes last because
// a name may contain the separator "|".
const sacctFields = "JobID,State,ExitCode,Start,End,NodeList,Partition,Submit,Timelimit,JobName"

func query(ctx context.Context, id string, run runner) (Job, error) {
	if err := checkID(id); err != nil {
		return Job{}, err
	}
	out, err := run(ctx, CallTimeout, "scontrol", "show", "job", "-o", id)
	if err == nil {
		j, perr := ParseScontrol(string(out))
		if perr != nil {
			return Job{}, fmt.Errorf("query job %s: %w", id, perr)
		}
		return j, nil
	}
	if !strings.Contains(stderrOf(err), "Invalid job id") {
		return Job{}, fmt.Errorf("query job %s: %w", id, err)
	}
	out, serr := run(ctx, CallTimeout, "sacct", "-j", id, "-n", "-P", "-o", sacctFields)
	if serr != nil {
		// Typically "Slurm accounting storage is disabled" (no slurmdbd).
		return Job{}, fmt.Errorf("%w %s: scontrol: invalid job id; sacct: %v", ErrUnknownJob, id, serr)
	}
	j, perr := parseSacct(string(out), id)
	if errors.Is(perr, errNoJob) {
		return Job{}, fmt.Errorf("%w %s: scontrol: invalid job id; sacct: no such job", ErrUnknownJob, id)
	}
	if perr != nil {
		return Job{}, fmt.Errorf("query job %s: %w", id, perr)
	}
	return j, nil
}

// scontrolKeys are the keys of Slurm 22.05's job record
// (slurm_sprint_job_info), in the order they are printed.
var scontrolKeys = []string{
	"JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset",
	"JobName", "HetJobIdSet", "UserId", "GroupId", "MCS_label", "Priority", "Nice",
	"Account", "QOS", "WCKey", "JobState", "Reason", "Dependency", "Requeue", "Restarts",
	"BatchFlag", "Reboot", "ExitCode", "DerivedExitCode", "RunTime", "TimeLimit", "TimeMin",
	"SubmitTime", "EligibleTime", "AccrueTime", "ResizeTime", "StartTime", "EndTime",
	"Deadline", "CronJob", "CrontabSpec", "PreemptEligibleTime", "PreemptTime",
	"SuspendTime", "SecsPreSuspend", "LastSchedEval", "Scheduler", "Partition",
	"AllocNode:Sid", "ReqNodeList", "ExcNodeList", "NodeList", "SchedNodeList",
	"BatchFeatures", "BatchHost", "FedOrigin", "FedViableSiblings", "FedActiveSiblings",
	"NumNodes", "NumCPUs", "NumTasks", "CPUs/Task", "ReqB:S:C:T", "TRES", "Socks/Node",
	"NtasksPerN:B:S:C", "CoreSpec", "ThreadSpec", "JOB_GRES", "Nodes", "CPU_IDs", "Mem",
	"GRES", "MinCPUsNode", "MinMemoryNode", "MinMemoryCPU", "MinTmpDiskNode", "Features",
	"DelayBoot", "ClusterFeatures", "Prefer", "Reservation", "OverSubscribe", "Contiguous",
	"Licenses", "Network", "Command", "WorkDir", "AdminComment", "SystemComment",
	"Comment", "StdErr", "StdIn", "StdOut", "Switches", "BurstBuffer", "BurstBufferState",
	"Power", "GresEnforceBind", "KillOInInvalidDependent", "SpreadJob", "CpusPerTres",
	"MemPerTres", "TresBind", "TresFreq", "TresPerJob", "TresPerNode", "TresPerSocket",
	"TresPerTask", "MailUser", "MailType", "NtasksPerTRES", "Container", "SELinuxContext",
}

// freeText are the keys whose values are printed as given, spaces included
// (names, paths, comments). Reason is not one: scontrol turns its spaces
// into "_".
var freeText = map[string]bool{
	"JobName": true, "Dependency": true, "Command": true, "WorkDir": true,
	"AdminComment": true, "SystemComment": true, "Comment": true,
	"StdErr": true, "StdIn": true, "StdOut": true, "Features": true,
	"ClusterFeatures": true, "Prefer": true, "Reservation": true,
	"Licenses": true, "Network": true, "MailUser": true, "Container": true,
	"BurstBuffer": true, "BurstBufferState": true, "SELinuxContext": true,
	"CrontabSpec": true, "BatchFeatures": true,
}

var keyOrder = func() map[string]int {
	m := make(map[string]int, len(scontrolKeys))
	for i, k := range scontrolKeys {
		m[k] = i + 1
	}
	return m
}()

// ParseScontrol reads the first job record of `scontrol show job [-o] ID`:
// one line of KEY=VALUE pairs separated by spaces with -o, or the same pairs
// over indented lines without it.
//
// Most values have no spaces; names, paths and comments (freeText) are
// printed as given and may contain spaces and even "KEY=" text. A word
// "KEY=..." ends such a value only when KEY is a key Slurm prints after the
// current one: the printing order is fixed, so a job named "a Reason=x" or a
// comment "JobState=X" cannot pass for the real fields. Unknown keys (of a
// newer Slurm) are read as keys, except inside a free-text value.
func ParseScontrol(out string) (Job, error) {
	fields := map[string]string{}
	records := 0
	pos, cur := 0, ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "JobId=") {
			records++
			if records > 1 {
				break
			}
		}
		if records == 0 || trimmed == "" {
			continue
		}
		cur = "" // a free-text value ends with its line
		for _, word := range strings.Split(trimmed, " ") {
			key, value, isPair := splitPair(word)
			if isPair && cur != "" && freeText[cur] {
				if i := keyOrder[key]; i == 0 || i <= pos {
					isPair = false // part of the free-text value
				}
			}
			if !isPair {
				if cur != "" {
					fields[cur] += " " + word
				}
				continue
			}
			if i := keyOrder[key]; i > pos {
				pos = i
			}
			cur = key
			fields[key] = value
		}
	}
	if records == 0 {
		return Job{}, fmt.Errorf("scontrol: no JobId= in %q", truncate(out))
	}
	for k := range freeText {
		if v, ok := fields[k]; ok {
			fields[k] = strings.TrimRight(v, " ")
		}
	}
	j := Job{
		ID:        fields["JobId"],
		Name:      fields["JobName"],
		State:     fields["JobState"],
		Reason:    fields["Reason"],
		Partition: fields["Partition"],
		Node:      fields["NodeList"],
		BatchHost: fields["BatchHost"],
		TimeLimit: fields["TimeLimit"],
		Source:    "scontrol",
	}
	if j.Reason == "None" {
		j.Reason = ""
	}
	if j.Node == "(null)" {
		j.Node = ""
	}
	if j.State == "" {
		return Job{}, fmt.Errorf("scontrol: no JobState in %q", truncate(out))
	}
	var err error
	if j.ExitCode, j.Signal, err = parseExitCode(fields["ExitCode"]); err != nil {
		return Job{}, fmt.Errorf("scontrol job %s: %w", j.ID, err)
	}
	if s := fields["Restarts"]; s != "" {
		if j.Restarts, err = strconv.Atoi(s); err != nil {
			return Job{}, fmt.Errorf("scontrol job %s: Restarts %q: %w", j.ID, s, err)
		}
	}
	for _, t := range []struct {
		key string
		to  *time.Time
	}{{"SubmitTime", &j.Submit}, {"StartTime", &j.Start}, {"EndTime", &j.End}} {
		if *t.to, err = parseTime(fields[t.key]); err != nil {
			return Job{}, fmt.Errorf("scontrol job %s: %s: %w", j.ID, t.key, err)
		}
	}
	return j, nil
}

// splitPair splits "KEY=VALUE" when KEY looks like one of scontrol's keys.
func splitPair(word string) (key, value string, ok bool) {
	i := strings.IndexByte(word, '=')
	if i <= 0 {
		return "", "", false
	}
	key = word[:i]
	for j, c := range key {
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '_' || c == ':' || c == '/')) {
			return "", "", false
		}
	}
	return key, word[i+1:], true
}

var errNoJob = errors.New("no such job")

// ParseSacct reads `sacct -n -P -o ` + sacctFields output: one line per job
// and step ("42", "42.batch", "42.extern"); it returns the job's line (the
// first without a step suffix).
func ParseSacct(out string) (Job, error) {
	return parseSacct(out, "")
}

func parseSacct(out, id string) (Job, error) {
	names := strings.Split(sacctFields, ",")
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", len(names))
		if len(f) < len(names) {
			return Job{}, fmt.Errorf("sacct: %d fields in %q, want %d (%s)", len(f), line, len(names), sacctFields)
		}
		if strings.Contains(f[0], ".") || (id != "" && f[0] != id) {
			continue
		}
		j := Job{ID: f[0], Partition: f[6], TimeLimit: f[8], Name: f[9], Source: "sacct"}
		// "CANCELLED by 1000": the uid that cancelled it.
		j.State, _, _ = strings.Cut(f[1], " ")
		if f[5] != "None assigned" {
			j.Node = f[5]
		}
		var err error
		if j.ExitCode, j.Signal, err = parseExitCode(f[2]); err != nil {
			return Job{}, fmt.Errorf("sacct job %s: %w", j.ID, err)
		}
		for _, t := range []struct {
			v  string
			to *time.Time
		}{{f[3], &j.Start}, {f[4], &j.End}, {f[7], &j.Submit}} {
			if *t.to, err = parseTime(t.v); err != nil {
				return Job{}, fmt.Errorf("sacct job %s: %w", j.ID, err)
			}
		}
		return j, nil
	}
	return Job{}, errNoJob
}

// parseExitCode reads "STATUS:SIGNAL" ("3:0", "0:15").
func parseExitCode(s string) (code, sig int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("ExitCode %q: want STATUS:SIGNAL", s)
	}
	if code, err = strconv.Atoi(a); err != nil {
		return 0, 0, fmt.Errorf("ExitCode %q: %w", s, err)
	}
	if sig, err = strconv.Atoi(b); err != nil {
		return 0, 0, fmt.Errorf("ExitCode %q: %w", s, err)
	}
	return code, sig, nil
}

// parseTime reads Slurm's standard time format, in local time (Slurm prints
// times in the zone of the command that prints them); "Unknown", "None" and
// "N/A" are the zero time.
func parseTime(s string) (time.Time, error) {
	switch s {
	case "", "Unknown", "None", "N/A", "(null)":
		return time.Time{}, nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want YYYY-MM-DDTHH:MM:SS", s)
	}
	return t, nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

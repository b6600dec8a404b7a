package slurm

import "fmt"

// Outcomes of Classify, the same words as a local run's.
const (
	Finished    = "finished"
	Failed      = "failed"
	OOM         = "oom"
	Stopped     = "stopped"
	Interrupted = "interrupted"
	Preempted   = "preempted"
	NodeFailure = "node_failure"
	Timeout     = "timeout"
)

// Classify says how a job ended, or "" when it has not ended in one of the
// states below (pending, running, completing, suspended, requeued, or a state
// this package does not know): the caller keeps watching and shows detail,
// which always names the state.
//
//	COMPLETED                     finished
//	FAILED                        failed, with the exit code or signal
//	NODE_FAIL                     node_failure, naming the node
//	TIMEOUT                       timeout, naming the time limit
//	OUT_OF_MEMORY                 oom
//	CANCELLED                     stopped, detail "CANCELLED": whether it was
//	                              cancelled outside trainbot is the caller's
//	                              to say (it knows whether it cancelled it)
//	PREEMPTED                     preempted
//	BOOT_FAIL, DEADLINE           interrupted, detail naming the state
//
// A job stopped with Cancel and a signal ends as its command exits: an exit
// code (FAILED), or COMPLETED if it exits 0 on SIGINT, or CANCELLED when the
// plain cancel after the grace period ended it.
func Classify(j Job) (outcome, detail string) {
	on := ""
	if j.Node != "" {
		on = " on " + j.Node
	}
	switch j.State {
	case "COMPLETED":
		return Finished, ""
	case "FAILED":
		if j.Signal != 0 {
			return Failed, fmt.Sprintf("killed by signal %d (Slurm state FAILED%s)", j.Signal, on)
		}
		return Failed, fmt.Sprintf("exit code %d (Slurm state FAILED%s)", j.ExitCode, on)
	case "NODE_FAIL":
		return NodeFailure, "node failure (Slurm state NODE_FAIL" + on + ")"
	case "TIMEOUT":
		limit := j.TimeLimit
		if limit == "" {
			limit = "?"
		}
		return Timeout, "time limit " + limit + " reached (Slurm state TIMEOUT)"
	case "OUT_OF_MEMORY":
		return OOM, "out of memory (Slurm state OUT_OF_MEMORY" + on + ")"
	case "CANCELLED":
		return Stopped, "CANCELLED"
	case "PREEMPTED":
		return Preempted, "preempted (Slurm state PREEMPTED" + on + ")"
	case "BOOT_FAIL", "DEADLINE":
		return Interrupted, "Slurm state " + j.State
	}
	detail = j.State
	if j.State == "" {
		detail = "no state"
	}
	if j.Reason != "" {
		detail += " (" + j.Reason + ")"
	}
	return "", detail + on
}

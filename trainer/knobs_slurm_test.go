package trainer

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// A Slurm run's knobs and stop go through scancel --signal: 存档's signal
// by its name (USR1), a stop by the job's signals.stop.
func TestSlurmKnobsAndStopSignal(t *testing.T) {
	r := fixtureRunner(t, "scontrol-running.txt")
	var got []string
	r.cancel = func(_ context.Context, id, signal string, batchOnly bool) error {
		got = append(got, signal)
		return nil
	}
	r.stopSig = "TERM"
	if err := r.signal(syscall.SIGUSR1, "alice", "checkpoint"); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(stopRequest{by: "alice", reason: OutcomeStopped}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "USR1" || got[1] != "TERM" {
		t.Fatalf("scancel signals: got %q, want [USR1 TERM]", got)
	}
}

// The orphans of a run whose supervisor died get the job's stop signal
// first too; with SIGTERM, SIGKILL is next, after both graces.
func TestOrphanStopSendsTheJobsStopSignal(t *testing.T) {
	o := orphanStop{first: syscall.SIGTERM}
	var sent []syscall.Signal
	send := func(s syscall.Signal) { sent = append(sent, s); o.sent(s) }
	o.ask(stopRequest{by: "alice"}, send)
	if len(sent) != 1 || sent[0] != syscall.SIGTERM {
		t.Fatalf("first signal: got %v, want SIGTERM", sent)
	}
	if sig := o.next(o.at.Add(time.Second), time.Second, time.Second); sig != 0 {
		t.Errorf("after the stop grace: got %v, want nothing yet", sig)
	}
	if sig := o.next(o.at.Add(2*time.Second), time.Second, time.Second); sig != syscall.SIGKILL {
		t.Errorf("after both graces: got %v, want SIGKILL", sig)
	}
	if f := o.facts(42, time.Now()); f.Signal != int(syscall.SIGTERM) {
		t.Errorf("facts: signal %d, want SIGTERM", f.Signal)
	}
}

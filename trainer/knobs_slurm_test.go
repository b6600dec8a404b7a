package trainer

import (
	"context"
	"syscall"
	"testing"
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

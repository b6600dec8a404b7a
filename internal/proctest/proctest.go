// Package proctest starts real process trees for tests, the way trainbot
// starts a run (a shell in its own process group), and cleans them up.
package proctest

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/internal/procfs"
)

// StartTree starts `sh -c script` in its own process group, as trainbot
// starts a run, and waits until the shell has want live children. It
// returns the shell's PID (the group id) and the children's PIDs. The
// whole group is killed when the test ends.
func StartTree(t testing.TB, script string, want int) (int, []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		// Children that left the group (setsid) are killed by pid.
		if p, err := procfs.ReadProcs(); err == nil {
			for _, c := range p.Children(pid) {
				syscall.Kill(c, syscall.SIGKILL)
			}
		}
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := procfs.ReadProcs()
		if err != nil {
			t.Fatal(err)
		}
		var kids []int
		for _, c := range p.Children(pid) {
			// A forked child is "sh" until it execs, and "setsid" until
			// setsid execs its program: wait for the exec.
			if comm := p.Comm(c); comm != "sh" && comm != "setsid" {
				kids = append(kids, c)
			}
		}
		if len(kids) >= want {
			return pid, kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d children after 10s, want %d", script, len(kids), want)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc for the children to appear
	}
}

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/internal/sshdtest"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/agent"
	"github.com/trainbot/trainbot/trainer/shim"
)

var version = hosts.Version{Version: "v0.0.0-test", Revision: "test", Modified: "false", Go: "go", Protocol: hosts.Protocol}

// TestMain makes this test binary the hosts' trainbot too: "version
// --json", "agent --data DIR" and "shim", as cmd/trainbot has them.
func TestMain(m *testing.M) {
	shim.MainIfAsked()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "version":
			json.NewEncoder(os.Stdout).Encode(version)
			os.Exit(0)
		case "agent":
			exe, _ := os.Executable()
			dir := os.Args[3] // agent --data DIR
			if err := agent.Serve(context.Background(), os.Stdin, os.Stdout, agent.ServeOptions{Version: version, DataDir: dir, ShimCommand: []string{exe, "shim"}}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// remote is one host: its sshd, its connection, the hub's link to it and
// its data directory.
type remote struct {
	server *sshdtest.Server
	host   *hosts.Host
	link   *agent.Link
	data   string
}

func newRemote(t testing.TB, name string) *remote {
	t.Helper()
	s := sshdtest.Start(t, sshdtest.Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), name)
	tg := &hosts.Target{Name: name, Address: s.Addr, User: s.User, IdentityFile: s.ClientKey.File, KnownHosts: kh, Trainbot: exe, DataDir: data}
	h := &hosts.Host{Target: tg, Hub: version}
	h.Start(context.Background())
	l := &agent.Link{Host: h, Hub: "hub-test"}
	t.Cleanup(func() { l.Close(); h.Close() })
	return &remote{server: s, host: h, link: l, data: data}
}

// hub is a supervisor over a store with the given hosts.
type hub struct {
	st     *store.Store
	sup    *trainer.Supervisor
	events chan trainer.Event
	dir    string
}

func newHub(t testing.TB, dir string, jobs []*trainer.Job, hosts map[string]trainer.RemoteHost) *hub {
	t.Helper()
	st, err := store.Open(dir, store.Options{FlushEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	sup, err := trainer.New(context.Background(), trainer.Options{Jobs: jobs, Recorder: st, DataDir: dir, Hosts: hosts, HubName: "hub-test",
		ShimCommand: []string{exe, "shim"}, AdoptEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &hub{st: st, sup: sup, events: make(chan trainer.Event, 100000), dir: dir}
	sup.Subscribe(func(e trainer.Event) {
		select {
		case h.events <- e:
		default:
		}
	})
	if err := sup.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hub) close(t testing.TB, detach bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if detach {
		err = h.sup.Detach(ctx)
	} else {
		err = h.sup.Close(ctx)
	}
	if err != nil {
		t.Error(err)
	}
	h.st.Close()
}

// ended waits (up to d) for run id's end and returns its record.
func (h *hub) ended(t testing.TB, id int64, d time.Duration) *trainer.Run {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-h.events:
			if e.Kind == trainer.EventEnded && e.Run.ID == id {
				r, err := h.st.Run(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
		case <-deadline:
			t.Fatalf("run %d did not end in %s", id, d)
			return nil
		}
	}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// A run on a host: started there under the host's lock, its output
// mirrored and parsed here, its end recorded; a second start of its job
// on the host (another hub's, the same lock) is refused as busy, a
// command that does not exist is a failed run, and a GPU request of a
// host without GPUs is refused with the host's reason.
func TestARunOnAHost(t *testing.T) {
	r := newRemote(t, "h1")
	job := &trainer.Job{Name: "count", Command: sh(`for i in 1 2 3 4 5; do echo "step=$i loss=0.$i"; sleep 0.1; done`), Hosts: []string{"h1"}}
	h := newHub(t, t.TempDir(), []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	defer h.close(t, false)
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "count", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Host != "h1" || run.Runner != trainer.RunnerSSH || !strings.HasPrefix(run.RemoteDir, filepath.Join(r.data, "hub", "hub-test")+"/") {
		t.Fatalf("run: host %q runner %q dir %q", run.Host, run.Runner, run.RemoteDir)
	}
	// Another hub on the same host data directory: the host's job lock.
	other := &agent.Link{Host: r.host, Hub: "other-hub"}
	defer other.Close()
	_, err = other.Start(context.Background(), trainer.RemoteSpec{Hub: "other-hub", RunID: 1, Job: "count", Argv: sh("true")})
	var busy *trainer.BusyError
	if !errors.As(err, &busy) || !strings.Contains(busy.Other, "run #1 (count) of trainbot hub-test") {
		t.Errorf("a second run of the lock on the host: %v, want busy with the first one named", err)
	}
	got := h.ended(t, run.ID, 30*time.Second)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != 5 || got.Host != "h1" {
		t.Fatalf("run ended %s at step %d on %q (%s)", got.Outcome, got.Steps, got.Host, got.Detail)
	}
	pts, err := h.st.Series(context.Background(), run.ID, "loss")
	if err != nil || len(pts) != 5 {
		t.Fatalf("points: %d %v", len(pts), err)
	}
	mirror, _ := os.ReadFile(filepath.Join(h.dir, "runs", fmt.Sprint(run.ID), "output.log"))
	there, _ := os.ReadFile(filepath.Join(run.RemoteDir, "output.log"))
	if len(mirror) == 0 || string(mirror) != string(there) {
		t.Errorf("mirror %d bytes, host %d bytes", len(mirror), len(there))
	}
	if _, err := os.Stat(filepath.Join(h.dir, "runs", fmt.Sprint(run.ID), "state.json")); err != nil {
		t.Errorf("the mirror has no state.json: %v", err)
	}

	job.Command = []string{"/no/such/program"}
	if err := h.sup.Reconfigure([]*trainer.Job{job}, nil); err != nil {
		t.Fatal(err)
	}
	failed, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "count", By: "test"})
	var se *trainer.StartError
	if !errors.As(err, &se) || failed == nil || failed.Outcome != trainer.OutcomeFailed || !strings.Contains(failed.Detail, "on host h1") {
		t.Errorf("a command missing on the host: %v %+v", err, failed)
	}
	_, err = h.sup.Start(context.Background(), trainer.StartRequest{Job: "count", By: "test", Params: map[string]string{"gpus": "1"}})
	if !errors.Is(err, trainer.ErrNoGPUs) || !strings.Contains(err.Error(), "the trainbot here sees no GPU") {
		t.Errorf("gpus=1 on a host without GPUs: %v", err)
	}
	_, err = h.sup.Start(context.Background(), trainer.StartRequest{Job: "count@h9", By: "test"})
	if !errors.Is(err, trainer.ErrNoHost) || !strings.Contains(err.Error(), `"h9" (the hosts are h1)`) {
		t.Errorf("count@h9: %v", err)
	}
}

// A hub that leaves (Detach) and one that comes back while the host's run
// went on: it catches up from where the mirror stopped, and every step is
// stored once; a stop reaches the host.
func TestAHubComesBackToARunOnAHost(t *testing.T) {
	r := newRemote(t, "h1")
	job := &trainer.Job{Name: "long", Command: sh(`i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo "step=$i loss=1"; [ $((i % 500)) -eq 0 ] && sleep 0.05; done`), Hosts: []string{"h1"}}
	dir := t.TempDir()
	h := newHub(t, dir, []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "long", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	h.close(t, true)
	time.Sleep(500 * time.Millisecond)
	h2 := newHub(t, dir, []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	defer h2.close(t, false)
	var once sync.Once
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := h2.sup.Status(run.ID)
		if err == nil && st.Progress.Step > 20000 {
			once.Do(func() {
				if _, err := h2.sup.Stop(run.ID, "tester"); err != nil {
					t.Error(err)
				}
			})
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := h2.ended(t, run.ID, 60*time.Second)
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != "tester" {
		t.Fatalf("run ended %s by %q (%s), want stopped by tester", got.Outcome, got.StoppedBy, got.Detail)
	}
	pts, err := h2.st.Series(context.Background(), run.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, p := range pts {
		seen[p.Step]++
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("step %d stored %d times", s, n)
		}
	}
	// Long series are thinned (min and max per bucket), but the first
	// and the last step are kept.
	if seen[1] != 1 || seen[got.Steps] != 1 || len(seen) < 1000 {
		t.Errorf("%d distinct steps of %d stored (first %d, last %d)", len(seen), got.Steps, seen[1], seen[got.Steps])
	}
}

// The run's shim killed with -9 on its host while the run lives on (it
// ignores the broken pipe of its output): the
// hub says so once (unsupervised), a stop signals what is left there, and
// the run ends interrupted with who stopped its orphans.
func TestAShimKilledOnAHost(t *testing.T) {
	r := newRemote(t, "h1")
	job := &trainer.Job{Name: "loop", Command: sh(`trap "" PIPE; i=0; while true; do i=$((i+1)); echo "step=$i loss=1" 2>/dev/null || :; sleep 0.05; done`), Hosts: []string{"h1"}}
	h := newHub(t, t.TempDir(), []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	defer h.close(t, false)
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "loop", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(run.Supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for told := false; !told; {
		select {
		case e := <-h.events:
			told = e.Kind == trainer.EventAlert && e.Alert != nil && e.Alert.Unsupervised != nil && e.Run.ID == run.ID
		case <-deadline:
			t.Fatal("no unsupervised alert in 30 s")
		}
	}
	if _, err := h.sup.Stop(run.ID, "tester"); err != nil {
		t.Fatal(err)
	}
	got := h.ended(t, run.ID, 30*time.Second)
	if got.Outcome != trainer.OutcomeInterrupted || got.End == nil || got.End.Orphans == nil || got.End.Orphans.StoppedBy != "tester" {
		t.Fatalf("run ended %s (%s), want interrupted with its orphans stopped by tester", got.Outcome, got.Detail)
	}
	if syscall.Kill(-run.PID, 0) == nil {
		t.Errorf("process group %d of the run lives on after the stop", run.PID)
	}
}

// A run on a host that crashes is resumed there, from the checkpoint the
// host's trainbot finds.
func TestARunOnAHostIsResumedThere(t *testing.T) {
	r := newRemote(t, "h1")
	dir := t.TempDir()
	job := &trainer.Job{Name: "crashy", Dir: dir, Hosts: []string{"h1"}, Checkpoint: "ckpt-*.pt", Resume: []string{"--resume", "{checkpoint}"},
		OnFailure: &trainer.FailureRetry{Retry: 1, Backoff: 10 * time.Millisecond},
		Command:   sh(`if [ "$1" = --resume ]; then echo "step=2 loss=0.5 from $2"; exit 0; fi; echo "step=1 loss=1"; : > ckpt-1.pt; : > ckpt-1.pt.done; exit 3`)}
	job.Command = append(job.Command, "crashy")
	h := newHub(t, t.TempDir(), []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	defer h.close(t, false)
	if got, err := r.link.Checkpoint(context.Background(), dir, "ckpt-*.pt"); err != nil || got != "" {
		t.Fatalf("checkpoint before any: %q %v", got, err)
	}
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "crashy", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	first := h.ended(t, run.ID, 30*time.Second)
	if first.Outcome != trainer.OutcomeFailed {
		t.Fatalf("first run %s (%s)", first.Outcome, first.Detail)
	}
	next := h.ended(t, run.ID+1, 30*time.Second)
	if next.ResumedFrom != run.ID || next.Host != "h1" || next.Outcome != trainer.OutcomeFinished || !slices.Contains(next.Command, filepath.Join(dir, "ckpt-1.pt")) {
		t.Fatalf("resume: from %d on %q, %s, command %q", next.ResumedFrom, next.Host, next.Outcome, next.Command)
	}
}

// 停止 while the run's host does not answer (its sshd gone): the run goes
// on there, and the stop reaches it once the host answers again.
func TestAStopWaitsForTheHost(t *testing.T) {
	r := newRemote(t, "h1")
	job := &trainer.Job{Name: "loop", Command: sh(`i=0; while true; do i=$((i+1)); echo "step=$i loss=1"; sleep 0.05; done`), Hosts: []string{"h1"}}
	h := newHub(t, t.TempDir(), []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	defer h.close(t, false)
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "loop", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	waitStep := func(min int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			if st, err := h.sup.Status(run.ID); err == nil && st.Progress.Step >= min {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("run #%d did not reach step %d", run.ID, min)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitStep(5)
	old := r.server
	old.KillSessions()
	old.Stop() // the host is gone; the run's shim, no longer under sshd, goes on
	if _, err := h.sup.Stop(run.ID, "tester"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(run.RemoteDir, "output.log")
	size := func() int64 { fi, _ := os.Stat(logPath); return fi.Size() }
	before := size()
	time.Sleep(time.Second)
	if size() <= before {
		t.Fatal("the run stopped while its host did not answer: nothing reached it, it should go on")
	}
	if st, err := h.sup.Status(run.ID); err != nil || st.Run.State != trainer.StateRunning {
		t.Fatalf("run while its host is down: %v %+v", err, st.Run)
	}
	sshdtest.Start(t, sshdtest.Options{HostKey: &old.HostKey, ClientKey: &old.ClientKey, Port: old.Port})
	got := h.ended(t, run.ID, 60*time.Second)
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != "tester" {
		t.Fatalf("run ended %s by %q (%s), want stopped by tester once the host answered", got.Outcome, got.StoppedBy, got.Detail)
	}
}

// A trainbot that closes (a console at its end) while a run's host does
// not answer does not wait for it forever: the run is left running there,
// for the next trainbot.
func TestCloseLeavesARunWhoseHostIsDown(t *testing.T) {
	r := newRemote(t, "h1")
	job := &trainer.Job{Name: "loop", Command: sh(`while true; do echo "step=1 loss=1"; sleep 0.05; done`), Hosts: []string{"h1"}}
	dir := t.TempDir()
	h := newHub(t, dir, []*trainer.Job{job}, map[string]trainer.RemoteHost{"h1": r.link})
	run, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "loop", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-run.PID, syscall.SIGKILL) })
	time.Sleep(300 * time.Millisecond)
	r.server.KillSessions()
	r.server.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	began := time.Now()
	h.sup.Close(ctx)
	h.st.Close()
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("Close took %s", took)
	}
	if syscall.Kill(-run.PID, 0) != nil {
		t.Error("the run on the host that did not answer was not left running")
	}
}

package trainer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// harness is a supervisor on a real store in a temporary data directory.
type harness struct {
	t      *testing.T
	dir    string
	st     *store.Store
	sup    *trainer.Supervisor
	events chan trainer.Event
}

func newHarness(t *testing.T, jobs ...*trainer.Job) *harness {
	t.Helper()
	dir := t.TempDir()
	return newHarnessIn(t, dir, jobs...)
}

func newHarnessIn(t *testing.T, dir string, jobs ...*trainer.Job) *harness {
	t.Helper()
	return newHarnessWith(t, dir, trainer.Options{}, jobs...)
}

// newHarnessWith is newHarnessIn with more options (Jobs, Recorder,
// DataDir and DrainTimeout are the harness's).
func newHarnessWith(t *testing.T, dir string, opts trainer.Options, jobs ...*trainer.Job) *harness {
	t.Helper()
	st, err := store.Open(dir, store.Options{FlushEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opts.Jobs, opts.Recorder, opts.DataDir, opts.DrainTimeout, opts.Queue = jobs, st, dir, 500*time.Millisecond, st
	sup, err := trainer.New(context.Background(), opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, st: st, sup: sup, events: make(chan trainer.Event, 1000)}
	sup.Subscribe(func(e trainer.Event) { h.events <- e })
	if err := sup.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sup.Close(ctx)
		st.Close()
	})
	return h
}

func job(name string, argv []string) *trainer.Job {
	return &trainer.Job{Name: name, Command: argv, StopGrace: 300 * time.Millisecond, KillGrace: 300 * time.Millisecond}
}

func (h *harness) start(jobName string, params map[string]string) *trainer.Run {
	h.t.Helper()
	r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: jobName, Params: params, By: "tester"})
	if err != nil {
		h.t.Fatalf("start %s: %v", jobName, err)
	}
	return r
}

// wait waits for the run to end and returns its stored record.
func (h *harness) wait(id int64) *trainer.Run {
	h.t.Helper()
	return h.waitUpTo(id, 30*time.Second)
}

// waitUpTo is wait with a deadline of its own.
func (h *harness) waitUpTo(id int64, d time.Duration) *trainer.Run {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := h.sup.WaitRun(ctx, id); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		h.t.Fatalf("wait run %d: %v", id, err)
	}
	r, err := h.st.Run(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	endHasFacts(h.t, r)
	return r
}

// endHasFacts checks that an ended run's end is recorded as facts, and
// that its detail is their English (read back from the store).
func endHasFacts(t *testing.T, r *trainer.Run) {
	t.Helper()
	if r.State != trainer.StateEnded {
		return
	}
	if r.End == nil {
		t.Errorf("run %d ended %s (%q) with no facts recorded", r.ID, r.Outcome, r.Detail)
	} else if got := r.End.English(); got != r.Detail {
		t.Errorf("run %d: its recorded facts say %q, its detail %q", r.ID, got, r.Detail)
	}
}

// waitEvent returns the first event of kind for run id.
func (h *harness) waitEvent(kind trainer.EventKind, id int64) trainer.Event {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-h.events:
			if e.Kind == kind && e.Run.ID == id {
				return e
			}
		case <-deadline:
			h.t.Fatalf("no %s event for run %d", kind, id)
		}
	}
}

// waitTail polls the run's output until a line contains s.
func (h *harness) waitTail(id int64, s string) []string {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		lines, err := h.sup.Tail(id, 100)
		if err != nil {
			h.t.Fatalf("tail: %v", err)
		}
		for _, l := range lines {
			if strings.Contains(l, s) {
				return lines
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("run %d never printed %q", id, s)
	return nil
}

func TestFinishedRunRecordsPointsAndProgress(t *testing.T) {
	h := newHarness(t, job("p", childCommand("print", "10")))
	r := h.start("p", nil)
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.State != trainer.StateEnded {
		t.Fatalf("got outcome %s state %s, want finished ended (%s)", got.Outcome, got.State, got.Detail)
	}
	if got.ExitCode == nil || *got.ExitCode != 0 {
		t.Fatalf("got exit code %v, want 0", got.ExitCode)
	}
	if got.Steps != 10 || got.Total != 10 {
		t.Errorf("got steps %d/%d, want 10/10", got.Steps, got.Total)
	}
	pts, err := h.st.Series(context.Background(), r.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 10 || pts[0].Step != 1 || pts[9].Value != 0.1 {
		t.Fatalf("got %d loss points (%v), want 10 ending at 0.1", len(pts), pts)
	}
	e := h.waitEvent(trainer.EventEnded, r.ID)
	if m, ok := e.Status.Loss(); !ok || m.Value != 0.1 {
		t.Errorf("ended event loss = %v %v, want 0.1", m, ok)
	}
	log, err := os.ReadFile(got.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Step [10/10], Loss: 0.1000", "done printing", "the main process ended: exit status 0"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestHundredConcurrentStartsMakeOneRun(t *testing.T) {
	h := newHarness(t, job("q", childCommand("quiet", "20000")))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []*trainer.Run
	busy := 0
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "q", By: "racer"})
			mu.Lock()
			defer mu.Unlock()
			var be *trainer.BusyError
			switch {
			case err == nil:
				started = append(started, r)
			case errors.As(err, &be) && be.Active != nil:
				busy++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(started) != 1 || busy != 99 {
		t.Fatalf("got %d runs started and %d busy, want 1 and 99", len(started), busy)
	}
	runs, err := h.st.Runs(context.Background(), history.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("store has %d runs, want 1", len(runs))
	}
	_, err = h.sup.Start(context.Background(), trainer.StartRequest{Job: "q"})
	var be *trainer.BusyError
	if !errors.As(err, &be) || be.Active.Run.ID != started[0].ID || !strings.Contains(be.Error(), "running for") {
		t.Fatalf("second start: got %v, want busy naming run %d", err, started[0].ID)
	}
	h.sup.Stop(started[0].ID, "tester")
	if got := h.wait(started[0].ID); got.Outcome != trainer.OutcomeStopped {
		t.Fatalf("got %s, want stopped", got.Outcome)
	}
}

func TestLockHeldAcrossSupervisors(t *testing.T) {
	h := newHarness(t, job("q", childCommand("quiet", "20000")))
	r := h.start("q", nil)
	// A second trainbot on the same data directory.
	h2 := newHarnessIn(t, h.dir, job("q", childCommand("quiet", "20000")))
	_, err := h2.sup.Start(context.Background(), trainer.StartRequest{Job: "q"})
	var be *trainer.BusyError
	if !errors.As(err, &be) || be.Other == "" {
		t.Fatalf("got %v, want busy held by another process", err)
	}
	h.sup.Stop(r.ID, "tester")
	h.wait(r.ID)
	r2, err := h2.sup.Start(context.Background(), trainer.StartRequest{Job: "q"})
	if err != nil {
		t.Fatalf("start after the first run ended: %v", err)
	}
	h2.sup.Stop(r2.ID, "tester")
	h2.wait(r2.ID)
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// 停止 of a child that ignores SIGINT and SIGTERM, with grandchildren, one
// of which left the process group with setsid: SIGINT, SIGTERM, then
// SIGKILL to the group and every descendant, and 0 processes of the run
// alive after; the end says how it was killed.
func TestStopEscalatesToKillAndNoGrandchildSurvives(t *testing.T) {
	h := newHarness(t, job("s", childCommand("stubborn", "3")))
	r := h.start("s", nil)
	lines := h.waitTail(r.ID, "ready")
	var pids []int
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "grandchild "); ok {
			pid, _ := strconv.Atoi(v)
			pids = append(pids, pid)
		}
	}
	if len(pids) != 3 {
		t.Fatalf("got grandchildren %v from %q, want 3", pids, lines)
	}
	if _, err := h.sup.Stop(r.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != "alice" || !strings.Contains(got.Detail, "SIGKILL") {
		t.Fatalf("got %s by %q (%s), want stopped by alice with SIGKILL", got.Outcome, got.StoppedBy, got.Detail)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range append(pids, r.PID) {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d survived the stop", pid)
		}
	}
	log, _ := os.ReadFile(got.LogPath)
	for _, want := range []string{"SIGINT to process group", "SIGTERM", "SIGKILL"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// A grandchild that left the run's process group (setsid) and holds its
// output open does not keep the run from ending, nor does it outlive the
// run: the run's supervisor is its subreaper and kills it.
func TestEscapedGrandchildDoesNotOutliveTheRun(t *testing.T) {
	h := newHarness(t, job("e", childCommand("escape")))
	r := h.start("e", nil)
	got := h.wait(r.ID)
	log, _ := os.ReadFile(got.LogPath)
	var escaped int
	for _, l := range strings.Split(string(log), "\n") {
		if v, ok := strings.CutPrefix(l, "escaped "); ok {
			escaped, _ = strconv.Atoi(v)
		}
	}
	if escaped == 0 {
		t.Fatalf("the child did not say which process escaped:\n%s", log)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(escaped) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(escaped) {
		syscall.Kill(escaped, syscall.SIGKILL)
		t.Errorf("the process %d that left the group with setsid survived the run", escaped)
	}
	if got.Outcome != trainer.OutcomeFinished || got.Steps != 1 {
		t.Errorf("got %s at step %d (%s), want finished at step 1", got.Outcome, got.Steps, got.Detail)
	}
}

// The bot can leave and come back: a run goes on under its supervisor
// while no trainbot observes it, and the next trainbot re-attaches, reads
// what was printed meanwhile and stores every point once.
func TestDetachAndReattachStoresEveryPointOnce(t *testing.T) {
	const n = 120
	h := newHarness(t, job("d", childCommand("print", strconv.Itoa(n), "25")))
	r := h.start("d", nil)
	h.waitTail(r.ID, "Step [20/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sup.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if rr, _ := h.st.Run(context.Background(), r.ID); rr.State != trainer.StateRunning {
		t.Fatalf("detach ended the run: %s (%s)", rr.Outcome, rr.Detail)
	}
	detached := time.Now()
	time.Sleep(time.Second) // the run prints while nobody watches
	reattached := time.Now()
	h2 := newHarnessIn(t, h.dir, job("d", childCommand("print", strconv.Itoa(n), "25")))
	e := h2.waitEvent(trainer.EventAttached, r.ID)
	if e.Run.Supervisor == 0 || e.Run.Runner != trainer.RunnerLocal {
		t.Errorf("attached event: supervisor %d runner %q", e.Run.Supervisor, e.Run.Runner)
	}
	got := h2.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != n {
		t.Fatalf("got %s at step %d (%s), want finished at step %d", got.Outcome, got.Steps, got.Detail, n)
	}
	pts, err := h2.st.Series(context.Background(), r.ID, "loss")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	meanwhile := 0 // points printed while no trainbot watched carry that time
	for _, p := range pts {
		seen[p.Step]++
		if at := time.UnixMilli(p.T); at.After(detached.Add(150*time.Millisecond)) && at.Before(reattached.Add(-150*time.Millisecond)) {
			meanwhile++
		}
	}
	for i := int64(1); i <= n; i++ {
		if seen[i] != 1 {
			t.Errorf("step %d stored %d times, want once", i, seen[i])
		}
	}
	if meanwhile < 10 {
		t.Errorf("%d points carry a time from while no trainbot watched (about 28 were printed then): the backlog got the time it was read, not printed", meanwhile)
	}
}

// A run whose supervisor died without recording the end is interrupted,
// and says whether its processes are still alive.
func TestRunWhoseSupervisorDiedIsInterrupted(t *testing.T) {
	h := newHarness(t, job("k", childCommand("print", "400", "25")))
	r := h.start("k", nil)
	h.waitTail(r.ID, "Step [5/")
	if err := syscall.Kill(r.Supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeInterrupted || !strings.Contains(got.Detail, "supervisor") {
		t.Fatalf("got %s (%s), want interrupted: the supervisor died", got.Outcome, got.Detail)
	}
	if f := got.End; f.Why != trainer.WhyInterrupted || f.Interrupted != trainer.InterruptSupervisorGone || f.SupervisorPID != r.Supervisor {
		t.Errorf("facts %+v, want interrupted: supervisor %d gone", f, r.Supervisor)
	}
	if strings.Contains(got.Detail, "still alive") {
		syscall.Kill(-r.PID, syscall.SIGKILL)
	}
}

// Output still being parsed when the run's process exits is not taken for
// a leftover process holding the output: only the pipes decide.
func TestSlowParsingIsNotALeftoverProcess(t *testing.T) {
	h := newHarness(t, job("o", childCommand("fitbatch", "64", "16")))
	// A listener slower than the drain timeout holds up the parser.
	h.sup.Subscribe(func(e trainer.Event) {
		if e.Kind == trainer.EventAlert {
			<-time.After(2 * time.Second) // the harness drains for 0.5 s, then 1 s more
		}
	})
	r := h.start("o", nil)
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeOOM {
		t.Errorf("got %s (%s), want oom", got.Outcome, got.Detail)
	}
	log, _ := os.ReadFile(got.LogPath)
	if strings.Contains(string(log), "outside the run's process group") {
		t.Errorf("a slow parser was taken for a process holding the output:\n%s", log)
	}
}

func TestPoliteStopExitsOnSIGINT(t *testing.T) {
	h := newHarness(t, job("p", childCommand("polite")))
	r := h.start("p", nil)
	h.waitTail(r.ID, "ready")
	h.sup.Stop(r.ID, "bob")
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeStopped || got.ExitCode == nil || *got.ExitCode != 130 {
		t.Fatalf("got %s exit %v (%s), want stopped with 130", got.Outcome, got.ExitCode, got.Detail)
	}
	if strings.Contains(got.Detail, "SIGTERM") || strings.Contains(got.Detail, "SIGKILL") {
		t.Errorf("detail %q: a polite child needs no escalation", got.Detail)
	}
	log, _ := os.ReadFile(got.LogPath)
	if !strings.Contains(string(log), "saving checkpoint") {
		t.Error("the child did not get to save")
	}
}

// A stop that another process sent on the run's control socket is
// recorded as that process, as the kernel tells it, not as whoever it
// said it was: the by (and the reason) of a stop are trainbot's only when
// trainbot sent it.
func TestStopFromAnotherProcessIsRecordedAsThatProcess(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 (CI installs it): the other process is a python3 one-liner")
	}
	h := newHarness(t, job("p", childCommand("polite")))
	r := h.start("p", nil)
	h.waitTail(r.ID, "ready")
	sock := filepath.Join(filepath.Dir(r.LogPath), shimctl.SocketFile)
	cmd := exec.Command(py, "-c", `import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"stop","by":"alice","reason":"nan"}\n'); print(s.recv(65536).decode())`, sock)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("the other process's stop: %v: %s", err, out)
	}
	got := h.wait(r.ID)
	want := fmt.Sprintf("a request on the run's control socket from pid %d (python3, uid %d)", cmd.Process.Pid, os.Getuid())
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != want || strings.Contains(got.Detail, "alice") {
		t.Errorf("got %s by %q (%s), want stopped by %q", got.Outcome, got.StoppedBy, got.Detail, want)
	}
	log, _ := os.ReadFile(got.LogPath)
	if note := fmt.Sprintf(`stop requested by alice (pid %d "python3", uid %d)`, cmd.Process.Pid, os.Getuid()); !strings.Contains(string(log), note) {
		t.Errorf("the log lacks %q:\n%s", note, log)
	}
}

// A stop sent by another trainbot process — the one before a restart, in
// the middle of the stop's grace — is trainbot's: its by and its reason
// stand.
func TestStopFromAnEarlierTrainbotIsVouchedFor(t *testing.T) {
	h := newHarness(t, job("p", childCommand("polite")))
	r := h.start("p", nil)
	h.waitTail(r.ID, "ready")
	cmd := exec.Command(childCommand("ctlstop")[0], append(childCommand("ctlstop")[1:], filepath.Dir(r.LogPath), "alice", "nan")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other trainbot's stop: %v: %s", err, out)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeNaN || got.StoppedBy != "alice" {
		t.Errorf("got %s by %q (%s), want nan, stopped by alice", got.Outcome, got.StoppedBy, got.Detail)
	}
}

func TestOutcomes(t *testing.T) {
	torch2 := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 12.75 MiB is free. Process 1 has 79.13 GiB memory in use."
	cases := []struct {
		name    string
		argv    []string
		outcome trainer.Outcome
		detail  []string
	}{
		{"failed", childCommand("stderr-exit", "Traceback (most recent call last):|ValueError: boom", "3"), trainer.OutcomeFailed, []string{"exit status 3", "ValueError: boom"}},
		{"cuda oom", childCommand("stderr-exit", "Traceback|"+torch2, "1"), trainer.OutcomeOOM, []string{"CUDA out of memory on GPU 0", "20971520 bytes", "12.75 MiB free of 79.15 GiB"}},
		{"host oom", childCommand("stderr-exit", "RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 80000000000 bytes. Error code 12 (Cannot allocate memory)", "1"), trainer.OutcomeOOM, []string{"host memory", "80000000000 bytes"}},
		{"killed", childCommand("killself"), trainer.OutcomeOOM, []string{"SIGKILL"}},
		{"nan", childCommand("nan"), trainer.OutcomeNaN, []string{"loss is NaN for 3 points in a row"}},
		{"finished", childCommand("print", "3"), trainer.OutcomeFinished, []string{"exit status 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, job("j", c.argv))
			r := h.start("j", nil)
			got := h.wait(r.ID)
			if c.name == "killed" && got.Outcome == trainer.OutcomeFailed && strings.Contains(got.Detail, "counts no OOM kill") {
				// Where the memory cgroup's OOM count is readable (and is 0
				// here), a SIGKILL nobody here sent is not taken for OOM.
				return
			}
			if got.Outcome != c.outcome {
				t.Fatalf("got outcome %s (%s), want %s", got.Outcome, got.Detail, c.outcome)
			}
			for _, d := range c.detail {
				if !strings.Contains(got.Detail, d) {
					t.Errorf("detail %q lacks %q", got.Detail, d)
				}
			}
		})
	}
}

func TestCommandNotFoundFailsTheRun(t *testing.T) {
	h := newHarness(t, job("x", []string{"/nonexistent/train.py"}))
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "x"})
	var se *trainer.StartError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a StartError", err)
	}
	got, err := h.st.Run(context.Background(), se.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != trainer.OutcomeFailed || !strings.Contains(got.Detail, "no such file") {
		t.Fatalf("got %s %q, want failed with the exec error", got.Outcome, got.Detail)
	}
	if len(h.sup.Active()) != 0 {
		t.Fatal("a failed start left an active run")
	}
	// The lock was released: the next start is not busy.
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "x"}); errors.Is(err, trainer.ErrBusy) {
		t.Fatal("lock still held after a failed start")
	}
}

func TestNaNAlertAndStopOnNaN(t *testing.T) {
	j := job("n", childCommand("nan", "10000"))
	j.StopOnNaN = true
	h := newHarness(t, j)
	r := h.start("n", nil)
	e := h.waitEvent(trainer.EventAlert, r.ID)
	if e.Alert.Kind != trainer.OutcomeNaN || !strings.Contains(e.Alert.Text, "step 5") {
		t.Fatalf("got alert %v %q, want nan at step 5", e.Alert.Kind, e.Alert.Text)
	}
	if n := e.Alert.NaN; n == nil || n.Metric == "" || !math.IsNaN(n.Value) || n.Count != 3 || n.Step != 5 {
		t.Errorf("the alert's streak %+v, want the metric, NaN, 3 points, step 5 (%q)", n, e.Alert.Text)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeNaN || !strings.Contains(got.Detail, "stopped by trainbot") {
		t.Fatalf("got %s (%s), want nan stopped by trainbot", got.Outcome, got.Detail)
	}
	// The store keeps its facts (a NaN is no JSON number), and so does run.json.
	if f := got.End; f == nil || f.Why != trainer.WhyStoppedNaN || f.NaN == nil || !math.IsNaN(f.NaN.Value) || f.NaN.Step != 5 {
		t.Errorf("recorded end facts %+v, want stopped_nan with the streak", f)
	}
	if data, err := os.ReadFile(filepath.Join(trainer.RunDir(h.dir, r.ID), trainer.RunFile)); err != nil || !strings.Contains(string(data), `"why": "stopped_nan"`) {
		t.Errorf("run.json has no end facts (%v): %s", err, data)
	}
}

// A NaN loss is seen in the forms scripts print it: on a progress bar,
// which shows a value again only when it changes, and on a line with a
// finite val_loss; a run whose loss recovered and that exits 0 has
// finished; and one NaN eval_loss followed by bar lines that do not show it
// is not a NaN streak.
func TestNaNLossForms(t *testing.T) {
	cases := []struct {
		mode    string
		outcome trainer.Outcome
	}{
		{"bar", trainer.OutcomeNaN},
		{"text", trainer.OutcomeNaN},
		{"recover", trainer.OutcomeFinished},
		{"evalonce", trainer.OutcomeFinished},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			h := newHarness(t, job("n", childCommand("nanlines", c.mode)))
			r := h.start("n", nil)
			got := h.wait(r.ID)
			if c.mode == "evalonce" {
				if got.Outcome != trainer.OutcomeFinished || strings.Contains(got.Detail, "NaN") {
					t.Errorf("got %s (%s), want finished: one NaN eval_loss is not a NaN run", got.Outcome, got.Detail)
				}
			} else if got.Outcome != c.outcome || !strings.Contains(got.Detail, "train_loss is NaN for 3 points in a row (step 5)") {
				t.Errorf("got %s (%s), want %s saying train_loss was NaN for 3 points at step 5", got.Outcome, got.Detail, c.outcome)
			}
			alerts, want := 0, 1
			if c.mode == "evalonce" {
				want = 0
			}
			for e := range h.events {
				if e.Kind == trainer.EventAlert && e.Alert.Kind == trainer.OutcomeNaN {
					alerts++
				}
				if e.Kind == trainer.EventEnded {
					break
				}
			}
			if alerts != want {
				t.Errorf("got %d NaN alerts, want %d", alerts, want)
			}
		})
	}
}

func TestStallAlertKeepsTheRun(t *testing.T) {
	j := job("q", childCommand("quiet", "3500"))
	j.StallAfter = time.Second
	h := newHarness(t, j)
	r := h.start("q", nil)
	e := h.waitEvent(trainer.EventAlert, r.ID)
	if e.Alert.Kind != trainer.OutcomeStalled {
		t.Fatalf("got alert %s, want stalled", e.Alert.Kind)
	}
	if st := e.Alert.Stall; st == nil || st.After != time.Second || st.Quiet < time.Second {
		t.Errorf("the alert's silence %+v, want at least stall_after (1s)", st)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished {
		t.Fatalf("got %s, want finished: a stall alert does not end the run", got.Outcome)
	}
}

func TestParametersReachTheChildAsArgvAndEnv(t *testing.T) {
	j := job("e", childCommand("env", "TRAINBOT_PARAM_NAME,TRAINBOT_PARAM_BS,BATCH,TRAINBOT_RUN_ID,TRAINBOT_METRICS_FILE,PYTHONUNBUFFERED", "--bs", "{bs}", "--name={name}"))
	j.Params = map[string]trainer.ParamSpec{
		"bs":   {Type: trainer.ParamInt, Default: "8", HasDefault: true, Min: ptr(1), Max: ptr(64), Env: "BATCH"},
		"name": {Type: trainer.ParamString, Default: "x", HasDefault: true},
	}
	h := newHarness(t, j)
	evil := "1; rm -rf / $(reboot) `id`"
	r := h.start("e", map[string]string{"bs": "32", "name": evil})
	got := h.wait(r.ID)
	log, _ := os.ReadFile(got.LogPath)
	for _, want := range []string{
		"TRAINBOT_PARAM_NAME=" + evil, "TRAINBOT_PARAM_BS=32", "BATCH=32",
		"TRAINBOT_RUN_ID=" + strconv.FormatInt(r.ID, 10), "TRAINBOT_METRICS_FILE=" + filepath.Join(h.dir, "runs", strconv.FormatInt(r.ID, 10), "metrics.jsonl"),
		"PYTHONUNBUFFERED=1", `args=["--bs" "32" "--name=` + evil + `"]`,
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("child output lacks %q:\n%s", want, log)
		}
	}
	if got.Params["name"] != evil || got.Params["bs"] != "32" {
		t.Errorf("recorded params %v", got.Params)
	}
	// An int parameter that is not an int is refused before anything starts.
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "e", Params: map[string]string{"bs": "1; rm -rf /"}})
	var pe *trainer.ParamError
	if !errors.As(err, &pe) || pe.Param != "bs" || !strings.Contains(pe.Error(), "not an integer") {
		t.Fatalf("got %v, want a ParamError for bs", err)
	}
	runs, _ := h.st.Runs(context.Background(), history.RunFilter{})
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1: a refused start records nothing", len(runs))
	}
}

func ptr(v float64) *float64 { return &v }

func TestMetricsFileIsRead(t *testing.T) {
	// "nonl": a script that never ends its last line still gets it read
	// when the run ends.
	for _, mode := range []string{"", "nonl"} {
		t.Run("mode="+mode, func(t *testing.T) {
			h := newHarness(t, job("m", childCommand("metricsfile", mode)))
			r := h.start("m", nil)
			h.wait(r.ID)
			pts, err := h.st.Series(context.Background(), r.ID, "loss")
			if err != nil {
				t.Fatal(err)
			}
			if len(pts) != 5 || pts[4].Step != 50 || pts[4].Value != 0.2 {
				t.Fatalf("got %v, want 5 points from the metrics file ending at step 50 = 0.2", pts)
			}
		})
	}
}

func TestFloodLongLineAndBinaryOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	cases := []struct {
		name    string
		argv    []string
		minLog  int64
		metrics string
	}{
		{"flood 200 MB", childCommand("flood", "200"), 200e6, ""},
		{"one 20 MB line", childCommand("longline", "20"), 20 << 20, "loss"},
		{"binary", childCommand("binary"), 1 << 20, "loss"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, job("f", c.argv))
			r := h.start("f", nil)
			// 200 MB through the shim under -race on 2 busy cores took
			// over 30 s once: the bound is for a hang, not a speed.
			got := h.waitUpTo(r.ID, 2*time.Minute)
			if got.Outcome != trainer.OutcomeFinished {
				t.Fatalf("got %s (%s), want finished", got.Outcome, got.Detail)
			}
			fi, err := os.Stat(got.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			// What the disk could not take as fast as the child wrote is
			// dropped by design (the child never waits for the disk), and
			// counted in a marker line: nothing is lost silently.
			dropped := droppedBytes(t, got.LogPath)
			if fi.Size()+dropped < c.minLog {
				t.Fatalf("log has %d bytes and its markers count %d dropped, want at least %d in all", fi.Size(), dropped, c.minLog)
			}
			if dropped > 0 {
				t.Logf("%d bytes written, %d dropped while the disk lagged (marked in the log)", fi.Size(), dropped)
			}
			if c.metrics != "" {
				pts, _ := h.st.Series(context.Background(), r.ID, c.metrics)
				if len(pts) == 0 {
					t.Errorf("the %s after the odd output was not parsed", c.metrics)
				}
			}
		})
	}
}

// A script that prints a name per line (a score per image) must not make
// trainbot keep a metric per line, in memory and in the store, for days.
func TestMetricNamesPerRunAreBounded(t *testing.T) {
	h := newHarness(t, job("n", childCommand("names", "20000")))
	r := h.start("n", nil)
	got := h.wait(r.ID)
	names, err := h.st.MetricNames(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 1100 || len(names) < 1000 {
		t.Errorf("got %d metric names, want about 1000", len(names))
	}
	pts, _ := h.st.Series(context.Background(), r.ID, "loss")
	vpts, _ := h.st.Series(context.Background(), r.ID, "val_loss")
	if len(pts) != 2 || len(vpts) != 1 {
		t.Errorf("got %d loss and %d val_loss points, want 2 and 1: losses are kept", len(pts), len(vpts))
	}
	if !strings.Contains(got.Detail, "metric names") {
		t.Errorf("the end does not say that new metric names were ignored: %s", got.Detail)
	}
	if got.End.MetricNamesMax == 0 {
		t.Errorf("facts %+v: no metric names past the limit", got.End.EndNotes)
	}
}

// A log past max_log_bytes keeps its offsets but frees its oldest part
// (after its head): the disk it takes stays near the cap, and the output
// that comes after the cap is still parsed.
func TestLogCapKeepsParsing(t *testing.T) {
	const n = 200000 // about 9 MB of output
	j := job("c", childCommand("print", strconv.Itoa(n)))
	j.MaxLogBytes = 4 << 20
	h := newHarness(t, j)
	r := h.start("c", nil)
	got := h.wait(r.ID)
	var fst syscall.Stat_t
	if err := syscall.Stat(got.LogPath, &fst); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(got.LogPath)
	if strings.Contains(string(log), "cannot free older output") {
		t.Skip("this filesystem cannot punch holes")
	}
	if fst.Size < 8<<20 {
		t.Fatalf("log has %d bytes, want all of the output's offsets", fst.Size)
	}
	if used := fst.Blocks * 512; used > j.MaxLogBytes+1<<20 {
		t.Errorf("the log takes %d bytes of disk, want about the cap of %d", used, j.MaxLogBytes)
	}
	if !strings.Contains(got.Detail, "max_log_bytes") {
		t.Errorf("the end does not say the log passed its cap: %s", got.Detail)
	}
	if c := got.End.LogCut; c == nil || c.MaxLogBytes != j.MaxLogBytes || c.From <= 0 || c.To <= c.From {
		t.Errorf("facts of the cut %+v, want max_log_bytes %d and what was freed", c, j.MaxLogBytes)
	}
	if got.Outcome != trainer.OutcomeFinished || got.Steps != n {
		t.Errorf("got %s at step %d, want finished at %d: parsing goes on past the cap", got.Outcome, got.Steps, n)
	}
}

func TestInterruptedRunsAreFoundAtStart(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A run left "running" by a trainbot process that no longer exists;
	// its log was last written half an hour after it started.
	dead := 1 << 22 // above the default pid_max: no such process
	started := time.Now().Add(-time.Hour).Truncate(time.Second)
	logPath := filepath.Join(dir, "old.log")
	if err := os.WriteFile(logPath, []byte("step 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	written := started.Add(30 * time.Minute)
	if err := os.Chtimes(logPath, written, written); err != nil {
		t.Fatal(err)
	}
	id, err := st.CreateRun(context.Background(), &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning,
		StartedAt: started, Supervisor: dead, PID: dead, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	// And one supervised by a live process (this test) that started before it.
	live, err := st.CreateRun(context.Background(), &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning,
		StartedAt: time.Now(), Supervisor: os.Getppid()})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	h := newHarnessIn(t, dir)
	got, _ := h.st.Run(context.Background(), id)
	if got.Outcome != trainer.OutcomeInterrupted || got.State != trainer.StateEnded || !strings.Contains(got.Detail, "stopped while the run was active") {
		t.Fatalf("got %s %s %q, want interrupted", got.State, got.Outcome, got.Detail)
	}
	want := fmt.Sprintf("trainbot (pid %d) stopped while the run was active; found at the next start; its log was last written %s", dead, written.Format(time.RFC3339))
	if f := got.End; f == nil || f.Why != trainer.WhyInterrupted || f.Interrupted != trainer.InterruptTrainbotGone || f.SupervisorPID != dead ||
		f.LogWritten == nil || !f.LogWritten.Equal(written) || f.AlivePGID != 0 || got.Detail != want || f.English() != want {
		t.Errorf("got %q with facts %+v, want %q", got.Detail, f, want)
	}
	other, _ := h.st.Run(context.Background(), live)
	if other.Outcome != trainer.OutcomeRunning {
		t.Fatalf("a run of a live trainbot was marked %s", other.Outcome)
	}
}

// An interrupted run ended, as far as anyone knows, when its log was last
// written, not when trainbot came back (perhaps days later).
func TestInterruptedRunEndsAtItsLastOutput(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	last := started.Add(10 * time.Minute)
	logPath := filepath.Join(dir, "output.log")
	if err := os.WriteFile(logPath, []byte("step 1 loss=0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(logPath, last, last); err != nil {
		t.Fatal(err)
	}
	dead := 1 << 22
	id, err := st.CreateRun(context.Background(), &trainer.Run{Job: "j", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning,
		StartedAt: started, Supervisor: dead, PID: dead, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	h := newHarnessIn(t, dir)
	got, _ := h.st.Run(context.Background(), id)
	if got.Outcome != trainer.OutcomeInterrupted || !got.EndedAt.Equal(last) {
		t.Fatalf("got %s ended %s after %s, want interrupted ended at the log's last write, %s after the start",
			got.Outcome, got.EndedAt, got.EndedAt.Sub(started), last.Sub(started))
	}
}

func TestCloseStopsActiveRuns(t *testing.T) {
	h := newHarness(t, job("p", childCommand("polite")))
	r := h.start("p", nil)
	h.waitTail(r.ID, "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sup.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := h.st.Run(context.Background(), r.ID)
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != "trainbot shutdown" {
		t.Fatalf("got %s by %q, want stopped by trainbot shutdown", got.Outcome, got.StoppedBy)
	}
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "p"}); !errors.Is(err, trainer.ErrClosed) {
		t.Fatalf("start after close: got %v, want ErrClosed", err)
	}
}

// When Close cannot wait (a second Ctrl-C), the run is killed at once and
// recorded as stopped by the shutdown, saying so: not "after the grace
// periods", and not "failed" when the kill came before the stop was seen.
func TestCloseThatCannotWaitKillsAndSaysSo(t *testing.T) {
	j := job("s", childCommand("stubborn", "1"))
	j.StopGrace, j.KillGrace = time.Minute, time.Minute
	h := newHarness(t, j)
	r := h.start("s", nil)
	h.waitTail(r.ID, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.sup.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("close: got %v, want context.Canceled", err)
	}
	got, _ := h.st.Run(context.Background(), r.ID)
	if got.Outcome != trainer.OutcomeStopped || got.StoppedBy != "trainbot shutdown" || !strings.Contains(got.Detail, "SIGKILL") || strings.Contains(got.Detail, "grace") {
		t.Errorf("got %s by %q (%s), want stopped by trainbot shutdown, killed at once", got.Outcome, got.StoppedBy, got.Detail)
	}
	log, _ := os.ReadFile(got.LogPath)
	if !strings.Contains(string(log), "SIGKILL to process group") {
		t.Errorf("the log does not tell the kill:\n%s", log)
	}
}

func TestStatusWhileRunning(t *testing.T) {
	h := newHarness(t, job("p", childCommand("print", "50", "40")))
	r := h.start("p", nil)
	deadline := time.Now().Add(20 * time.Second)
	var st trainer.Status
	for {
		var err error
		st, err = h.sup.Status(0)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if st.Progress.Step >= 10 && st.StepsPerSec > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no step 10 with a rate in 20 s: progress %+v rate %g", st.Progress, st.StepsPerSec)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Progress.TotalSteps != 50 || st.StepsPerSec <= 0 || st.ETA <= 0 {
		t.Fatalf("got progress %+v rate %g eta %s, want total 50, a rate and an ETA", st.Progress, st.StepsPerSec, st.ETA)
	}
	if m, ok := st.Loss(); !ok || math.IsNaN(m.Value) {
		t.Fatalf("no loss in status: %v", st.Last)
	}
	if !strings.HasPrefix(st.Brief(), "step ") {
		t.Errorf("brief %q", st.Brief())
	}
	h.sup.Stop(r.ID, "t")
	h.wait(r.ID)
	if _, err := h.sup.Status(0); !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatalf("status after end: got %v, want ErrNotRunning", err)
	}
}

func TestUnknownJobAndRequiredParam(t *testing.T) {
	j := job("a", childCommand("print", "1"))
	j.Params = map[string]trainer.ParamSpec{"lr": {Type: trainer.ParamFloat}}
	h := newHarness(t, j, job("b", childCommand("print", "1")))
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "zzz"}); !errors.Is(err, trainer.ErrUnknownJob) || !strings.Contains(err.Error(), "a, b") {
		t.Fatalf("got %v, want unknown job listing a, b", err)
	}
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{}); !errors.Is(err, trainer.ErrUnknownJob) {
		t.Fatalf("got %v, want: name a job", err)
	}
	if _, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "a"}); !errors.Is(err, trainer.ErrBadParam) || !strings.Contains(err.Error(), "required") {
		t.Fatalf("got %v, want lr required", err)
	}
	none := newHarness(t)
	for _, name := range []string{"", "zzz"} {
		if _, err := none.sup.Start(context.Background(), trainer.StartRequest{Job: name}); !errors.Is(err, trainer.ErrUnknownJob) || !strings.Contains(err.Error(), "no jobs are configured") {
			t.Errorf("no jobs, start %q: got %v", name, err)
		}
	}
	_ = syscall.Getpid
}

type benchHarness struct {
	st  *store.Store
	sup *trainer.Supervisor
}

func newBenchHarnessJob(b testing.TB, dir string, j *trainer.Job) *benchHarness {
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	opts := trainer.Options{Jobs: []*trainer.Job{j}, Recorder: st, DataDir: dir}
	if exe := os.Getenv("TRAINBOT_BENCH_SHIM"); exe != "" {
		// The real trainbot binary as the runs' supervisor (bench/supervise.sh
		// builds it), as a user's runs have it, instead of this test binary.
		opts.ShimCommand = []string{exe, "shim"}
	}
	sup, err := trainer.New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return &benchHarness{st: st, sup: sup}
}

func (h *benchHarness) close() {
	h.sup.Close(context.Background())
	h.st.Close()
}

// A job with all_ranks keeps the other ranks' metrics as rankN/NAME; by
// default only rank 0's are kept.
func TestAllRanksReachesTheParser(t *testing.T) {
	script := `for i in 1 2 3; do echo "[rank0]: step=$i loss=1.$i"; echo "[rank1]: step=$i loss=2.$i"; done`
	for _, all := range []bool{false, true} {
		j := job("r", []string{"/bin/sh", "-c", script})
		j.AllRanks = all
		h := newHarness(t, j)
		r := h.start("r", nil)
		h.wait(r.ID)
		loss, _ := h.st.Series(context.Background(), r.ID, "loss")
		rank1, _ := h.st.Series(context.Background(), r.ID, "rank1/loss")
		if len(loss) != 3 || loss[2].Value != 1.3 {
			t.Errorf("all_ranks=%v: loss %v, want rank 0's three points", all, loss)
		}
		if want := map[bool]int{false: 0, true: 3}[all]; len(rank1) != want {
			t.Errorf("all_ranks=%v: %d rank1/loss points, want %d", all, len(rank1), want)
		}
	}
}

// When max_log_bytes freed part of the log, the end does not claim the log
// has every ignored metric.
func TestIgnoredNamesOfACutLog(t *testing.T) {
	j := job("n", childCommand("names", "450000"))
	j.MaxLogBytes = 4 << 20
	h := newHarness(t, j)
	r := h.start("n", nil)
	got := h.wait(r.ID)
	if log, _ := os.ReadFile(got.LogPath); strings.Contains(string(log), "cannot free older output") {
		t.Skip("this filesystem cannot punch holes")
	}
	if !strings.Contains(got.Detail, "max_log_bytes") || !strings.Contains(got.Detail, "the log has those max_log_bytes did not free") || strings.Contains(got.Detail, "(the log has them)") {
		t.Errorf("detail: %s", got.Detail)
	}
	if n := got.End.EndNotes; n.LogCut == nil || n.MetricNamesMax == 0 {
		t.Errorf("facts %+v, want the cut and the metric names past the limit", n)
	}
}

// A run whose shim is killed (-9) while its processes live on keeps its
// job's lock: a second start is refused naming the live group, 停止
// reaches the orphans (also the one that left the group), and then the
// job starts again.
func TestKilledSupervisorKeepsTheLockUntilTheRunIsGone(t *testing.T) {
	h := newHarness(t, job("q", childCommand("stubborn", "2")))
	r := h.start("q", nil)
	lines := h.waitTail(r.ID, "ready")
	var grandchildren []int
	for _, l := range lines {
		var pid int
		if _, err := fmt.Sscanf(l, "grandchild %d", &pid); err == nil {
			grandchildren = append(grandchildren, pid)
		}
	}
	if len(grandchildren) != 2 {
		t.Fatalf("got grandchildren %v in %q, want 2", grandchildren, lines)
	}
	if err := syscall.Kill(r.Supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := h.waitEvent(trainer.EventAlert, r.ID)
	if e.Alert.Unsupervised == nil || e.Alert.Unsupervised.PGID != r.PID || e.Alert.Unsupervised.Processes < 3 {
		t.Fatalf("got alert %+v (%+v), want the run unsupervised with its 3 processes of group %d", e.Alert, e.Alert.Unsupervised, r.PID)
	}
	_, err := h.sup.Start(context.Background(), trainer.StartRequest{Job: "q", By: "tester"})
	var busy *trainer.BusyError
	if !errors.As(err, &busy) || busy.Active == nil || busy.Active.Unsupervised == nil || !strings.Contains(err.Error(), fmt.Sprintf("process group %d", r.PID)) {
		t.Fatalf("second start: got %v, want refused naming the live group %d", err, r.PID)
	}
	// Another trainbot on the same data directory is refused too: the
	// lock file is held for the orphans.
	other := newHarnessIn(t, h.dir, job("q", childCommand("print", "1")))
	if _, err := other.sup.Start(context.Background(), trainer.StartRequest{Job: "q", By: "other"}); !errors.As(err, &busy) {
		t.Fatalf("start by another trainbot: got %v, want busy", err)
	}
	if _, err := h.sup.Stop(r.ID, "tester"); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeInterrupted || !strings.Contains(got.Detail, "lived on unsupervised") || !strings.Contains(got.Detail, "stopped by tester") {
		t.Fatalf("got %s (%s), want interrupted, stopped by tester", got.Outcome, got.Detail)
	}
	if f := got.End; f.Interrupted != trainer.InterruptSupervisorGone || f.SupervisorPID != r.Supervisor || f.Orphans == nil ||
		f.Orphans.PGID != r.PID || f.Orphans.StoppedBy != "tester" || f.Orphans.Signal == 0 || f.Orphans.Until.Before(r.StartedAt) {
		t.Errorf("facts %+v (orphans %+v), want supervisor %d gone, group %d stopped by tester", f, f.Orphans, r.Supervisor, r.PID)
	}
	for _, pid := range append(grandchildren, r.PID) {
		if alive(pid) {
			t.Errorf("process %d of the run is still alive", pid)
		}
	}
	r2 := h.start("q", nil)
	if r2.ID <= r.ID {
		t.Fatalf("got run #%d after #%d", r2.ID, r.ID)
	}
	h.sup.Stop(r2.ID, "tester")
	h.wait(r2.ID)
}

// A quiet run whose shim dies ends, as far as anyone can tell, when its
// processes were last seen alive: not at its last output.
func TestOrphanedQuietRunEndsWhenItsProcessesDo(t *testing.T) {
	h := newHarness(t, job("s", childCommand("quiet", "4000")))
	r := h.start("s", nil)
	h.waitTail(r.ID, "step 1")
	if err := syscall.Kill(r.Supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeInterrupted || !strings.Contains(got.Detail, "lived on unsupervised") {
		t.Fatalf("got %s (%s), want interrupted, lived on unsupervised", got.Outcome, got.Detail)
	}
	if o := got.End.Orphans; o == nil || o.PGID != r.PID || o.StoppedBy != "" || !o.Until.Truncate(time.Millisecond).Equal(got.EndedAt) {
		t.Errorf("orphans %+v, want group %d, not stopped, alive until the end %s", o, r.PID, got.EndedAt)
	}
	if d := got.EndedAt.Sub(got.StartedAt); d < 3500*time.Millisecond {
		t.Fatalf("got a duration of %s, want about the 4 s its process lived", d)
	}
}

// Descriptors exhausted in trainbot (idle connections, say) leave the
// run's supervisor unreachable and /proc unreadable for a while: unknown is
// not dead, so the run is recorded as it really ends, with every step.
func TestDescriptorExhaustionDoesNotEndARun(t *testing.T) {
	const n = 120
	h := newHarness(t, job("fd", childCommand("print", strconv.Itoa(n), "50")))
	r := h.start("fd", nil)
	h.waitTail(r.ID, "Step [10/")
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 1024
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for range 2048 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("open: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	if _, err := os.Open(os.DevNull); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("descriptors not exhausted: %v", err)
	}
	// Longer than the wait before a silent supervisor counts as gone.
	time.Sleep(4 * time.Second)
	for _, f := range held {
		f.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	if got.Outcome != trainer.OutcomeFinished || got.Steps != n {
		t.Fatalf("got %s at step %d (%s), want finished at step %d", got.Outcome, got.Steps, got.Detail, n)
	}
}

// droppedBytes sums the "N bytes of output were dropped" markers the shim
// writes into a log where output was dropped.
func droppedBytes(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range regexp.MustCompile(`([0-9]+) bytes of output were dropped`).FindAllSubmatch(data, -1) {
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		n += v
	}
	return n
}

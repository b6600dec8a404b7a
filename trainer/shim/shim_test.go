package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

func TestRunEndToEnd(t *testing.T) {
	const n = 2000
	spec := newSpec(t, "steps", strconv.Itoa(n))
	dir := spec.RunDir
	h, lockPath := start(t, spec, "")
	if h.PID <= 0 || h.ShimPID <= 0 || h.PID == h.ShimPID {
		t.Fatalf("pids: shim %d, child %d", h.ShimPID, h.PID)
	}
	waitFor(t, 20*time.Second, "last step in the log", logHas(t, dir, fmt.Sprintf("step=%d ", n)))
	if !lockHeld(t, lockPath) {
		t.Error("the job's lock is free while the run is running")
	}
	resp, err := shimctl.Call(dir, shimctl.Request{Op: "status"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.State; st.PID != h.PID || st.ShimPID != h.ShimPID || st.Ended || st.BytesRead == 0 || st.LastOutput.IsZero() {
		t.Errorf("status while running: %+v", st)
	}
	t.Logf("shim (race-instrumented test binary) VmRSS while supervising: %s", vmRSS(h.ShimPID))
	if err := os.WriteFile(filepath.Join(dir, "finish"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := wait(t, h, dir)

	if st.ExitCode == nil || *st.ExitCode != 0 || st.Signal != 0 {
		t.Errorf("exit code %v signal %d, want 0", st.ExitCode, st.Signal)
	}
	if st.Survivors != 0 || st.BytesDropped != 0 || st.StartError != "" || st.Stop != nil {
		t.Errorf("survivors %d, dropped %d, start error %q, stop %+v: want none", st.Survivors, st.BytesDropped, st.StartError, st.Stop)
	}
	fi, err := os.Stat(filepath.Join(dir, shimctl.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.LogBytes != fi.Size() {
		t.Errorf("log_bytes %d, the log has %d", st.LogBytes, fi.Size())
	}
	if st.EndedAt.Before(st.StartedAt) || st.PID != h.PID {
		t.Errorf("started %v ended %v pid %d", st.StartedAt, st.EndedAt, st.PID)
	}
	if lockHeld(t, lockPath) {
		t.Error("the job's lock is still held after the end")
	}
	if want := []string{"warning 1995: something on stderr", "progress 3"}; !slices.Equal(st.StderrTail[len(st.StderrTail)-2:], want) {
		t.Errorf("stderr tail ends %q, want %q", st.StderrTail[len(st.StderrTail)-2:], want)
	}

	// Every line whole, each stream in its order.
	log := readLog(t, dir)
	if !strings.HasSuffix(log, "[trainbot] the main process ended: exit status 0\n") {
		t.Errorf("the log ends %q", log[max(len(log)-200, 0):])
	}
	stepRe := regexp.MustCompile(`^step=(\d+) loss=[0-9.]+$`)
	warnRe := regexp.MustCompile(`^warning (\d+): something on stderr$`)
	var steps, warns int
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		if m := stepRe.FindStringSubmatch(line); m != nil {
			if i, _ := strconv.Atoi(m[1]); i != steps+1 {
				t.Fatalf("step %d after step %d", i, steps)
			}
			steps++
			continue
		}
		if m := warnRe.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i != warns+7 {
				t.Fatalf("warning %d after warning %d", i, warns)
			}
			warns = i
			continue
		}
		switch {
		case strings.HasPrefix(line, "[trainbot] "), line == "progress 1\rprogress 2\rprogress 3", line == "no newline at the end":
		default:
			t.Fatalf("a line that is neither whole nor ours: %q", line)
		}
	}
	if steps != n || warns != n/7*7 {
		t.Errorf("%d steps and warnings up to %d, want %d and %d", steps, warns, n, n/7*7)
	}
	if !strings.HasPrefix(log, "[trainbot] run 1 of test started ") {
		t.Errorf("the log starts %q", log[:min(len(log), 80)])
	}

	idx, err := shimctl.ReadIndex(filepath.Join(dir, shimctl.IndexFile), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) < 2 {
		t.Fatalf("%d index records, want several", len(idx))
	}
	for i := 1; i < len(idx); i++ {
		if idx[i].Offset < idx[i-1].Offset || idx[i].Time.Before(idx[i-1].Time) {
			t.Errorf("record %d %+v goes back from %+v", i, idx[i], idx[i-1])
		}
	}
	if last := idx[len(idx)-1]; last.Offset != st.LogBytes {
		t.Errorf("the last record maps offset %d, want the log's end %d", last.Offset, st.LogBytes)
	}
	more, err := shimctl.ReadIndex(filepath.Join(dir, shimctl.IndexFile), int64(len(idx)-1))
	if err != nil || len(more) != 1 || more[0] != idx[len(idx)-1] {
		t.Errorf("ReadIndex from the last record = %v, %v", more, err)
	}
	if _, err := os.Stat(filepath.Join(dir, shimctl.SocketFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ctl.sock after the end: %v", err)
	}
}

func TestShimOutlivesItsParent(t *testing.T) {
	// The orphaned shim re-parents to the test process, which reaps it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skip("no subreaper:", err)
	}
	spec := newSpec(t, "ticks", "40", "50")
	dir := spec.RunDir
	lockPath := filepath.Join(filepath.Dir(dir), "job.lock")
	specJSON, _ := json.Marshal(spec)
	exe, _ := os.Executable()
	bot := exec.Command(exe)
	bot.Env = append(os.Environ(), childEnv+"=starter", "SHIMTEST_SPEC="+string(specJSON), "SHIMTEST_LOCK="+lockPath)
	out, err := bot.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Start(); err != nil {
		t.Fatal(err)
	}
	var shimPID, childPID int
	if _, err := fmt.Fscanf(out, "shim %d child %d\n", &shimPID, &childPID); err != nil {
		bot.Process.Kill()
		bot.Wait()
		t.Fatalf("the starting process said no pids: %v", err)
	}
	t.Cleanup(func() {
		shimctl.Call(dir, shimctl.Request{Op: "kill", By: "test cleanup"}, time.Second)
		if pid, _ := unix.Wait4(shimPID, nil, unix.WNOHANG, nil); pid == 0 { // still running: ours to kill
			unix.Kill(shimPID, unix.SIGKILL)
			unix.Wait4(shimPID, nil, 0, nil)
		}
	})
	waitFor(t, 10*time.Second, "tick 2", logHas(t, dir, "tick 2\n"))
	bot.Process.Signal(syscall.SIGKILL) // the bot dies
	bot.Wait()

	if !alive(childPID) || !alive(shimPID) {
		t.Fatalf("after the bot's death: child alive %v, shim alive %v", alive(childPID), alive(shimPID))
	}
	if !lockHeld(t, lockPath) {
		t.Error("the job's lock was released with the bot")
	}
	var ws unix.WaitStatus
	waitFor(t, 30*time.Second, "end of the orphaned shim", func() bool {
		pid, _ := unix.Wait4(shimPID, &ws, unix.WNOHANG, nil)
		return pid == shimPID
	})
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("shim wait status %v", ws)
	}
	st := readState(t, dir)
	if !st.Ended || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("final state %+v", st)
	}
	log := readLog(t, dir)
	for i := 1; i <= 40; i++ {
		if !strings.Contains(log, fmt.Sprintf("tick %d\n", i)) {
			t.Errorf("tick %d is not in the log", i)
		}
	}
	if lockHeld(t, lockPath) {
		t.Error("the job's lock is held after the end")
	}
}

func TestStopKillsTheWholeTree(t *testing.T) {
	spec := newSpec(t, "stubborn")
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 10*time.Second, "ready", logHas(t, dir, "ready\n"))
	pids := []int{h.PID}
	for _, m := range regexp.MustCompile(`grandchild (\d+) setsid=`).FindAllStringSubmatch(readLog(t, dir), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("pids %v, want the child and 2 grandchildren", pids)
	}
	resp, err := shimctl.Call(dir, shimctl.Request{Op: "stop", By: "alice", Reason: "stopped"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.State.Stop; s == nil || s.By != "alice" || s.Reason != "stopped" {
		t.Errorf("stop answer: %+v", s)
	}
	// A second stop changes nothing.
	if resp, err := shimctl.Call(dir, shimctl.Request{Op: "stop", By: "bob", Reason: "nan"}, 5*time.Second); err != nil || resp.State.Stop.By != "alice" {
		t.Errorf("second stop: %v %+v", err, resp.State)
	}
	st := wait(t, h, dir)
	if s := st.Stop; s == nil || s.By != "alice" || !s.SentTerm || !s.SentKill || s.KilledNow {
		t.Errorf("stop info %+v, want alice's with SIGTERM and SIGKILL sent", s)
	}
	// Who sent it is recorded as the kernel tells it, whatever by says. The
	// test binary is the shim's executable too (it doubles as the shim), so
	// the shim sees a trainbot.
	me := shimctl.Peer{PID: os.Getpid(), UID: os.Getuid(), Comm: thisComm(t), Trainbot: true}
	if s := st.Stop; s == nil || s.Peer == nil || *s.Peer != me {
		t.Errorf("stop's peer %+v, want this test process %+v", s.Peer, me)
	}
	if st.Survivors != 0 || st.Signal != int(syscall.SIGKILL) {
		t.Errorf("survivors %d signal %d, want 0 and SIGKILL", st.Survivors, st.Signal)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d of the run is alive after the end", pid)
		}
	}
	log := readLog(t, dir)
	for _, want := range []string{
		fmt.Sprintf("[trainbot] stop requested by alice (pid %d %q, uid %d): SIGINT to process group %d and 1 process(es) that left it\n", me.PID, me.Comm, me.UID, h.PID),
		"[trainbot] still running 300ms after SIGINT: SIGTERM",
		"[trainbot] still running 300ms after SIGTERM: SIGKILL",
		"[trainbot] the main process ended: killed by SIGKILL\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

func TestSignalToShimStops(t *testing.T) {
	spec := newSpec(t, "quiet")
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 10*time.Second, "first line", logHas(t, dir, "step 1"))
	if err := unix.Kill(h.ShimPID, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := wait(t, h, dir)
	want := fmt.Sprintf("a signal to the run's supervisor (pid %d)", h.ShimPID)
	if st.Stop == nil || st.Stop.Reason != "signal" || st.Stop.By != want || st.Stop.SentTerm || st.Stop.Peer != nil {
		t.Errorf("stop %+v, want by %q for \"signal\", no peer", st.Stop, want)
	}
	if st.Signal != int(syscall.SIGINT) || st.ExitCode != nil {
		t.Errorf("signal %d exit code %v, want SIGINT", st.Signal, st.ExitCode)
	}
}

func TestKillRequest(t *testing.T) {
	spec := newSpec(t, "stubborn")
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 10*time.Second, "ready", logHas(t, dir, "ready\n"))
	if _, err := shimctl.Call(dir, shimctl.Request{Op: "kill", By: "carol"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st := wait(t, h, dir)
	if s := st.Stop; s == nil || s.By != "carol" || !s.KilledNow || s.SentTerm || s.Peer == nil || s.Peer.PID != os.Getpid() {
		t.Errorf("stop info %+v, want carol's kill from pid %d", s, os.Getpid())
	}
	if st.Survivors != 0 || st.Signal != int(syscall.SIGKILL) {
		t.Errorf("survivors %d signal %d", st.Survivors, st.Signal)
	}
	if _, err := shimctl.Call(dir, shimctl.Request{Op: "status"}, time.Second); err == nil {
		t.Error("the socket answers after the end")
	}
}

// childStats is what the printfast child measured of its own writes.
type childStats struct {
	Lines      int   `json:"lines"`
	MaxWriteNS int64 `json:"max_write_ns"`
	MaxGapNS   int64 `json:"max_gap_ns"`
}

func TestStalledDiskNeverBlocksTheChild(t *testing.T) {
	spec := newSpec(t, "printfast", "1500", "500")
	spec.BufferBytes = 64 << 10
	dir := spec.RunDir
	h, _ := start(t, spec, "stall")
	st := wait(t, h, dir)

	stall, _ := os.ReadFile(filepath.Join(dir, "stall"))
	if !strings.HasPrefix(string(stall), "child-done ") {
		t.Fatalf("the stalled write ended by %q, want the child's having printed everything", stall)
	}
	var cs childStats
	b, _ := os.ReadFile(filepath.Join(dir, childOK))
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	blocked, _ := strconv.ParseInt(strings.TrimPrefix(string(stall), "child-done "), 10, 64)
	t.Logf("child: %d lines while the log writer was blocked for %s; its slowest write took %s, its largest gap between writes %s (500µs sleeps)",
		cs.Lines, time.Duration(blocked), time.Duration(cs.MaxWriteNS), time.Duration(cs.MaxGapNS))
	if st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("exit code %v", st.ExitCode)
	}
	if st.BytesDropped == 0 || st.DropReason != reasonStalled {
		t.Errorf("dropped %d (%q), want some, the disk stalled", st.BytesDropped, st.DropReason)
	}
	log := readLog(t, dir)
	markers := regexp.MustCompile(`\[trainbot\] (\d+) bytes of output were dropped: (.*)\n`).FindAllStringSubmatch(log, -1)
	if len(markers) != 1 {
		t.Fatalf("%d marker lines, want 1", len(markers))
	}
	if n, _ := strconv.ParseInt(markers[0][1], 10, 64); n != st.BytesDropped || markers[0][2] != reasonStalled {
		t.Errorf("marker %q, state says %d bytes", markers[0][0], st.BytesDropped)
	}
	var kept int64
	lineRe := regexp.MustCompile(`^line \d{6} x+$`)
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "[trainbot] "):
		case lineRe.MatchString(line) && len(line) == 188:
			kept += 189
		default:
			t.Fatalf("a broken line %q", line)
		}
	}
	if kept+st.BytesDropped != st.BytesRead || st.BytesRead != int64(cs.Lines)*189 {
		t.Errorf("%d bytes kept + %d dropped, %d read, the child wrote %d", kept, st.BytesDropped, st.BytesRead, cs.Lines*189)
	}
}

func TestFullDiskKeepsOutput(t *testing.T) {
	spec := newSpec(t, "printfast", "300", "100")
	dir := spec.RunDir
	h, _ := start(t, spec, "enospc")
	st := wait(t, h, dir)
	failures, _ := os.ReadFile(filepath.Join(dir, "failures"))
	if n, _ := strconv.Atoi(string(failures)); n < 1 {
		t.Fatalf("%q failed writes, want some", failures)
	}
	var cs childStats
	b, _ := os.ReadFile(filepath.Join(dir, childOK))
	json.Unmarshal(b, &cs)
	if st.BytesDropped != 0 || st.BytesRead != int64(cs.Lines)*189 {
		t.Errorf("dropped %d of %d, the child wrote %d lines", st.BytesDropped, st.BytesRead, cs.Lines)
	}
	log := readLog(t, dir)
	if !strings.HasPrefix(log, "[trainbot] run 1 of test started ") {
		t.Errorf("the log starts %q (the partial write is not continued)", log[:min(len(log), 60)])
	}
	for i := 1; i <= cs.Lines; i++ {
		if !strings.Contains(log, fmt.Sprintf("line %06d x", i)) {
			t.Fatalf("line %d is missing", i)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, shimctl.LogFile)); fi.Size() != st.LogBytes {
		t.Errorf("log_bytes %d, the log has %d", st.LogBytes, fi.Size())
	}
	if strings.Contains(log, "were dropped") {
		t.Error("a drop marker with nothing dropped")
	}
}

func TestCommandNotFound(t *testing.T) {
	spec := newSpec(t, "quiet")
	spec.Argv = []string{"/nonexistent/trainbot-no-such-command", "--flag"}
	lockPath := filepath.Join(filepath.Dir(spec.RunDir), "job.lock")
	lock, err := lockFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := shimctl.Start(shimArgv(""), spec, lock, 10*time.Second)
	if err == nil {
		h.Wait()
		t.Fatal("Start succeeded")
	}
	if !errors.Is(err, shimctl.ErrNotStarted) || !strings.Contains(err.Error(), "/nonexistent/trainbot-no-such-command") {
		t.Errorf("error %q, want shimctl.ErrNotStarted naming the command", err)
	}
	st := readState(t, spec.RunDir)
	if st.StartError == "" || !st.Ended || st.PID != 0 {
		t.Errorf("state %+v, want a start error", st)
	}
	if log := readLog(t, spec.RunDir); !strings.Contains(log, "[trainbot] could not start: ") {
		t.Errorf("the log says %q", log)
	}
	if lockHeld(t, lockPath) {
		t.Error("the lock is held after a failed start")
	}
}

func TestShimDiesBeforeAnswering(t *testing.T) {
	spec := newSpec(t, "quiet")
	spec.RunDir = "relative/dir" // the shim refuses the spec and exits 1
	dir := t.TempDir()
	t.Chdir(dir)
	_, err := shimctl.Start(shimArgv(""), spec, nil, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("error %v, want the shim's complaint", err)
	}
	_, err = shimctl.Start([]string{"/bin/sh", "-c", "echo dying words >&2; exit 3"}, newSpec(t, "quiet"), nil, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "dying words") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("error %v, want the tail of shim.log and the status", err)
	}
}

func TestLongRunDir(t *testing.T) {
	spec := newSpec(t, "quiet")
	spec.RunDir = filepath.Join(spec.RunDir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if len(filepath.Join(spec.RunDir, shimctl.SocketFile)) <= 108 {
		t.Fatal("the path is not long enough")
	}
	h, _ := start(t, spec, "")
	resp, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "status"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.State.PID != h.PID {
		t.Errorf("status pid %d, want %d", resp.State.PID, h.PID)
	}
	fi, err := os.Stat(filepath.Join(spec.RunDir, shimctl.SocketFile))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("ctl.sock: %v %v, want a 0600 socket", fi.Mode(), err)
	}
	if _, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "kill", By: "t"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := wait(t, h, spec.RunDir); st.Stop == nil || !st.Stop.KilledNow {
		t.Errorf("stop %+v", st.Stop)
	}
}

func TestBadRequests(t *testing.T) {
	spec := newSpec(t, "quiet")
	h, _ := start(t, spec, "")
	if _, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "reboot"}, 5*time.Second); err == nil || !strings.Contains(err.Error(), `unknown op "reboot"`) {
		t.Errorf("unknown op: %v", err)
	}
	c, err := shimctl.Dial(spec.RunDir, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("not json\n"))
	b := make([]byte, 4096)
	n, _ := c.Read(b)
	c.Close()
	if !strings.Contains(string(b[:n]), "bad request") {
		t.Errorf("answer to junk: %q", b[:n])
	}
	// A client that says nothing does not keep others out.
	idle, err := shimctl.Dial(spec.RunDir, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := shimctl.Call(spec.RunDir, shimctl.Request{Op: "stop", By: "t"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	wait(t, h, spec.RunDir)
}

func TestLogCap(t *testing.T) {
	spec := newSpec(t, "flood", "12")
	spec.MaxLogBytes = 4 << 20
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 20*time.Second, "the whole flood", func() bool {
		resp, err := shimctl.Call(dir, shimctl.Request{Op: "status"}, 5*time.Second)
		return err == nil && resp.State.LogBytes >= 12<<20
	})
	if err := os.WriteFile(filepath.Join(dir, "finish"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := wait(t, h, dir)
	path := filepath.Join(dir, shimctl.LogFile)
	var fst unix.Stat_t
	if err := unix.Stat(path, &fst); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, dir)
	if strings.Contains(log, "cannot free older output") {
		t.Skip("this filesystem cannot punch holes")
	}
	if st.LogBytes != fst.Size || st.LogBytes < 12<<20 {
		t.Errorf("log_bytes %d, size %d, want the whole 12 MiB and more", st.LogBytes, fst.Size)
	}
	if used := fst.Blocks * 512; used > spec.MaxLogBytes+64<<10 {
		t.Errorf("the log takes %d bytes of disk, the cap is %d", used, spec.MaxLogBytes)
	}
	if st.FreedFrom != 2<<20 || st.FreedTo < st.LogBytes-spec.MaxLogBytes+2<<20 || st.FreedTo%(1<<20) != 0 {
		t.Errorf("freed [%d, %d) of %d bytes, want from 2 MiB to within 2 MiB of the cap from the end", st.FreedFrom, st.FreedTo, st.LogBytes)
	}
	if strings.Trim(log[st.FreedFrom:st.FreedTo], "\x00") != "" || log[st.FreedFrom-1] == 0 || log[st.FreedTo] == 0 {
		t.Error("the freed range is not exactly the NUL bytes")
	}
	if !strings.HasPrefix(log, "[trainbot] run 1 of test started") || !strings.HasSuffix(log, "exit status 0\n") {
		t.Error("the head is not kept or the end not written")
	}
}

// The run's state says the main process's high-water mark of resident
// memory, read from wait4 when it is reaped: a peak of an instant that no
// periodic sample would see, exactly the child's own (it says its VmHWM
// last).
func TestMaxRSSIsThePeak(t *testing.T) {
	spec := newSpec(t, "peak", "200")
	h, _ := start(t, spec, "")
	st := wait(t, h, spec.RunDir)
	if st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("exit code %v, want 0", st.ExitCode)
	}
	m := regexp.MustCompile(`(?m)^vmhwm (\d+)$`).FindStringSubmatch(readLog(t, spec.RunDir))
	if m == nil {
		t.Fatalf("the child did not say its VmHWM:\n%s", readLog(t, spec.RunDir))
	}
	own, _ := strconv.ParseInt(m[1], 10, 64)
	if st.MaxRSS < 200<<20 || st.MaxRSS < own || st.MaxRSS > own+2<<20 {
		t.Errorf("max_rss = %d, want the child's own VmHWM %d (it held 200 MiB), at most 2 MiB more for its exit", st.MaxRSS, own)
	}
}

// The peak of a child smaller than the shim is the child's own, not the
// shim's: Linux folds the shim's high-water mark into the ru_maxrss of a
// child started from it (Go's exec shares the shim's memory until the
// execve), so there the shim's samples of the child's VmHWM say it.
func TestMaxRSSOfASmallChildIsNotTheShims(t *testing.T) {
	// The truth: the VmHWM of the same program, started here and read
	// once it sleeps (it has loaded what it loads).
	truth := exec.Command("/bin/sleep", "5")
	if err := truth.Start(); err != nil {
		t.Skip("no /bin/sleep:", err)
	}
	defer func() { truth.Process.Kill(); truth.Wait() }()
	waitFor(t, 5*time.Second, "/bin/sleep asleep", func() bool {
		st, err := procfs.ReadStat(truth.Process.Pid)
		return err == nil && st.State == 'S'
	})
	want, ok := procfs.ReadHWM(truth.Process.Pid)
	if !ok {
		t.Fatal("cannot read the VmHWM of /bin/sleep")
	}
	spec := newSpec(t, "")
	spec.Argv = []string{"/bin/sleep", "0.5"}
	h, _ := start(t, spec, "")
	if shimHWM, ok := procfs.ReadHWM(h.ShimPID); ok {
		t.Logf("the shim's own VmHWM %d KiB, /bin/sleep's %d KiB", shimHWM>>10, want>>10)
	}
	st := wait(t, h, spec.RunDir)
	if st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("exit code %v, want 0", st.ExitCode)
	}
	if d := st.MaxRSS - want; d < -256<<10 || d > 256<<10 {
		t.Errorf("max_rss = %d KiB, want /bin/sleep's own %d KiB (±256 KiB)", st.MaxRSS>>10, want>>10)
	}
}

// TestRemovedRunDirEndsTheShim: a run whose directory is removed while it
// runs (by hand, or a test's cleanup) is stopped by a signal to its shim,
// and the shim exits instead of trying for ever to write an end nothing
// can read.
func TestRemovedRunDirEndsTheShim(t *testing.T) {
	spec := newSpec(t, "quiet")
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 10*time.Second, "first line", logHas(t, dir, "step 1"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(h.ShimPID, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the shim still runs 20 s after its run's directory was removed and it was asked to stop")
	}
}

// A shim never takes over a run directory another run uses: not one whose
// supervisor answers on ctl.sock (its socket stays), not one that holds a
// state file (it is left as it was).
func TestAnotherRunsDirectoryIsRefused(t *testing.T) {
	spec := newSpec(t, "stubborn")
	dir := spec.RunDir
	h, _ := start(t, spec, "")
	waitFor(t, 10*time.Second, "ready", logHas(t, dir, "ready\n"))
	before := readState(t, dir)
	second := newSpec(t, "print", "3")
	second.RunDir, second.RunID = dir, 2
	lock, err := lockFile(filepath.Join(t.TempDir(), "other.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shimctl.Start(shimArgv(""), second, lock, 10*time.Second); !errors.Is(err, shimctl.ErrNotStarted) || !strings.Contains(err.Error(), "another run") {
		t.Fatalf("second shim in a live run's directory: got %v, want refused", err)
	}
	if _, err := shimctl.Call(dir, shimctl.Request{Op: "status"}, 2*time.Second); err != nil {
		t.Fatalf("the live run's socket no longer answers: %v", err)
	}
	if after := readState(t, dir); after.RunID != before.RunID || after.PID != before.PID {
		t.Errorf("the live run's state was rewritten: %+v", after)
	}
	if _, err := shimctl.Call(dir, shimctl.Request{Op: "kill", By: "test"}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	wait(t, h, dir)
	// Ended, its directory still holds its state: refused all the same.
	lock, err = lockFile(filepath.Join(t.TempDir(), "other.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shimctl.Start(shimArgv(""), second, lock, 10*time.Second); !errors.Is(err, shimctl.ErrNotStarted) || !strings.Contains(err.Error(), shimctl.StateFile) {
		t.Fatalf("second shim in an ended run's directory: got %v, want refused", err)
	}
	if log := readLog(t, dir); strings.Contains(log, "run 2 of") {
		t.Errorf("the second run wrote into the first one's log:\n%s", log)
	}
}

// thisComm is the command name of the test process.
func thisComm(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

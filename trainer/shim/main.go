package shim

// Why this file is long (~800 lines): it is the shim's life in the order
// it happens — take the inherited descriptors, read the spec, claim the
// run directory, start the child, supervise, stop with graces, reap,
// persist the state — around one struct. The concerns that stand alone
// have their own files (output.go, ctl.go, peak.go, tail.go).

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Descriptors the shim inherits from Start.
const (
	readyFD = 3 // write end of the ready pipe: one JSON line, then closed
	lockFD  = 4 // the job's lock file, flock'ed by the bot
	extraFD = 5 // the first of Spec.ExtraLocks more lock files (GPU locks): 5, 6, …

	maxExtraLocks = 256
)

const (
	maxSpec        = 16 << 20
	killFor        = 5 * time.Second // the end's SIGKILL rounds
	killPoll       = 20 * time.Millisecond
	pipeGrace      = time.Second      // after the SIGKILL rounds, for the pipes to close
	flushFor       = 30 * time.Second // a stalled disk may hold the end this long
	flushAbandoned = 5 * time.Second  // then the writer has this long to notice
)

// testHookLog, when set (by this package's tests, in the shim process),
// wraps the writer of output.log: a stalled or failing disk on demand.
var testHookLog func(w io.Writer, spec shimctl.Spec) io.Writer

// Main is the body of "trainbot shim": it reads the Spec from stdin to
// EOF, supervises the run to its end and returns the exit status (0 once a
// run ended or could not start, 1 when the spec could not be read; the
// caller exits with it). Its stdout and stderr are the run's shim.log;
// descriptor 3 is the ready pipe, 4 the job's lock file and 5, 6, … the
// spec's ExtraLocks GPU lock files, which it keeps (the locks held) until
// everything of the run is gone, and keeps from the run's processes. Once
// the main process started, each GPU lock's holder names it
// (gpulock.SetPID), so that the lock stays refused while it lives, should
// the shim die.
//
// output.log holds what the child wrote to stdout and stderr, each stream
// queued in whole lines (a line ends at '\n' or '\r'), so the two never mix
// inside a line — except a line longer than 64 KiB, queued in pieces.
// A stream that ends inside a line gets a '\n'. Between them are the
// shim's notes, lines that start with "[trainbot] ": the start, a stop and
// its escalation, "N bytes of output were dropped: REASON" where output
// was lost, and last "the main process ended: exit status N" (or "killed
// by SIGNAME"). Under MaxLogBytes, a range after the log's head reads as
// NUL bytes (State.FreedFrom, FreedTo).
func Main(args []string, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// Take the inherited descriptors before anything opens a file, and
	// keep them from the child: a grandchild that outlived the run must
	// not hold the job's lock.
	ready := inherited(readyFD, unix.S_IFIFO, "ready")
	lock := inherited(lockFD, unix.S_IFREG, "lock")
	if lock != nil {
		defer lock.Close() // last: releases the job's lock
	}
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: trainbot shim < SPEC.json  (trainbot starts it for each run)")
		tell(ready, shimctl.Ready{Error: "the shim takes no arguments"})
		return 2
	}
	spec, err := readSpec(os.Stdin)
	var locks []*os.File
	if err == nil {
		// Taken before the shim opens a file, as the job's lock is.
		locks, err = inheritedLocks(spec.ExtraLocks)
	}
	for _, f := range locks {
		defer f.Close() // before the job's lock: a start that waits for the job finds its GPUs free too
	}
	if dn, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Dup3(dn, 0, 0)
		unix.Close(dn)
	}
	if err != nil {
		log.Error("read spec", "err", err)
		tell(ready, shimctl.Ready{Error: err.Error()})
		return 1
	}
	log = log.With("run", spec.RunID)
	s := &shim{
		spec:   spec.WithDefaults(),
		locks:  locks,
		log:    log,
		pid:    os.Getpid(),
		q:      newQueue(spec.BufferBytes),
		exited: make(chan struct{}),
		stopC:  make(chan struct{}, 1),
		kick:   make(chan struct{}, 1),
	}
	return s.run(ready)
}

// inherited returns descriptor fd as a file, close-on-exec, when it was
// inherited (open across the exec, so not close-on-exec) and is of the
// expected kind (by hand, fd 3 may be anything). A close-on-exec one is
// the process's own: the Go runtime opens files before Main runs (the
// cgroup's CPU quota, since Go 1.25), and they take the lowest free
// numbers, 4 when Start passed no job lock.
func inherited(fd int, kind uint32, name string) *os.File {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != kind {
		return nil
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
		return nil
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), name)
}

// inheritedLocks takes descriptors 5 to 5+n-1, the lock files Start
// passed after the job's, close-on-exec. It fails when one is not an open
// regular file: a run whose GPU locks are not held must not start.
func inheritedLocks(n int) ([]*os.File, error) {
	if n < 0 || n > maxExtraLocks {
		return nil, fmt.Errorf("spec: extra_locks %d (0 to %d)", n, maxExtraLocks)
	}
	locks := make([]*os.File, 0, n)
	for i := 0; i < n; i++ {
		f := inherited(extraFD+i, unix.S_IFREG, "lock "+strconv.Itoa(extraFD+i))
		if f == nil {
			return locks, fmt.Errorf("spec: %d extra lock(s), but descriptor %d is not an open lock file", n, extraFD+i)
		}
		locks = append(locks, f)
	}
	return locks, nil
}

// tell writes the ready line and closes the pipe; errors are ignored (the
// bot may be gone).
func tell(ready *os.File, m shimctl.Ready) {
	if ready == nil {
		return
	}
	b, _ := json.Marshal(m)
	ready.Write(append(b, '\n'))
	ready.Close()
}

func readSpec(r io.Reader) (shimctl.Spec, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSpec))
	if err != nil {
		return shimctl.Spec{}, fmt.Errorf("read spec: %w", err)
	}
	var spec shimctl.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return shimctl.Spec{}, fmt.Errorf("read spec: %w", err)
	}
	switch {
	case len(spec.Argv) == 0 || spec.Argv[0] == "":
		return shimctl.Spec{}, errors.New("spec: no argv")
	case !filepath.IsAbs(spec.RunDir):
		return shimctl.Spec{}, fmt.Errorf("spec: run_dir %q is not absolute", spec.RunDir)
	}
	return spec, nil
}

// shim is one run's supervisor.
type shim struct {
	spec  shimctl.Spec
	locks []*os.File // the GPU locks (Main closes them)
	log   *slog.Logger
	pid   int
	q     *queue
	w     *writer
	tail  tailRing

	mu    sync.Mutex
	st    shimctl.State // without the output fields, which q and w keep
	stopC chan struct{} // cap 1: the first stop was asked

	reapMu  sync.Mutex // held while reaping and while signalling (no pid is freed meanwhile)
	child   int
	reaped  bool
	ws      unix.WaitStatus
	endedAt time.Time
	exited  chan struct{} // closed when the main process is reaped

	// The main process's peak (peak.go), under reapMu.
	execHWM  int64 // the shim's own VmHWM once the child had started; 0 unknown
	childHWM int64 // the child's largest VmHWM sampled

	stateMu sync.Mutex    // one state.json write at a time
	kick    chan struct{} // cap 1: write state.json
}

func (s *shim) path(name string) string { return filepath.Join(s.spec.RunDir, name) }

func (s *shim) errf(msg string, err error) { s.log.Warn(msg, "err", err) }

// run supervises the run from the child's start to its end.
func (s *shim) run(ready *os.File) int {
	spec := s.spec
	if err := os.MkdirAll(spec.RunDir, 0o755); err != nil {
		s.log.Error("run directory", "err", err)
		tell(ready, shimctl.Ready{Error: err.Error()})
		return 1
	}
	// A run directory is one run's: one that holds a state file, or a
	// control socket that answers, is another run's (a database that
	// was lost restarted the ids), and nothing of it is touched — not
	// even its state file, which failStart would write.
	if err := s.claimRunDir(); err != nil {
		s.log.Error("run directory", "err", err)
		tell(ready, shimctl.Ready{Error: err.Error()})
		return 1
	}
	// Orphans of the run re-parent to the shim, which reaps and kills them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.errf("set child subreaper", err)
	}
	// Notify, not Ignore, for SIGHUP and SIGPIPE: an ignored signal stays
	// ignored in the child across exec; a caught one is reset.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)

	s.st = shimctl.State{Version: 1, RunID: spec.RunID, ShimPID: s.pid, StartedAt: time.Now(), OOMKills: -1}
	logF, err := os.OpenFile(s.path(shimctl.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return s.failStart(ready, nil, nil, err)
	}
	defer logF.Close()
	idxF, err := os.OpenFile(s.path(shimctl.IndexFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return s.failStart(ready, nil, nil, err)
	}
	defer idxF.Close()
	var out io.Writer = logF
	if testHookLog != nil {
		out = testHookLog(logF, spec)
	}
	s.w, err = newWriter(s.q, out, logF, idxF, spec.MaxLogBytes)
	if err != nil {
		return s.failStart(ready, nil, nil, err)
	}
	s.w.notef, s.w.errf = s.q.note, s.errf
	wdone := make(chan struct{})
	go s.w.run(wdone)
	ln, err := listen(spec.RunDir)
	if err != nil {
		return s.failStart(ready, wdone, nil, err)
	}
	srv := newServer(ln, s.handle, s.errf)

	oomStart := procfs.CgroupOOMKills()
	s.q.note("run %d of %s started %s: %s", spec.RunID, spec.Job, s.st.StartedAt.Format(time.RFC3339), termsafe.Argv(spec.Argv))
	outR, outW, err := os.Pipe()
	if err != nil {
		return s.failStart(ready, wdone, srv, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return s.failStart(ready, wdone, srv, err)
	}
	growPipe(outR)
	growPipe(errR)
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, spec.Env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = startWithUmask(cmd, spec.Umask)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return s.failStart(ready, wdone, srv, err)
	}
	// Not cmd.Wait: the reaper reaps the child with everything else that
	// re-parents to the shim.
	s.child = cmd.Process.Pid
	s.execHWM, _ = procfs.ReadHWM(s.pid)
	cmd.Process.Release()
	for _, f := range s.locks {
		if err := gpulock.SetPID(f, s.child); err != nil {
			s.errf("record the run's process in its GPU lock", err)
		}
	}
	s.mu.Lock()
	s.st.PID = s.child
	s.mu.Unlock()

	outDone, errDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(outDone); readPipe(outR, s.q, nil) }()
	go func() { defer close(errDone); readPipe(errR, s.q, &s.tail) }()
	reapStop, reapDone := make(chan struct{}), make(chan struct{})
	go s.reap(chld, reapStop, reapDone)
	hwmDone := make(chan struct{})
	go s.sampleHWM(hwmDone)

	s.writeState(s.snapshot())
	tell(ready, shimctl.Ready{PID: s.child})
	srv.start()
	persistStop, persistDone := make(chan struct{}), make(chan struct{})
	go s.persist(persistStop, persistDone)

	s.supervise(sigs)
	<-hwmDone // it ends with the main process

	// The main process has ended.
	s.mu.Lock()
	s.st.EndedAt = s.endedAt
	switch {
	case s.ws.Exited():
		code := s.ws.ExitStatus()
		s.st.ExitCode = &code
	case s.ws.Signaled():
		s.st.Signal = int(s.ws.Signal())
	}
	s.mu.Unlock()
	// Whatever is left of the run (workers the main process did not reap,
	// daemons it started) must not outlive it; first the output gets
	// DrainTimeout to reach its end.
	waitAll(spec.DrainTimeout, outDone, errDone)
	if _, alive := s.signalRun(0); alive > 0 {
		s.q.note("the main process ended; killing %d leftover process(es) of the run", alive)
	}
	survivors := s.killAll()
	if survivors > 0 {
		s.q.note("%d process(es) of the run could not be killed", survivors)
	}
	if !waitAll(pipeGrace, outDone, errDone) {
		for _, p := range []struct {
			f    *os.File
			done chan struct{}
			name string
		}{{outR, outDone, "stdout"}, {errR, errDone, "stderr"}} {
			select {
			case <-p.done:
			default:
				p.f.SetReadDeadline(time.Now())
				s.q.note("stopped reading the run's %s: it is still held open by a process that could not be killed", p.name)
			}
		}
		waitAll(pipeGrace, outDone, errDone)
	}
	outR.Close()
	errR.Close()

	s.q.close(s.endNote())
	s.finishWriter(wdone)

	close(persistStop)
	<-persistDone
	st := s.snapshot()
	st.Ended, st.Survivors = true, survivors
	if oomEnd := procfs.CgroupOOMKills(); oomStart >= 0 && oomEnd >= 0 {
		st.OOMKills = oomEnd - oomStart
	}
	s.mu.Lock()
	s.st.Ended, s.st.Survivors, s.st.OOMKills = true, survivors, st.OOMKills
	s.mu.Unlock()
	// The end must reach the disk: it is the one record of how the run
	// ended. On a full disk it is written again every second, while the
	// socket answers with it and the job stays locked; a SIGTERM gives up.
	for failed := 0; s.writeState(st) != nil; failed++ {
		if _, err := os.Stat(filepath.Dir(s.path(shimctl.StateFile))); errors.Is(err, fs.ErrNotExist) {
			// The run's directory was removed (by hand, or a test's
			// cleanup): nothing can read the end any more, and waiting for
			// a disk to take it would keep this process for ever.
			s.log.Warn("the run's directory is gone: its end is not recorded")
			break
		}
		if failed == 0 {
			s.log.Warn("state.json not written; trying again every second until it is")
		}
		select {
		case <-time.After(time.Second):
			continue
		case sig := <-sigs:
			if sig != syscall.SIGTERM && sig != syscall.SIGINT {
				continue
			}
		}
		break
	}

	srv.close()
	os.Remove(s.path(shimctl.SocketFile))
	close(reapStop)
	<-reapDone
	s.reapAll()
	return 0
}

// claimRunDir refuses a run directory that another run has used: it holds
// state.json, or a ctl.sock that answers.
func (s *shim) claimRunDir() error {
	if _, err := os.Lstat(s.path(shimctl.StateFile)); err == nil {
		return fmt.Errorf("%s already holds %s: it is another run's directory", s.spec.RunDir, shimctl.StateFile)
	}
	if c, err := shimctl.Dial(s.spec.RunDir, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s of %s answers: another run's supervisor uses this directory", shimctl.SocketFile, s.spec.RunDir)
	}
	return nil
}

// supervise waits for the main process to end, escalating a stop
// StopSignal (SIGINT) → SIGTERM → SIGKILL meanwhile.
func (s *shim) supervise(sigs <-chan os.Signal) {
	never := make(chan time.Time)
	termC, killC := (<-chan time.Time)(never), (<-chan time.Time)(never)
	var termT, killT *time.Timer
	defer func() {
		for _, t := range []*time.Timer{termT, killT} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	for {
		select {
		case <-s.exited:
			return
		case sig := <-sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				s.requestStop(fmt.Sprintf("a signal to the run's supervisor (pid %d)", s.pid), "signal", nil)
			}
		case <-s.stopC:
			s.mu.Lock()
			by, peer := s.st.Stop.By, s.st.Stop.Peer
			s.mu.Unlock()
			first := syscall.Signal(s.spec.StopSignal)
			others, _ := s.signalRun(first)
			s.q.note("stop requested by %s%s: %s to process group %d%s", by, peerNote(peer), unix.SignalName(first), s.child, andOthers(others))
			termT = time.NewTimer(s.spec.StopGrace)
			termC = termT.C
		case <-termC:
			if syscall.Signal(s.spec.StopSignal) == syscall.SIGTERM {
				// The stop was SIGTERM already: the next step is SIGKILL,
				// after both graces.
				killT = time.NewTimer(s.spec.KillGrace)
				killC = killT.C
				continue
			}
			others, _ := s.signalRun(syscall.SIGTERM)
			s.mu.Lock()
			s.st.Stop.SentTerm = true
			s.mu.Unlock()
			s.q.note("still running %s after %s: SIGTERM to process group %d%s", s.spec.StopGrace, unix.SignalName(syscall.Signal(s.spec.StopSignal)), s.child, andOthers(others))
			s.kickPersist()
			killT = time.NewTimer(s.spec.KillGrace)
			killC = killT.C
		case <-killC:
			others, _ := s.signalRun(syscall.SIGKILL)
			s.mu.Lock()
			s.st.Stop.SentKill = true
			s.mu.Unlock()
			s.q.note("still running %s after SIGTERM: SIGKILL to process group %d%s", s.spec.KillGrace, s.child, andOthers(others))
			s.kickPersist()
		}
	}
}

// peerNote is " (pid 812 trainbot, uid 1000)", for the log's note of a
// request from p: the caller's own claim comes with who it was. "" for nil.
func peerNote(p *shimctl.Peer) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" (pid %d %s, uid %d)", p.PID, strconv.Quote(p.Comm), p.UID)
}

func andOthers(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d process(es) that left it", n)
}

// requestStop records the first stop, from peer (nil: a signal), and
// wakes supervise; later ones, and any after the main process ended,
// change nothing.
func (s *shim) requestStop(by, reason string, peer *shimctl.Peer) {
	s.mu.Lock()
	first := s.st.Stop == nil && s.st.EndedAt.IsZero()
	if first {
		s.st.Stop = &shimctl.StopInfo{By: by, Reason: reason, At: time.Now(), Peer: peer}
	}
	s.mu.Unlock()
	if first {
		select {
		case s.stopC <- struct{}{}:
		default:
		}
		s.kickPersist()
	}
}

// killNow sends SIGKILL to the whole run at once (a "kill" request from
// peer).
func (s *shim) killNow(by, reason string, peer *shimctl.Peer) {
	s.mu.Lock()
	if !s.st.EndedAt.IsZero() {
		s.mu.Unlock()
		return
	}
	if s.st.Stop == nil {
		if reason == "" {
			reason = "killed"
		}
		s.st.Stop = &shimctl.StopInfo{By: by, Reason: reason, At: time.Now(), Peer: peer}
	}
	s.st.Stop.KilledNow = true
	s.mu.Unlock()
	others, _ := s.signalRun(syscall.SIGKILL)
	s.q.note("kill requested by %s%s: SIGKILL to process group %d%s", by, peerNote(peer), s.child, andOthers(others))
	s.kickPersist()
}

// signalRun sends sig to the run's process group while the main process
// is not reaped (so the group id cannot have been reused), and to every
// other live descendant of the shim: those that left the group (setsid)
// and, once the main process is gone, everything. sig 0 only counts.
// others is how many were signalled outside the group, alive how many
// processes the run had.
func (s *shim) signalRun(sig syscall.Signal) (others, alive int) {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	group := !s.reaped
	if group && sig != 0 {
		unix.Kill(-s.child, sig)
	}
	procs, err := procfs.ReadProcs()
	if err != nil {
		s.errf("read processes", err)
		return 0, 0
	}
	desc := procs.Descendants(s.pid)
	for _, pid := range desc {
		if st, ok := procs.Get(pid); ok && group && st.PGID == s.child {
			continue
		}
		if sig != 0 {
			unix.Kill(pid, sig)
		}
		others++
	}
	return others, len(desc)
}

// killAll sends SIGKILL to everything left of the run until nothing is
// (bounded), and returns how many processes survived.
func (s *shim) killAll() int {
	deadline := time.Now().Add(killFor)
	for {
		_, alive := s.signalRun(syscall.SIGKILL)
		if alive == 0 || time.Now().After(deadline) {
			return alive
		}
		s.reapAll()
		t := time.NewTimer(killPoll) // the killed processes exit and are reaped
		<-t.C
	}
}

// waitAll waits up to d for every channel to close.
func waitAll(d time.Duration, chans ...chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, c := range chans {
		select {
		case <-c:
		case <-t.C:
			return false
		}
	}
	return true
}

func (s *shim) endNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.st.ExitCode != nil:
		return fmt.Sprintf(shimctl.EndNote+": exit status %d", *s.st.ExitCode)
	case s.st.Signal != 0:
		return shimctl.EndNote + ": killed by " + unix.SignalName(syscall.Signal(s.st.Signal))
	}
	return shimctl.EndNote
}

// finishWriter waits for the writer to write everything; a disk that stays
// stalled or full for flushFor loses the rest (counted as dropped).
func (s *shim) finishWriter(wdone chan struct{}) {
	if waitAll(flushFor, wdone) {
		return
	}
	s.w.abandon.Store(true) // a writer retrying after an error gives up
	if waitAll(flushAbandoned, wdone) {
		return
	}
	// The writer is stuck in a write: what it has not written is lost.
	s.q.mu.Lock()
	s.q.dropped += s.q.buffered
	s.q.reason = reasonStalled
	s.q.mu.Unlock()
	s.errf("gave up on output.log", errors.New(reasonStalled))
}

// failStart ends a run whose command could not be started.
func (s *shim) failStart(ready *os.File, wdone chan struct{}, srv *server, err error) int {
	s.log.Error("start the run", "err", err)
	s.mu.Lock()
	s.st.StartError = err.Error()
	s.st.Ended, s.st.EndedAt = true, time.Now()
	s.mu.Unlock()
	if wdone != nil {
		s.q.close("could not start: " + err.Error())
		s.finishWriter(wdone)
	}
	s.writeState(s.snapshot())
	tell(ready, shimctl.Ready{Error: err.Error()})
	if srv != nil {
		srv.ln.Close()
		os.Remove(s.path(shimctl.SocketFile))
	}
	return 0
}

// reap reaps every child of the shim — the main process and whatever
// re-parented to it — on SIGCHLD, and every second in case one was missed.
func (s *shim) reap(chld <-chan os.Signal, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.reapAll()
		select {
		case <-chld:
		case <-t.C:
		case <-stop:
			return
		}
	}
}

func (s *shim) reapAll() {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if pid == s.child && !s.reaped {
			s.reaped, s.ws, s.endedAt = true, ws, time.Now()
			s.mu.Lock()
			s.st.MaxRSS = s.childPeak(ru.Maxrss * 1024) // Linux gives KiB
			s.mu.Unlock()
			close(s.exited)
		}
	}
}

// handle answers one control request from peer.
func (s *shim) handle(req shimctl.Request, peer shimctl.Peer) shimctl.Response {
	by := req.By
	if by == "" {
		by = "someone"
	}
	switch req.Op {
	case "status":
	case "stop":
		peer.Comm, peer.Trainbot = procfs.Comm(peer.PID), sameExecutable(peer.PID)
		s.requestStop(by, req.Reason, &peer)
	case "kill":
		peer.Comm, peer.Trainbot = procfs.Comm(peer.PID), sameExecutable(peer.PID)
		s.killNow(by, req.Reason, &peer)
	case "signal":
		sig := syscall.Signal(req.Signal)
		if !slices.Contains(shimctl.SignalsAllowed, sig) {
			return shimctl.Response{Error: fmt.Sprintf("signal %d may not be sent to the run (a stop goes by \"stop\")", req.Signal)}
		}
		s.mu.Lock()
		ended := !s.st.EndedAt.IsZero()
		s.mu.Unlock()
		if ended {
			return shimctl.Response{Error: "the run's main process has ended"}
		}
		peer.Comm = procfs.Comm(peer.PID)
		others, _ := s.signalRun(sig)
		s.q.note("%s requested by %s%s: %s to process group %d%s", cmp.Or(req.Reason, "a signal"), by, peerNote(&peer), unix.SignalName(sig), s.child, andOthers(others))
	default:
		return shimctl.Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	st := s.snapshot()
	qs := s.q.stats()
	st.LastOutput, st.Buffered = qs.lastOutput, qs.buffered
	return shimctl.Response{OK: true, State: &st}
}

// sameExecutable reports whether process pid runs the shim's own
// executable file (the trainbot binary).
func sameExecutable(pid int) bool {
	if pid <= 0 {
		return false
	}
	theirs, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	mine, err := os.Stat("/proc/self/exe")
	return err == nil && os.SameFile(mine, theirs)
}

// snapshot is the state now, output counters included.
func (s *shim) snapshot() shimctl.State {
	s.mu.Lock()
	st := s.st
	if st.Stop != nil {
		stop := *st.Stop // its Peer is never changed once recorded
		st.Stop = &stop
	}
	if st.ExitCode != nil {
		code := *st.ExitCode
		st.ExitCode = &code
	}
	s.mu.Unlock()
	qs := s.q.stats()
	st.BytesRead, st.BytesDropped, st.DropReason = qs.read, qs.dropped, qs.reason
	if s.w != nil {
		st.LogBytes = s.w.size.Load()
		if to := s.w.punched.Load(); to > 0 {
			st.FreedFrom, st.FreedTo = capHead(s.spec.MaxLogBytes), to
		}
	}
	st.StderrTail = s.tail.last()
	return st
}

func (s *shim) kickPersist() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// persist writes state.json when kicked (a stop), off the paths that
// signal the run: a slow disk delays the file, not the signals.
func (s *shim) persist(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-s.kick:
			s.writeState(s.snapshot())
		case <-stop:
			return
		}
	}
}

func (s *shim) writeState(st shimctl.State) error {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	b, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = writeFileAtomic(s.path(shimctl.StateFile), append(b, '\n'))
	}
	if err != nil {
		s.errf("write state.json", err)
	}
	return err
}

// writeFileAtomic replaces path with data so that a reader sees the old
// or the new file, never a part: a temporary file in the same directory,
// fsync, rename, fsync of the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(private.Mode(0o644)) // what a create would give: 0600 under trainbot's umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// startWithUmask starts cmd with umask (nil: the shim's own): the files
// the training writes are its user's business, not private to trainbot.
// The umask is the process's, so it is switched only for the fork; no
// other goroutine of the shim creates a file meanwhile (the output writer
// writes to files already open, the socket is bound before).
func startWithUmask(cmd *exec.Cmd, umask *int) error {
	if umask == nil {
		return cmd.Start()
	}
	old := syscall.Umask(*umask)
	defer syscall.Umask(old)
	return cmd.Start()
}

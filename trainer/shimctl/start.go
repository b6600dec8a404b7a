package shimctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrNotStarted is wrapped by Start's error when the shim ran but the
// run's command could not be started (not found, not executable, a bad
// working directory): state.json then has StartError.
var ErrNotStarted = errors.New("the run's command could not be started")

// ErrNoAnswer is wrapped by Start's error when the shim did not report
// within the timeout. Start has then sent it SIGTERM (it stops whatever it
// started and records that in state.json) and returns its Handle with
// the error: the caller calls Wait.
var ErrNoAnswer = errors.New("the run's supervisor did not answer")

// Handle is a started shim, seen from the bot that started it.
type Handle struct {
	ShimPID int // the shim process (its own session)
	PID     int // the run's main process, also its process group id

	cmd  *exec.Cmd
	once sync.Once
	err  error
}

// Wait reaps the shim process once it has exited (the run is over) and
// returns its exit error. It may be called from any goroutine; later
// calls return the first call's result.
func (h *Handle) Wait() error {
	h.once.Do(func() { h.err = h.cmd.Wait() })
	return h.err
}

// Start starts the shim of one run: shimArgv (the trainbot binary and
// "shim") in a new session, with the spec as JSON on its stdin, its stdout
// and stderr appended to RUN_DIR/shim.log, the write end of a ready pipe
// as descriptor 3, lock — the job's lock file, already flock'ed by the
// caller — as descriptor 4, and extra — more locked files: the run's GPU
// locks (internal/gpulock) — as descriptors 5, 6, … (spec.ExtraLocks is
// set to their number). The flock belongs to the open file description,
// so the shim's copies keep them held for the life of the run, and the
// shim closes them only once every process of the run is gone (the GPU
// locks just before the job's). It records the run's main process in each
// GPU lock's holder before it reports (gpulock.SetPID).
//
// Start always closes lock and every extra file, without LOCK_UN: the
// caller must not use them afterwards. (When the shim could not even be
// executed, closing the caller's only copies releases the locks.)
//
// It returns when the shim reports that the run's main process started
// (Handle.PID), or with an error: wrapping ErrNotStarted when the command
// could not be started, including the tail of shim.log when the shim died
// first, or wrapping ErrNoAnswer (with the Handle) after timeout (30 s
// when timeout <= 0).
//
// The caller calls Handle.Wait when the run is over, to reap the shim. A
// bot that restarted cannot, and need not: the orphaned shim re-parents
// to init (or the nearest subreaper), which reaps it.
func Start(shimArgv []string, spec Spec, lock *os.File, timeout time.Duration, extra ...*os.File) (*Handle, error) {
	if lock != nil {
		defer lock.Close()
	}
	for _, f := range extra {
		if f != nil {
			defer f.Close()
		}
	}
	for i, f := range extra {
		if f == nil {
			return nil, fmt.Errorf("start the run's supervisor: extra lock %d is nil", i)
		}
	}
	spec.ExtraLocks = len(extra)
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if len(shimArgv) == 0 {
		return nil, errors.New("start the run's supervisor: no command")
	}
	if err := os.MkdirAll(spec.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	logPath := filepath.Join(spec.RunDir, ShimLog)
	logF, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	defer logF.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	defer readyR.Close()

	cmd := exec.Command(shimArgv[0], shimArgv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = specR, logF, logF
	cmd.Env = spec.ShimEnv
	cmd.ExtraFiles = append([]*os.File{readyW, lock}, extra...) // descriptors 3, 4, then 5…
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	specR.Close()
	readyW.Close() // the shim's copy is the only writer left: EOF when it dies
	if err != nil {
		return nil, fmt.Errorf("start the run's supervisor: %w", err)
	}
	h := &Handle{ShimPID: cmd.Process.Pid, cmd: cmd}

	deadline := time.Now().Add(timeout)
	specW.SetWriteDeadline(deadline)
	_, werr := specW.Write(specJSON)
	specW.Close()
	readyR.SetReadDeadline(deadline)
	line, rerr := bufio.NewReader(io.LimitReader(readyR, 1<<20)).ReadBytes('\n')

	var msg Ready
	if len(line) > 0 && json.Unmarshal(line, &msg) == nil {
		switch {
		case msg.PID > 0:
			h.PID = msg.PID
			return h, nil
		case msg.Error != "":
			h.Wait() // it exits as soon as it has said so
			return nil, fmt.Errorf("%w: %s", ErrNotStarted, msg.Error)
		}
	}
	if errors.Is(rerr, os.ErrDeadlineExceeded) || errors.Is(werr, os.ErrDeadlineExceeded) {
		cmd.Process.Signal(syscall.SIGTERM)
		return h, fmt.Errorf("%w within %s (pid %d, asked to stop)", ErrNoAnswer, timeout, h.ShimPID)
	}
	// It closed the ready pipe without a word: it died.
	werr2 := h.Wait()
	return nil, fmt.Errorf("the run's supervisor ended before it started the run (%v): %s", werr2, logTail(logPath, 2048))
}

// logTail returns the last lines of a file, at most limit bytes.
func logTail(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no " + filepath.Base(path) + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-limit, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	b = bytes.TrimSpace(b[:n])
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	if len(b) == 0 {
		return "(" + filepath.Base(path) + " is empty)"
	}
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(" | ")))
}

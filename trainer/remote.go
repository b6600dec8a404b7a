package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Runs on another host ([[hosts]]; a job's host or hosts, or 开始 job@host):
// the run is owned by a trainbot shim on that host, which that host's
// trainbot starts (the "agent" trainer/agent runs over SSH) under the
// host's own job and GPU locks, exactly as a local start does here
// (StartHere). The hub keeps a mirror of the run's directory — output.log,
// output.idx and the metrics file, copied by offset as the host's shim
// writes them (remoteRunner) — and observes the mirror as it observes a
// local run: the same ingestion, the same stored offsets, so a hub that
// restarts, or a connection that comes back, goes on from the last byte
// mirrored and stores every point once.

// RunnerSSH is the Runner of a run on another host.
const RunnerSSH = "ssh"

// RemoteHost is one host runs can be started on: trainer/agent's Link, the
// hub's side of the agent protocol over the host's SSH connection. Each
// call is bounded by ctx; an error that is not about the run (the host
// does not answer) leaves the run as it was.
type RemoteHost interface {
	// Start starts a run there (StartHere on that host).
	Start(ctx context.Context, spec RemoteSpec) (*RemoteStarted, error)
	// Status says how the run is (StatusHere there).
	Status(ctx context.Context, ref RemoteRef) (*RemoteStatus, error)
	// Stop forwards a stop (StopHere there).
	Stop(ctx context.Context, ref RemoteRef, req RemoteStop) error
	// Read returns at most max bytes of one of the run's files from off
	// (ReadHere there): fewer at the end of what is written.
	Read(ctx context.Context, ref RemoteRef, file string, off int64, max int) ([]byte, error)
	// Checkpoint is the newest complete checkpoint of pattern under dir
	// there (NewestCheckpoint on that host), "" for none.
	Checkpoint(ctx context.Context, dir, pattern string) (string, error)
}

// RemoteSpec is a run to start on a host.
type RemoteSpec struct {
	// Hub names the trainbot that starts it: the run's directory there is
	// DATA/hub/HUB/ID, so that runs of two hubs never share one.
	Hub   string   `json:"hub"`
	RunID int64    `json:"run_id"`
	Job   string   `json:"job"`
	Lock  string   `json:"lock"`
	Argv  []string `json:"argv"`
	Dir   string   `json:"dir,omitempty"`
	// Env is what the job adds to the environment of the host's trainbot
	// (its login environment there), KEY=VALUE.
	Env          []string      `json:"env,omitempty"`
	StopGrace    time.Duration `json:"stop_grace"`
	KillGrace    time.Duration `json:"kill_grace"`
	DrainTimeout time.Duration `json:"drain_timeout"`
	MaxLogBytes  int64         `json:"max_log_bytes"`
	GPUs         GPURequest    `json:"gpus"`
	// StopSignal is the job's signals.stop; 0 (and a hub from before it):
	// SIGINT.
	StopSignal int `json:"stop_signal,omitempty"`
}

// RemoteStarted is a run started on a host.
type RemoteStarted struct {
	RunDir  string   `json:"run_dir"`
	PID     int      `json:"pid"`
	ShimPID int      `json:"shim_pid"`
	GPUs    []RunGPU `json:"gpus,omitempty"`
}

// RemoteRef is what the hub keeps of a run on a host.
type RemoteRef struct {
	RunDir  string `json:"run_dir"`
	PID     int    `json:"pid"`
	ShimPID int    `json:"shim_pid"`
}

// Shim liveness in RemoteStatus.
const (
	ShimAlive   = "alive"
	ShimGone    = "gone"
	ShimUnknown = "unknown"
)

// RemoteStatus is how a run on a host is, as its host tells it.
type RemoteStatus struct {
	// State is its shim's word (its control socket, else its state.json
	// once ended); nil when neither answers.
	State *shimctl.State `json:"state,omitempty"`
	// Shim is ShimAlive, ShimGone or ShimUnknown when State is nil or
	// not ended.
	Shim string `json:"shim"`
	// Processes is, with Shim gone, how many processes of the run live
	// (-1: the process table cannot be read).
	Processes int `json:"processes"`
	// Sizes of the run's files there (bytes; 0 when missing).
	LogSize     int64 `json:"log_size"`
	IndexSize   int64 `json:"index_size"`
	MetricsSize int64 `json:"metrics_size"`
}

// RemoteStop is a stop forwarded to a host.
type RemoteStop struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	Kill   bool   `json:"kill,omitempty"`
	// Signal, when set, is sent to the processes of a run whose shim is
	// gone (its orphans), instead of asking the shim.
	Signal int `json:"signal,omitempty"`
}

// The files a hub mirrors of a run on a host (and the only ones ReadHere
// reads).
var remoteFiles = map[string]bool{shimctl.LogFile: true, shimctl.IndexFile: true, MetricsFile: true, shimctl.ShimLog: true}

// HereOptions are what the host's side of a remote start needs.
type HereOptions struct {
	// DataDir is this host's trainbot data directory: its locks and the
	// hubs' run directories (DATA/hub/HUB/ID).
	DataDir string
	// ShimCommand starts a run's supervisor (this binary with "shim").
	ShimCommand []string
	// GPUs claims this host's GPUs; nil: the host has none to give.
	GPUs GPUAllocator
}

var hubName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// StartHere starts a run a hub asked for on this host: the job's lock
// taken here (refused, a *BusyError, while a run of it lives here — of
// any trainbot that shares this data directory), the GPUs claimed here,
// the run's directory made, and its shim started in its own session,
// holding the locks: it owes nothing to the connection that asked.
// wait is called with the shim's Handle (the caller reaps it).
func StartHere(spec RemoteSpec, o HereOptions, wait func(*shimctl.Handle)) (*RemoteStarted, error) {
	if !hubName.MatchString(spec.Hub) || spec.RunID <= 0 || len(spec.Argv) == 0 {
		return nil, fmt.Errorf("a remote start needs a hub name, a run id and a command (got %q, %d, %d words)", spec.Hub, spec.RunID, len(spec.Argv))
	}
	lockName := spec.Lock
	if lockName == "" {
		lockName = spec.Job
	}
	if err := os.MkdirAll(filepath.Join(o.DataDir, "locks"), 0o755); err != nil {
		return nil, err
	}
	lock, err := acquireJobLock(filepath.Join(o.DataDir, "locks", lockFileName(lockName)))
	if err != nil {
		return nil, err
	}
	defer lock.release() // a no-op once the shim has it
	var claim *GPUClaim
	if !spec.GPUs.Zero() {
		if o.GPUs == nil {
			return nil, fmt.Errorf("%w: job %s asks for %d GPU(s), and the trainbot here sees no GPU (no NVIDIA driver, or a build without NVML)", ErrNoGPUs, spec.Job, spec.GPUs.N())
		}
		if claim, err = o.GPUs.Claim(context.Background(), spec.GPUs, GPUHolder{Job: spec.Job}); err != nil {
			return nil, err
		}
		defer claim.close()
		if claim.Record != nil {
			claim.Record(spec.RunID)
		}
	}
	parent := filepath.Join(o.DataDir, "hub", spec.Hub)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	runDir := filepath.Join(parent, strconv.FormatInt(spec.RunID, 10))
	if err := os.Mkdir(runDir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, &runDirTakenError{dir: runDir}
		}
		return nil, err
	}
	metricsPath := filepath.Join(runDir, MetricsFile)
	f, err := os.OpenFile(metricsPath, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	env := spec.Env
	var gpus []RunGPU
	var gpuLocks []*os.File
	if claim != nil {
		env = append(env, claim.Env...)
		gpus, gpuLocks, claim.Locks = claim.GPUs, claim.Locks, nil
	}
	lock.describe(lockHolder{Run: spec.RunID, RunDir: runDir,
		What: fmt.Sprintf("run #%d (%s) of trainbot %s, started %s by trainbot pid %d", spec.RunID, spec.Job, spec.Hub, time.Now().Format(time.RFC3339), os.Getpid())})
	sspec := shimctl.Spec{
		RunID: spec.RunID, Job: spec.Job, Argv: spec.Argv, Dir: spec.Dir, Env: childEnv(nil, env, spec.RunID, runDir, metricsPath),
		Umask: childUmask(), RunDir: runDir, StopGrace: spec.StopGrace, KillGrace: spec.KillGrace, DrainTimeout: spec.DrainTimeout,
		MaxLogBytes: spec.MaxLogBytes, StopSignal: spec.StopSignal,
	}
	h, err := shimctl.Start(o.ShimCommand, sspec, lock.f, 30*time.Second, gpuLocks...)
	lock.f = nil // closed by shimctl.Start: the shim holds the locks now, or nobody does
	if h != nil {
		wait(h)
	}
	if err != nil {
		return nil, err
	}
	return &RemoteStarted{RunDir: runDir, PID: h.PID, ShimPID: h.ShimPID, GPUs: gpus}, nil
}

// checkRunDir refuses a run directory that is not a hub's run directory
// under dataDir: a hub reads and stops only what it started.
func checkRunDir(dataDir, runDir string) error {
	rel, err := filepath.Rel(filepath.Join(dataDir, "hub"), filepath.Clean(runDir))
	if err != nil || !filepath.IsLocal(rel) || len(strings.Split(rel, string(filepath.Separator))) != 2 {
		return fmt.Errorf("%s is not a run directory of this host's data directory %s", runDir, dataDir)
	}
	return nil
}

// StatusHere tells how a run a hub started on this host is.
func StatusHere(dataDir string, ref RemoteRef) (*RemoteStatus, error) {
	if err := checkRunDir(dataDir, ref.RunDir); err != nil {
		return nil, err
	}
	st := &RemoteStatus{Shim: ShimAlive}
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(ref.RunDir, name))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// Sizes first: a state read after them says at least as much, so an
	// end is never taken with sizes from before its last bytes.
	st.LogSize, st.IndexSize, st.MetricsSize = size(shimctl.LogFile), size(shimctl.IndexFile), size(MetricsFile)
	resp, err := shimctl.Call(ref.RunDir, shimctl.Request{Op: "status"}, 2*time.Second)
	if err == nil && resp.State != nil {
		st.State = resp.State
		if st.State.Ended {
			st.LogSize, st.IndexSize, st.MetricsSize = size(shimctl.LogFile), size(shimctl.IndexFile), size(MetricsFile)
		}
		return st, nil
	}
	if s, ferr := shimctl.ReadState(ref.RunDir); ferr == nil && s.Ended {
		st.State = s
		st.LogSize, st.IndexSize, st.MetricsSize = size(shimctl.LogFile), size(shimctl.IndexFile), size(MetricsFile)
		return st, nil
	}
	started := time.Now()
	if s, ferr := shimctl.ReadState(ref.RunDir); ferr == nil && !s.StartedAt.IsZero() {
		started = s.StartedAt
	}
	switch processLiveness(ref.ShimPID, started.Add(time.Minute)) {
	case processAlive:
		return st, nil
	case livenessUnknown:
		st.Shim = ShimUnknown
		return st, nil
	}
	st.Shim = ShimGone
	pids, known := runProcesses(ref.RunDir, ref.PID)
	st.Processes = len(pids)
	if !known {
		st.Processes = -1
	}
	return st, nil
}

// StopHere forwards a hub's stop to the run's shim on this host, or, with
// req.Signal, signals the processes of a run whose shim is gone.
func StopHere(dataDir string, ref RemoteRef, req RemoteStop) error {
	if err := checkRunDir(dataDir, ref.RunDir); err != nil {
		return err
	}
	if req.Signal != 0 {
		if ref.PID > 0 {
			syscall.Kill(-ref.PID, syscall.Signal(req.Signal))
		}
		pids, _ := runProcesses(ref.RunDir, 0)
		for _, p := range pids {
			syscall.Kill(p, syscall.Signal(req.Signal))
		}
		return nil
	}
	op := "stop"
	if req.Kill {
		op = "kill"
	}
	_, err := shimctl.Call(ref.RunDir, shimctl.Request{Op: op, By: req.By, Reason: req.Reason}, 2*time.Second)
	return err
}

// ReadHere reads at most max bytes of one of a run's files from off.
func ReadHere(dataDir string, ref RemoteRef, file string, off int64, max int) ([]byte, error) {
	if err := checkRunDir(dataDir, ref.RunDir); err != nil {
		return nil, err
	}
	if !remoteFiles[file] {
		return nil, fmt.Errorf("%q is not a file a hub reads", file)
	}
	f, err := os.Open(filepath.Join(ref.RunDir, file))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, max)
	n, err := f.ReadAt(b, off)
	if n > 0 || err == nil || errors.Is(err, io.EOF) {
		return b[:n], nil
	}
	return nil, err
}

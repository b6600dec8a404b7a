// Package shimctl is the bot's side of a run's supervisor (trainer/shim,
// "trainbot shim") and the contract between the two: the files of a run
// directory, the Spec the bot hands over, the State the shim writes, the
// control socket's requests and answers (Call, Dial), the output index
// (ReadIndex), and Start, which launches a shim and waits for its word.
// Package trainer imports this, not the shim, so nothing that only knows
// runs links the supervisor process; cmd/trainbot's main enters that
// (shim.MainIfAsked).
package shimctl

import (
	"syscall"
	"time"
)

// Files in a run directory.
const (
	LogFile    = "output.log" // every byte the child wrote, whole lines per stream, plus "[trainbot] " notes (see shim.Main)
	IndexFile  = "output.idx" // IndexRecordSize-byte records: when each part of the log was read
	StateFile  = "state.json" // State, written atomically (temp file, fsync, rename)
	SocketFile = "ctl.sock"   // the control socket, mode 0600; peers of another uid are refused
	ShimLog    = "shim.log"   // the shim's own stdout and stderr (its errors)
)

// EndNote starts the shim's last line in the log ("[trainbot] " EndNote
// ": exit status 0"): its final state follows within milliseconds.
const EndNote = "the main process ended"

// IndexRecordSize is the size of one output.idx record: the log offset up to
// which output had been read (int64, little endian), then the time it was
// read (int64 Unix nanoseconds, little endian). Records are appended in
// offset order about every 100 ms or 1 MiB of output while output arrives
// (100 ms after the last write when output pauses), and once at the end,
// whose offset is then the log's final size. A line that ends at offset e
// was read at the time of the first record whose offset is >= e. ReadIndex
// reads them.
const IndexRecordSize = 16

// DefaultBufferBytes bounds the output held in memory while the disk is
// slow, stalled or full. Past it, output is dropped (counted) rather than
// make the child wait. (An empty buffer takes any one chunk, so the bound
// may be passed by one chunk of at most 128 KiB.)
const DefaultBufferBytes = 64 << 20

// Spec is what the bot hands to the shim (as JSON on the shim's stdin).
// Zero durations take DefaultStopGrace, DefaultKillGrace and
// DefaultDrainTimeout.
type Spec struct {
	RunID        int64         `json:"run_id"`
	Job          string        `json:"job"`
	Argv         []string      `json:"argv"`          // never through a shell
	Dir          string        `json:"dir,omitempty"` // working directory, "" for the shim's
	Env          []string      `json:"env"`           // the child's whole environment; nil: the shim's
	RunDir       string        `json:"run_dir"`       // absolute
	StopGrace    time.Duration `json:"stop_grace"`    // after StopSignal, before SIGTERM
	KillGrace    time.Duration `json:"kill_grace"`    // after SIGTERM, before SIGKILL
	DrainTimeout time.Duration `json:"drain_timeout"` // after the main process exits, for the rest to close the output
	MaxLogBytes  int64         `json:"max_log_bytes"` // disk the log may take; 0: no cap (see State.FreedFrom)
	BufferBytes  int64         `json:"buffer_bytes"`  // 0: DefaultBufferBytes
	// StopSignal is the signal a graceful stop sends first (the job's
	// signals.stop, for schedulers that reserve SIGINT); 0: SIGINT. When
	// it is SIGTERM, the SIGTERM step is not sent again: SIGKILL follows
	// after StopGrace plus KillGrace.
	StopSignal int `json:"stop_signal,omitempty"`
	// Umask is the umask the child starts with (the shim's own stays, for
	// the run's files); nil: the shim's.
	Umask *int `json:"umask,omitempty"`
	// ExtraLocks is how many more lock files the shim inherits after the
	// job's, as descriptors 5, 6, …: the run's GPU locks. Start sets it.
	ExtraLocks int `json:"extra_locks,omitempty"`
	// ShimEnv is the environment of the shim process itself, which Start
	// sets (it is not sent to the shim); nil: the caller's.
	ShimEnv []string `json:"-"`
}

// State is the one source of truth for how the run's process lives and ends
// (state.json, and the answer to a "status" request).
type State struct {
	Version    int       `json:"version"` // 1
	RunID      int64     `json:"run_id"`
	ShimPID    int       `json:"shim_pid"`
	PID        int       `json:"pid"` // the main process; also its process group id
	StartedAt  time.Time `json:"started_at"`
	StartError string    `json:"start_error,omitempty"` // the command could not be started (then Ended, PID 0)

	Ended     bool      `json:"ended"`             // the main process has ended, everything is reaped (or counted in Survivors) and the log is complete
	ExitCode  *int      `json:"exit_code"`         // nil while running or when a signal ended it
	Signal    int       `json:"signal,omitempty"`  // the signal that ended the main process
	EndedAt   time.Time `json:"ended_at,omitzero"` // when the main process ended
	OOMKills  int64     `json:"oom_kills"`         // rise of the memory cgroup's oom_kill count during the run; -1 unknown
	Stop      *StopInfo `json:"stop,omitempty"`    // a stop was asked
	Survivors int       `json:"survivors"`         // processes of the run still alive after the final SIGKILL (want 0)
	// MaxRSS is the main process's high-water mark of resident memory in
	// bytes, from wait4's rusage when it was reaped (ru_maxrss: its own,
	// or that of a descendant it waited for when larger; never a sum) —
	// except where that could be the shim's own mark, folded into it at
	// the child's execve: then the largest VmHWM of the child sampled
	// while it ran (see peak.go). 0 while it runs, or when nothing told.
	MaxRSS int64 `json:"max_rss,omitempty"`

	BytesRead    int64  `json:"bytes_read"`            // output read from the pipes
	LogBytes     int64  `json:"log_bytes"`             // size of output.log; at the end: read this far and the log is complete
	BytesDropped int64  `json:"bytes_dropped"`         // output not written because the buffer was full
	DropReason   string `json:"drop_reason,omitempty"` // why, last: a write error ("no space left on device"), "the disk did not keep up (stalled)", "log reached max_log_bytes"

	// Output freed to keep the log under MaxLogBytes: bytes [FreedFrom,
	// FreedTo) of output.log read as NUL bytes. (The note that says so is
	// written where the log passes the cap, so a fast-growing log may free
	// it in turn: these fields are what stays.)
	FreedFrom int64 `json:"freed_from,omitempty"`
	FreedTo   int64 `json:"freed_to,omitempty"`

	StderrTail []string `json:"stderr_tail,omitempty"` // the last 40 stderr lines, each cut at 2048 bytes

	// Live fields, in "status" answers only.
	LastOutput time.Time `json:"last_output,omitzero"` // when the child last printed
	Buffered   int64     `json:"buffered,omitempty"`   // output waiting in memory for the disk
}

// StopInfo says who asked for a stop and what it took.
type StopInfo struct {
	// By is who asked, as the request said (a caller may say anything:
	// Peer is who it was), or the shim's own words for a stop it took
	// by a signal.
	By        string    `json:"by"`
	Reason    string    `json:"reason"` // as the bot gave it ("stopped", "nan"); "signal" when the shim itself got SIGTERM/SIGINT
	At        time.Time `json:"at"`
	SentTerm  bool      `json:"sent_term"`  // SIGTERM followed SIGINT after StopGrace
	SentKill  bool      `json:"sent_kill"`  // SIGKILL followed after KillGrace
	KilledNow bool      `json:"killed_now"` // a "kill" request: SIGKILL without the grace periods
	// Peer is the process that sent the stop or kill on the control
	// socket; nil for a stop the shim took by a signal (and in the state
	// of shims from before it was recorded).
	Peer *Peer `json:"peer,omitempty"`
}

// Peer is the process at the other end of a control connection, as the
// kernel tells it (SO_PEERCRED, as it was when it connected).
type Peer struct {
	PID  int    `json:"pid"` // 0 when it is in another pid namespace
	UID  int    `json:"uid"`
	Comm string `json:"comm,omitempty"` // its command name (/proc/PID/comm) when the request was taken; "" if it had ended
	// Trainbot is set when the peer runs the shim's own executable: a
	// trainbot (the one that started the run, or one that re-attached
	// after a restart), whose By is what trainbot recorded.
	Trainbot bool `json:"trainbot,omitempty"`
}

// Request is one JSON line sent on the control socket; Response is the one
// JSON line answered.
type Request struct {
	Op     string `json:"op"`               // "status", "stop", "kill" or "signal"
	By     string `json:"by,omitempty"`     // stop, kill, signal: who asks
	Reason string `json:"reason,omitempty"` // stop: recorded as given; signal: what for ("checkpoint", "control")
	// Signal is the signal number a "signal" request sends to the run's
	// process group (and the processes that left it), as a stop's are:
	// one of SignalsAllowed.
	Signal int `json:"signal,omitempty"`
}

// SignalsAllowed are the signals a "signal" request may send: those a
// script handles to save a checkpoint or read its control file, never
// one that stops it (a stop goes by "stop", recorded).
var SignalsAllowed = []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGURG}

// Response answers a Request.
type Response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	State *State `json:"state,omitempty"`
}

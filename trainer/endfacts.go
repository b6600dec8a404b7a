package trainer

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// How a run ended, as facts: the rule that decided and what it knew. The
// record keeps them, the supervisor's English (Run.Detail) is made from
// them, and a chat words them in its own language (bot/render's EndDetail).

// EndWhy names the rule of the end's classification that decided a run's
// detail: with EndFacts, what every language words at the edge.
type EndWhy string

// The rules of classify, and the ends a run's owner decided (a Slurm
// state, a watched process's exit) or nobody could tell (interrupted).
const (
	WhyNoStart    EndWhy = "no_start"    // the command could not be started (StartError)
	WhyStoppedNaN EndWhy = "stopped_nan" // trainbot stopped it for a NaN loss (NaN)
	WhyStopped    EndWhy = "stopped"     // StoppedBy stopped it; StopHow, Signal, ExitCode say how it went
	WhyOOM        EndWhy = "oom"         // out of memory, from the output (OOM); ThenStoppedBy when a stop followed
	WhyStrayKill  EndWhy = "stray_kill"  // a SIGKILL trainbot did not send, and the cgroup counts no OOM kill
	WhyOOMKill    EndWhy = "oom_kill"    // a SIGKILL trainbot did not send: the kernel's OOM killer (OOMKills, -1 unknown)
	WhyNaN        EndWhy = "nan"         // the loss was NaN to the end (NaN)
	WhyExit       EndWhy = "exit"        // it exited with ExitCode (0: finished)
	WhySignal     EndWhy = "signal"      // a signal ended it (Signal)

	// WhySlurm: Slurm's state decided (Slurm.State): FAILED by a signal
	// (Signal), NODE_FAIL, TIMEOUT (Slurm.TimeLimit), OUT_OF_MEMORY,
	// CANCELLED outside trainbot, PREEMPTED, BOOT_FAIL, DEADLINE.
	WhySlurm EndWhy = "slurm"
	// WhyInterrupted: how the run ended is not known; Interrupted says why.
	WhyInterrupted EndWhy = "interrupted"
	// WhyHostReboot: the host rebooted while the run ran (Reboot); its
	// supervisor and processes went with it.
	WhyHostReboot EndWhy = "host_reboot"
	// WhyUnwatched: StoppedBy ended the watch of a watched run (PID); its
	// process goes on when GoesOn.
	WhyUnwatched EndWhy = "unwatched"
	// WhyWatchExit: a watched process (PID) exited; its exit status is
	// not known (not trainbot's child), its log's last lines may tell: an
	// OOM, or an ErrorLine.
	WhyWatchExit EndWhy = "watch_exit"
)

// Why a run is interrupted (EndFacts.Interrupted, with WhyInterrupted).
const (
	// InterruptSupervisorGone: the run's supervisor (the shim,
	// SupervisorPID) ended without recording how the run ended; Orphans
	// when processes of the run lived on after it.
	InterruptSupervisorGone = "supervisor_gone"
	// InterruptTrainbotGone: the trainbot that supervised the run in its
	// own process (before runners; SupervisorPID) stopped while it ran;
	// found at the next start. LogWritten, AlivePGID tell what is known.
	InterruptTrainbotGone = "trainbot_gone"
	// InterruptSlurmForgot: Slurm no longer knows the job (Slurm.JobID,
	// Slurm.Error): it ended unwatched, longer ago than MinJobAge, on a
	// cluster without accounting.
	InterruptSlurmForgot = "slurm_forgot"
	// InterruptWatchEnded: the watch of a watched run ended.
	InterruptWatchEnded = "watch_ended"
)

// How a stopped run went (EndFacts.StopHow).
const (
	StopKilledNow   = "killed_now"   // SIGKILL at once: trainbot was shutting down
	StopKilledGrace = "killed_grace" // SIGKILL after the grace periods
	StopSignal      = "signal"       // another signal ended it (Signal)
	StopExit        = "exit"         // it exited (ExitCode)
	StopSlurmCancel = "slurm_cancel" // Slurm cancelled the job (after the grace, a kill, or while it was pending)
	StopSignalled   = "signalled"    // a watched process (PID) was signalled and exited
)

// EndFacts is how a run ended, as classify or the run's owner decided it,
// in fields: the record keeps them (runs --json "end") beside Detail, the
// supervisor's English made from them, and a chat in another language
// words them itself — nothing reads the English back. Every end recorded
// by this version has them; runs recorded before have none.
type EndFacts struct {
	Why           EndWhy     `json:"why"`
	Reboot        *Reboot    `json:"reboot,omitempty"` // WhyHostReboot
	ExitCode      *int       `json:"exit_code,omitempty"`
	Signal        int        `json:"signal,omitempty"` // the signal that ended it (SignalName words it)
	StartError    string     `json:"start_error,omitempty"`
	RunDirTaken   string     `json:"run_dir_taken,omitempty"` // WhyNoStart: the run's directory existed (another trainbot with another database?)
	StoppedBy     string     `json:"stopped_by,omitempty"`
	StopHow       string     `json:"stop_how,omitempty"`
	ThenStoppedBy string     `json:"then_stopped_by,omitempty"` // WhyOOM: who stopped the run after it ran out of memory
	OOM           *OOM       `json:"oom,omitempty"`
	OOMKills      int64      `json:"oom_kills,omitempty"` // WhyOOMKill: the cgroup's count during the run; -1 not readable
	Peak          string     `json:"peak,omitempty"`      // WhyOOM, WhyOOMKill: the peak memory trainbot saw, in its words
	NaN           *NaNStreak `json:"nan,omitempty"`       // the NaN episode (WhyNaN, WhyStoppedNaN; with the others, one the loss recovered from)
	StderrTail    []string   `json:"stderr_tail,omitempty"`

	// Slurm is the job of a Slurm run as Slurm last told it (with every
	// end of such a run; WhySlurm words it).
	Slurm *SlurmEnd `json:"slurm,omitempty"`
	// Interrupted says why the end is not known (WhyInterrupted).
	Interrupted string `json:"interrupted,omitempty"`
	// SupervisorPID is the process that is gone: the run's shim
	// (supervisor_gone), the trainbot before runners (trainbot_gone).
	SupervisorPID int `json:"supervisor_pid,omitempty"`
	// Orphans: processes of the run lived on after its supervisor died
	// (supervisor_gone).
	Orphans *Orphans `json:"orphans,omitempty"`
	// LogWritten is when the run's log was last written (trainbot_gone),
	// when that was after the run started.
	LogWritten *time.Time `json:"log_written,omitempty"`
	// AlivePGID is the run's process group, still alive and unsupervised
	// when the end was recorded (trainbot_gone).
	AlivePGID int `json:"alive_pgid,omitempty"`
	// PID is a watched run's process (WhyUnwatched, WhyWatchExit, StopSignalled).
	PID int `json:"pid,omitempty"`
	// GoesOn: the watched process lives on after the watch (WhyUnwatched).
	GoesOn bool `json:"goes_on,omitempty"`
	// ErrorLine is the error a watched run's log ends with (WhyWatchExit).
	ErrorLine string `json:"error_line,omitempty"`

	// EndNotes are the end's other remarks, as facts.
	EndNotes
	// Notes are remarks in the supervisor's English: as the version
	// before EndNotes recorded them (this one writes none).
	Notes []string `json:"notes,omitempty"`
}

// EndNotes are what an end says beside how the run ended: output that was
// not written to the log, the log cut by max_log_bytes, processes that
// survived SIGKILL, alert rules that never saw their metric, metric names
// past the limit. The English words them in this order, after the rest.
type EndNotes struct {
	Dropped     *Dropped     `json:"dropped,omitempty"`
	LogCut      *LogCut      `json:"log_cut,omitempty"`
	Survivors   int          `json:"survivors,omitempty"`    // processes of the run that survived SIGKILL
	UnseenRules []UnseenRule `json:"unseen_rules,omitempty"` // alert rules whose metric never came
	// MetricNamesMax is set when the output named more metrics than it:
	// points of further names were not recorded (the log has them, or
	// those LogCut did not free).
	MetricNamesMax int `json:"metric_names_max,omitempty"`
}

// Dropped is output the run's supervisor could not write to its log.
type Dropped struct {
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason,omitempty"` // the supervisor's: a write error, "the disk did not keep up (stalled)", "log reached max_log_bytes"; "" for a slow disk
}

// LogCut is older output max_log_bytes freed: bytes From to To of the log
// (its first From bytes are kept).
type LogCut struct {
	MaxLogBytes int64 `json:"max_log_bytes"`
	From        int64 `json:"from"`
	To          int64 `json:"to"`
}

// UnseenRule is an alert rule (Rule, as configured) whose metric never
// came: the run never printed it, or, for steps_per_s and gpu_util, it
// could not be measured.
type UnseenRule struct {
	Rule   string `json:"rule"`
	Metric string `json:"metric"`
}

// notes are the end's remarks in the supervisor's words.
func (n *EndNotes) notes() []string {
	var out []string
	if d := n.Dropped; d != nil {
		reason := d.Reason
		if reason == "" {
			reason = "the disk did not keep up"
		}
		out = append(out, fmt.Sprintf("%s of output were not written to the log (%s)", units.Bytes(d.Bytes), reason))
	}
	if c := n.LogCut; c != nil {
		out = append(out, fmt.Sprintf("the log passed max_log_bytes (%s): %s of older output after its first %s were freed", units.Bytes(c.MaxLogBytes), units.Bytes(c.To-c.From), units.Bytes(c.From)))
	}
	if n.Survivors > 0 {
		out = append(out, fmt.Sprintf("%d process(es) of the run survived SIGKILL", n.Survivors))
	}
	for _, u := range n.UnseenRules {
		what := "which the run never printed"
		switch u.Metric {
		case MetricStepsPerSec:
			what = "which could not be measured (no step was printed)"
		case MetricGPUUtil:
			what = "which NVML never reported for the run's processes"
		}
		out = append(out, fmt.Sprintf("alert rule %q watched %s, %s", u.Rule, u.Metric, what))
	}
	if n.MetricNamesMax > 0 {
		where := "the log has them"
		if n.LogCut != nil {
			where = "the log has those max_log_bytes did not free"
		}
		out = append(out, fmt.Sprintf("the output named more than %d metrics: points of further metric names were not recorded (%s)", n.MetricNamesMax, where))
	}
	return out
}

// SlurmEnd is a Slurm job as Slurm last told it.
type SlurmEnd struct {
	JobID     string `json:"job_id"`
	State     string `json:"state,omitempty"`      // Slurm's name: COMPLETED, FAILED, TIMEOUT, ...
	Reason    string `json:"reason,omitempty"`     // Slurm's reason (NonZeroExitCode, TimeLimit, ...), "" for None
	Node      string `json:"node,omitempty"`       // the nodes it ran on
	TimeLimit string `json:"time_limit,omitempty"` // as Slurm prints it ("01:00:00", "UNLIMITED")
	Error     string `json:"error,omitempty"`      // slurm_forgot: what Slurm's commands answered
}

// Orphans are the processes of a run that outlived its supervisor: of
// process group PGID (or carrying the run's directory), alive until
// Until; StoppedBy asked them to stop, Signal is the last signal sent.
type Orphans struct {
	PGID      int       `json:"pgid"`
	Until     time.Time `json:"until"`
	StoppedBy string    `json:"stopped_by,omitempty"`
	Signal    int       `json:"signal,omitempty"`
}

// clone is a deep copy of f.
func (f *EndFacts) clone() *EndFacts {
	if f == nil {
		return nil
	}
	c := *f
	c.StderrTail, c.Notes = append([]string(nil), f.StderrTail...), append([]string(nil), f.Notes...)
	if f.ExitCode != nil {
		v := *f.ExitCode
		c.ExitCode = &v
	}
	if f.OOM != nil {
		v := *f.OOM
		c.OOM = &v
	}
	if f.NaN != nil {
		v := *f.NaN
		c.NaN = &v
	}
	if f.Slurm != nil {
		v := *f.Slurm
		c.Slurm = &v
	}
	if f.Orphans != nil {
		v := *f.Orphans
		c.Orphans = &v
	}
	if f.LogWritten != nil {
		v := *f.LogWritten
		c.LogWritten = &v
	}
	if f.Dropped != nil {
		v := *f.Dropped
		c.Dropped = &v
	}
	if f.LogCut != nil {
		v := *f.LogCut
		c.LogCut = &v
	}
	c.UnseenRules = append([]UnseenRule(nil), f.UnseenRules...)
	return &c
}

// slurmText is what Slurm's state says of a job's end (WhySlurm), in the
// words of package slurm's Classify; a CANCELLED job was cancelled
// outside trainbot (trainbot's own cancel is a stop).
func (f *EndFacts) slurmText() string {
	s := f.Slurm
	if s == nil {
		s = &SlurmEnd{}
	}
	if s.State == "CANCELLED" {
		return "cancelled outside trainbot"
	}
	_, d := slurm.Classify(slurm.Job{State: s.State, Node: s.Node, TimeLimit: s.TimeLimit, Signal: f.Signal, ExitCode: derefInt(f.ExitCode)})
	return d
}

// English is the facts in the supervisor's words: Run.Detail.
func (f *EndFacts) English() string {
	tail := lastLines(f.StderrTail, 5)
	withTail := func(d string) string {
		if tail != "" {
			d += "; last stderr:\n" + tail
		}
		return d
	}
	recovered := ""
	if f.NaN != nil && f.Why != WhyNaN && f.Why != WhyStoppedNaN {
		recovered = "; " + f.NaN.text() + ", then it recovered"
	}
	var d string
	switch f.Why {
	case WhyNoStart:
		d = "could not start: " + f.StartError
	case WhyStoppedNaN:
		if f.NaN == nil { // asked by a trainbot before a restart: this one saw no streak
			d = "stopped by " + f.StoppedBy + " for a NaN loss"
			break
		}
		d = f.NaN.text() + "; stopped by trainbot"
	case WhyStopped:
		d = "stopped by " + f.StoppedBy
		switch f.StopHow {
		case StopKilledNow:
			d += " (killed with SIGKILL: trainbot was shutting down and could not wait longer)"
		case StopKilledGrace:
			d += " (killed with SIGKILL after the grace periods)"
		case StopSignal:
			d += fmt.Sprintf(" (ended by %s)", signalName(syscall.Signal(f.Signal)))
		case StopSlurmCancel:
			d += " (Slurm job cancelled)"
		case StopSignalled:
			d += fmt.Sprintf(" (the watched process, pid %d, was signalled)", f.PID)
		default:
			d += fmt.Sprintf(" (exit status %d)", derefInt(f.ExitCode))
		}
	case WhyOOM:
		d = f.OOM.Summary()
		if f.Peak != "" {
			d += "; " + f.Peak
		}
		if f.ThenStoppedBy != "" {
			d += "; then stopped by " + f.ThenStoppedBy
		}
	case WhyStrayKill:
		d = withTail("killed by SIGKILL that trainbot did not send; the memory cgroup counts no OOM kill during the run, so something else killed it")
	case WhyOOMKill:
		if f.OOMKills > 0 {
			d = f.OOM.Summary() + " (the memory cgroup counts " + strconv.FormatInt(f.OOMKills, 10) + " OOM kill(s) during the run)"
		} else {
			d = "killed by SIGKILL that trainbot did not send: most likely the kernel's OOM killer (host memory; the cgroup's OOM count is not readable here)"
		}
		if f.Peak != "" {
			d += "; " + f.Peak
		}
	case WhyNaN:
		d = f.NaN.text()
	case WhySignal:
		d = withTail("killed by " + signalName(syscall.Signal(f.Signal)) + recovered)
	case WhySlurm:
		d = f.slurmText()
	case WhyInterrupted:
		d = f.interruptedText()
	case WhyHostReboot:
		d = f.Reboot.String()
	case WhyUnwatched:
		d = "no longer watched: stopped by " + f.StoppedBy
		if f.GoesOn {
			d += fmt.Sprintf("; the process (pid %d) goes on", f.PID)
		}
	case WhyWatchExit:
		switch {
		case f.OOM != nil:
			d = fmt.Sprintf("the process (pid %d) exited; its log's last lines say: %s", f.PID, f.OOM.Summary())
		case f.ErrorLine != "":
			d = fmt.Sprintf("the process (pid %d) exited; its log ends with an error: %s", f.PID, f.ErrorLine)
		default:
			d = fmt.Sprintf("the process (pid %d) exited; its exit status is unknown (it is not trainbot's child)", f.PID)
		}
	default: // WhyExit
		d = fmt.Sprintf("exit status %d", derefInt(f.ExitCode)) + recovered
		if derefInt(f.ExitCode) != 0 {
			d = withTail(d)
		}
	}
	if notes := append(f.EndNotes.notes(), f.Notes...); len(notes) > 0 {
		d += "; " + strings.Join(notes, "; ")
	}
	return d
}

// interruptedText is WhyInterrupted in the supervisor's words.
func (f *EndFacts) interruptedText() string {
	switch f.Interrupted {
	case InterruptTrainbotGone:
		d := fmt.Sprintf("trainbot (pid %d) stopped while the run was active; found at the next start", f.SupervisorPID)
		if f.LogWritten != nil {
			d += "; its log was last written " + f.LogWritten.Format(time.RFC3339)
		}
		if f.AlivePGID > 0 {
			d += fmt.Sprintf("; its process group %d is still alive, unsupervised", f.AlivePGID)
		}
		return d
	case InterruptSlurmForgot:
		var id, why string
		if s := f.Slurm; s != nil {
			id, why = s.JobID, s.Error
		}
		d := "Slurm no longer knows job " + id
		if why != "" {
			d += " (" + why + ")"
		}
		return d + ": it ended while no trainbot watched it, longer ago than the cluster's MinJobAge, on a cluster without accounting; how it ended is unknown"
	case InterruptWatchEnded:
		return "the watch ended"
	}
	// InterruptSupervisorGone
	d := fmt.Sprintf("the run's supervisor (pid %d) ended without recording how the run ended", f.SupervisorPID)
	if o := f.Orphans; o != nil {
		d += fmt.Sprintf("; its processes (group %d) lived on unsupervised until %s", o.PGID, o.Until.Format(time.RFC3339))
		if o.StoppedBy != "" {
			d += fmt.Sprintf(", stopped by %s (%s)", o.StoppedBy, SignalText(o.Signal))
		}
	}
	return d
}

// SignalText is the name of a signal sent to a run ("SIGTERM"), "" for none.
func SignalText(n int) string {
	if n == 0 {
		return ""
	}
	return SignalName(n)
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

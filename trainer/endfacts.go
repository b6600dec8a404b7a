package trainer

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// How a run ended, as facts: the rule that decided and what it knew. The
// record keeps them, the supervisor's English (Run.Detail) is made from
// them, and a chat words them in its own language (bot/render's EndDetail).

// EndWhy names the rule of the end's classification that decided a run's
// detail: with EndFacts, what every language words at the edge.
type EndWhy string

// The rules of classify.
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
)

// How a stopped run went (EndFacts.StopHow).
const (
	StopKilledNow   = "killed_now"   // SIGKILL at once: trainbot was shutting down
	StopKilledGrace = "killed_grace" // SIGKILL after the grace periods
	StopSignal      = "signal"       // another signal ended it (Signal)
	StopExit        = "exit"         // it exited (ExitCode)
)

// EndFacts is how a run ended, as classify decided it, in fields: the
// record keeps them (runs --json "end") beside Detail, the supervisor's
// English made from them, and a chat in another language words them
// itself — nothing reads the English back.
type EndFacts struct {
	Why           EndWhy     `json:"why"`
	ExitCode      *int       `json:"exit_code,omitempty"`
	Signal        int        `json:"signal,omitempty"` // the signal that ended it (SignalName words it)
	StartError    string     `json:"start_error,omitempty"`
	StoppedBy     string     `json:"stopped_by,omitempty"`
	StopHow       string     `json:"stop_how,omitempty"`
	ThenStoppedBy string     `json:"then_stopped_by,omitempty"` // WhyOOM: who stopped the run after it ran out of memory
	OOM           *OOM       `json:"oom,omitempty"`
	OOMKills      int64      `json:"oom_kills,omitempty"` // WhyOOMKill: the cgroup's count during the run; -1 not readable
	Peak          string     `json:"peak,omitempty"`      // WhyOOM, WhyOOMKill: the peak memory trainbot saw, in its words
	NaN           *NaNStreak `json:"nan,omitempty"`       // the NaN episode (WhyNaN, WhyStoppedNaN; with the others, one the loss recovered from)
	StderrTail    []string   `json:"stderr_tail,omitempty"`
	// Notes are the end's other remarks (output dropped, the log cut,
	// survivors, rules that never fired), in the supervisor's English.
	Notes []string `json:"notes,omitempty"`
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
	default: // WhyExit
		d = fmt.Sprintf("exit status %d", derefInt(f.ExitCode)) + recovered
		if derefInt(f.ExitCode) != 0 {
			d = withTail(d)
		}
	}
	if len(f.Notes) > 0 {
		d += "; " + strings.Join(f.Notes, "; ")
	}
	return d
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

package bot

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Alert kinds: Reply.Alert of a KindAlert reply. The run outcomes keep
// their names.
const (
	AlertOOM      = "oom"      // out of memory (while running, or the end)
	AlertFailed   = "failed"   // the run failed
	AlertNaN      = "nan"      // NaN/Inf loss
	AlertStalled  = "stalled"  // no output for stall_after
	AlertFinished = "finished" // the run finished
	AlertStopped  = "stopped"  // someone stopped it
	AlertGPU      = "gpu"      // a GPU threshold: memory, temperature, ECC
	AlertXid      = "xid"      // an NVIDIA Xid error
	AlertSchedule = "schedule" // a scheduled start was refused or failed
	AlertTrainbot = "trainbot" // trainbot's own trouble: a chat transport stopped, the disk full
)

// AlertKinds lists every alert kind, for config validation.
var AlertKinds = []string{AlertOOM, AlertFailed, AlertNaN, AlertStalled, AlertFinished, AlertStopped, AlertGPU, AlertXid, AlertSchedule, AlertTrainbot}

// Severity orders pushes for quiet hours.
type Severity int

// Severities, lowest first.
const (
	SeverityProgress Severity = iota // progress, reports, started notices
	SeverityInfo                     // a run finished or was stopped
	SeverityWarning                  // stalled, a GPU threshold, a refused scheduled start
	SeverityCritical                 // out of memory, failed, NaN, Xid
)

var severityNames = map[Severity]string{SeverityProgress: "progress", SeverityInfo: "info", SeverityWarning: "warning", SeverityCritical: "critical"}

func (s Severity) String() string { return severityNames[s] }

// ParseSeverity reads "info", "warning" or "critical".
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "info":
		return SeverityInfo, nil
	case "warning", "warn":
		return SeverityWarning, nil
	case "critical":
		return SeverityCritical, nil
	}
	return 0, fmt.Errorf("want info, warning or critical, got %q", s)
}

// SeverityOf says how urgent a reply is.
func SeverityOf(r Reply) Severity {
	if r.Kind != KindAlert {
		return SeverityProgress
	}
	switch r.Alert {
	case AlertFinished, AlertStopped:
		return SeverityInfo
	case AlertStalled, AlertGPU, AlertSchedule:
		return SeverityWarning
	}
	return SeverityCritical // oom, failed, nan, xid, trainbot, and alerts of no known kind
}

// QuietHours is a daily span of local time during which a chat gets only
// alerts of MinSeverity or above: progress pushes are dropped, other alerts
// are held until the span ends. The zero value is never quiet.
type QuietHours struct {
	Start, End  int // minutes after midnight; Start == End means no span
	MinSeverity Severity
	Location    *time.Location // nil: time.Local
}

// ParseQuietHours reads a span such as "23:00-08:00" (it may cross
// midnight); min is the lowest severity that still goes out during it.
func ParseQuietHours(span string, min Severity) (QuietHours, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(span), "-")
	if !ok {
		return QuietHours{}, fmt.Errorf("want a span of local time such as \"23:00-08:00\", got %q", span)
	}
	start, err := clockMinutes(a)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %v", span, err)
	}
	end, err := clockMinutes(b)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %v", span, err)
	}
	if start == end {
		return QuietHours{}, fmt.Errorf("%q: the span starts and ends at the same time", span)
	}
	return QuietHours{Start: start, End: end, MinSeverity: min}, nil
}

func clockMinutes(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) || len(m) != 2 {
		return 0, fmt.Errorf("%q is not a time of day like 23:00", strings.TrimSpace(s))
	}
	return (hh*60 + mm) % (24 * 60), nil
}

// IsZero reports whether q is never quiet.
func (q QuietHours) IsZero() bool { return q.Start == q.End }

func (q QuietHours) String() string {
	if q.IsZero() {
		return ""
	}
	return fmt.Sprintf("%02d:%02d-%02d:%02d", q.Start/60, q.Start%60, q.End/60, q.End%60)
}

// Decision is what to do with a push now.
type Decision int

// Decisions.
const (
	Send Decision = iota // send it now
	Hold                 // send it when the quiet hours end
	Drop                 // do not send it (progress during quiet hours)
)

// Decide says whether r may go out at now. For Hold, until is when the
// quiet hours end.
func (q QuietHours) Decide(now time.Time, r Reply) (d Decision, until time.Time) {
	if q.IsZero() {
		return Send, time.Time{}
	}
	loc := q.Location
	if loc == nil {
		loc = time.Local
	}
	t := now.In(loc)
	cur := t.Hour()*60 + t.Minute()
	inside := false
	if q.Start < q.End {
		inside = cur >= q.Start && cur < q.End
	} else {
		inside = cur >= q.Start || cur < q.End
	}
	if !inside {
		return Send, time.Time{}
	}
	sev := SeverityOf(r)
	switch {
	case sev == SeverityProgress:
		return Drop, time.Time{}
	case sev >= q.MinSeverity:
		return Send, time.Time{}
	}
	end := time.Date(t.Year(), t.Month(), t.Day(), q.End/60, q.End%60, 0, 0, loc)
	if !end.After(t) {
		end = time.Date(t.Year(), t.Month(), t.Day()+1, q.End/60, q.End%60, 0, 0, loc)
	}
	return Hold, end
}

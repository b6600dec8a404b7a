package chat

import (
	"fmt"
	"strings"
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
	AlertRule     = "rule"     // one of the user's alert rules ([[alerts]]) fired
	AlertEnded    = "ended"    // a watched run ended (its process exited, or it is no longer watched)
	AlertGPUFree  = "gpufree"  // the GPUs a chat asked to be told of (通知空闲) are free
)

// AlertKinds lists every alert kind, for config validation.
var AlertKinds = []string{AlertOOM, AlertFailed, AlertNaN, AlertStalled, AlertFinished, AlertStopped, AlertGPU, AlertXid, AlertSchedule, AlertTrainbot, AlertRule, AlertEnded, AlertGPUFree}

// Severity orders replies by urgency: quiet hours let the urgent ones
// through; WeCom colours and the webhook's "severity" field show it.
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
	case AlertFinished, AlertStopped, AlertEnded, AlertGPUFree:
		return SeverityInfo
	case AlertStalled, AlertGPU, AlertSchedule, AlertRule:
		return SeverityWarning
	}
	return SeverityCritical // oom, failed, nan, xid, trainbot, and alerts of no known kind
}

package config

import (
	"strings"
	"syscall"
)

// signalNames are the signals a job's [jobs.signals] may name; which of
// them suits which key is the job's check (trainer).
var signalNames = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM, "SIGCONT": syscall.SIGCONT,
	"SIGSTOP": syscall.SIGSTOP, "SIGWINCH": syscall.SIGWINCH, "SIGURG": syscall.SIGURG, "SIGALRM": syscall.SIGALRM,
}

// SignalNumber reads a signal's name, "SIGTERM", "TERM" or "term".
func SignalNumber(name string) (syscall.Signal, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig, ok := signalNames[n]
	return sig, ok
}

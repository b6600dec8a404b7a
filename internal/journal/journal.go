// Package journal is trainbot's side of systemd's journal: whether stderr
// is the journal's stream (JOURNAL_STREAM, systemd.exec(5)), and a slog
// handler whose lines carry their syslog priority instead of a time
// (sd-daemon(3)), so that `journalctl -p warning` filters them.
package journal

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Under reports whether stderr goes to systemd's journal: systemd
// sets JOURNAL_STREAM=DEV:INODE for a service whose output is the journal
// stream with that device and inode (systemd.exec(5)). A stderr that is a
// file of another device or inode was redirected (trainbot run by hand
// from inside a service): not the journal. A stderr that is no file
// (tests) is taken at the variable's word.
func Under(environ []string, stderr io.Writer) bool {
	var v string
	for _, kv := range environ {
		if s, ok := strings.CutPrefix(kv, "JOURNAL_STREAM="); ok {
			v = s
		}
	}
	dev, ino, ok := strings.Cut(v, ":")
	if !ok {
		return false
	}
	f, isFile := stderr.(*os.File)
	if !isFile {
		return true
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && strconv.FormatUint(uint64(st.Dev), 10) == dev && strconv.FormatUint(st.Ino, 10) == ino
}

// Handler logs for the journal: no time (the journal stamps each
// line), and the level as the syslog priority prefix that journald reads
// from the start of a line ("<6>msg=… run=12"; sd-daemon(3)), so that
// `journalctl -p warning` filters trainbot's lines.
func Handler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewTextHandler(&journalWriter{w: w}, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})
}

// journalWriter turns the "level=INFO " that starts each record of a
// TextHandler without time into its syslog priority prefix. The handler
// writes one whole record per Write.
type journalWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (j *journalWriter) Write(p []byte) (int, error) {
	out := p
	if rest, ok := bytes.CutPrefix(p, []byte("level=")); ok {
		level, tail, _ := bytes.Cut(rest, []byte(" "))
		out = append([]byte(priority(string(level))), tail...)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// priority is the syslog prefix of a slog level's text ("WARN", "INFO+2").
func priority(level string) string {
	switch {
	case strings.HasPrefix(level, "DEBUG"):
		return "<7>"
	case strings.HasPrefix(level, "INFO"):
		return "<6>"
	case strings.HasPrefix(level, "WARN"):
		return "<4>"
	}
	return "<3>"
}

// Package reload is how a running trainbot serve re-reads its config:
// SIGHUP (systemctl reload, or trainbot reload, which finds serve by the
// pid file serve.pid in the data directory), one reload at a time, and the
// outcome told to the log and to the chats ("config reloaded from
// trainbot.toml: …", or why the old config stays).
//
// What a reload changes is not this package's: the caller's Apply reads
// the file and puts the new auth lists, jobs, schedules and push channels
// in place (cmd/trainbot, the one place that knows both the config and the
// parts it configures). This package knows neither.
//
// Signals are caught, never ignored with SIG_IGN: an ignored signal's
// disposition is inherited by the processes trainbot starts (the runs'
// supervisors and the runs), which then could not be stopped by a hangup.
package reload

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/procfs"
)

// PIDFile is where trainbot serve writes its pid in the data directory,
// for trainbot reload.
const PIDFile = "serve.pid"

// Options configure a Reloader.
type Options struct {
	// Path is the config file; "" when trainbot runs without one (a
	// SIGHUP then only logs that there is nothing to reload).
	Path string
	// Apply reads Path and puts what can change while trainbot runs in
	// place. summary says what is in force now; an error says why nothing
	// changed.
	Apply func(ctx context.Context) (summary string, err error)
	// Notify tells the chats, in each chat's language; nil: the log only.
	Notify func(words func(i18n.Lang) chat.Reply)
	Logger *slog.Logger
}

// Reloader reloads the config on SIGHUP (OnHangup) or when asked (Reload).
type Reloader struct {
	o  Options
	mu sync.Mutex // one reload at a time
}

// New returns a Reloader; it does nothing until OnHangup or Reload.
func New(o Options) *Reloader {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reloader{o: o}
}

// Reload applies the config file once, and tells the log and the chats
// what came of it: the summary, or the error and that the old config
// stays.
func (r *Reloader) Reload(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.o.Path == "" {
		r.o.Logger.Warn("SIGHUP: there is no config file to reload (trainbot runs without --config)")
		return
	}
	summary, err := r.o.Apply(ctx)
	if err != nil {
		r.o.Logger.Error("config reload failed; the old config stays", "config", r.o.Path, "err", err)
		r.notify(func(l i18n.Lang) chat.Reply {
			return chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertTrainbot, Text: l.T(i18n.ReloadFailed, err)}
		})
		return
	}
	r.o.Logger.Info("config reloaded", "config", r.o.Path, "summary", summary)
	r.notify(func(l i18n.Lang) chat.Reply {
		return chat.Reply{Kind: chat.KindNotice, Text: l.T(i18n.Reloaded, filepath.Base(r.o.Path), summary)}
	})
}

func (r *Reloader) notify(words func(i18n.Lang) chat.Reply) {
	if r.o.Notify != nil {
		r.o.Notify(words)
	}
}

// OnHangup reloads on each SIGHUP until the returned func is called.
func (r *Reloader) OnHangup() (stop func()) { return OnHangup(r.Reload) }

// IgnoreHangup makes serve go on after a SIGHUP that comes while it starts
// (before the Reloader exists), logging that it does nothing. The returned
// func stops it.
func IgnoreHangup(logger *slog.Logger) (stop func()) {
	return OnHangup(func(context.Context) {
		logger.Warn("SIGHUP ignored: trainbot is still starting; send it again to reload the config")
	})
}

// OnHangup calls f for each SIGHUP until the returned func is called (it
// waits for a call in progress; the context given to f is cancelled
// then).
func OnHangup(f func(ctx context.Context)) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-hup:
				f(ctx)
			case <-ctx.Done():
				return
			}
		}
	})
	return func() { signal.Stop(hup); cancel(); wg.Wait() }
}

// WritePID records this process's pid in dataDir's PIDFile, with its start
// time (against a pid used again by another process); remove removes the
// file if it is still this process's.
func WritePID(dataDir string) (remove func(), err error) {
	path := filepath.Join(dataDir, PIDFile)
	me := strconv.Itoa(os.Getpid())
	if st, err := procfs.ReadStat(os.Getpid()); err == nil {
		me += " " + strconv.FormatUint(uint64(st.Start), 10) // the start, against pid reuse
	}
	if err := os.WriteFile(path, []byte(me+"\n"), 0o600); err != nil {
		return nil, err
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == me {
			os.Remove(path)
		}
	}, nil
}

// Signal asks the trainbot serve of dataDir to reload: SIGHUP to the pid
// in its PIDFile, when that process is still the one that wrote it. It
// returns the pid signalled; the error says why none was.
func Signal(dataDir string) (pid int, err error) {
	path := filepath.Join(dataDir, PIDFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("no trainbot serve runs on %s (%v)", dataDir, err)
	}
	fields := strings.Fields(string(b))
	if len(fields) > 0 {
		pid, _ = strconv.Atoi(fields[0])
	}
	if pid <= 0 {
		return 0, fmt.Errorf("%s: %q is not a pid", path, strings.TrimSpace(string(b)))
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || (len(fields) > 1 && fields[1] != strconv.FormatUint(uint64(st.Start), 10)) {
		return 0, fmt.Errorf("pid %d in %s is not that trainbot serve any more (it stopped without removing the file)", pid, path)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return 0, fmt.Errorf("signal pid %d: %v", pid, err)
	}
	return pid, nil
}

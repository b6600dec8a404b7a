package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/trainer"
)

// ServePIDFile is where trainbot serve writes its pid in the data
// directory, for trainbot reload.
const ServePIDFile = "serve.pid"

// reloader re-reads the config file on SIGHUP (and trainbot reload) and
// applies what can change while the bot runs: auth lists, jobs, alert
// rules, schedules, [watch] dirs and the time zone. An invalid file changes
// nothing: the error goes to the log and the chats.
type reloader struct {
	path    string   // the config file
	environ []string // for TRAINBOT_* keys
	cur     *config.Config
	extra   []*trainer.Job // jobs that are not the config's (demo's)
	sup     *trainer.Supervisor
	router  *command.Router
	notify  func(func(i18n.Lang) chat.Reply)
	log     *slog.Logger

	mu    sync.Mutex
	sched *schedule.Scheduler
	start func([]scheduleEntry) (*schedule.Scheduler, error)
	// setPush puts new push channels and quiet hours in place of those
	// named (a reload); nil: they change at the next restart only.
	setPush   func(old []string, p pushedChannels)
	pushNames []string // the push channels in force
}

// reload reads the file and applies it; the error says why nothing
// changed.
func (r *reloader) reload(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, bc, err := readConfig(r.path, r.environ, r.cur)
	if err != nil {
		return "", err
	}
	if err := r.sup.Reconfigure(append(append([]*trainer.Job(nil), r.extra...), bc.jobs...), bc.alerts); err != nil {
		return "", err
	}
	r.router.Reload(command.Settings{Access: accessFromConfig(cfg),
		WatchDirs: cfg.Watch.Dirs, Location: cfg.Location()})
	sched, err := r.start(bc.schedules)
	if err != nil {
		return "", err // jobs and auth are new already; the old schedules go on
	}
	old := r.sched
	r.sched = sched
	if old != nil {
		if err := old.Close(ctx); err != nil {
			r.log.Warn("stop the old schedules", "err", err)
		}
	}
	var notes []string
	if !reflect.DeepEqual(cfg.Push, r.cur.Push) || !reflect.DeepEqual(cfg.Quiet, r.cur.Quiet) {
		if r.setPush == nil {
			notes = append(notes, "push channels and quiet hours changed: they take effect when trainbot restarts (runs go on)")
		} else {
			p, err := pushChannels(bc, r.log)
			if err != nil {
				notes = append(notes, fmt.Sprintf("the push channels stay as they were: %v", err))
			} else {
				r.setPush(r.pushNames, p)
				r.pushNames = senderNames(p)
				notes = append(notes, fmt.Sprintf("%d push channel(s)", len(p.senders)))
			}
		}
	}
	if restart := restartSections(r.cur, cfg); len(restart) > 0 {
		notes = append(notes, strings.Join(restart, ", ")+" changes take effect when trainbot restarts")
	}
	if was, _ := languagesFromConfig(r.cur); !reflect.DeepEqual(was, bc.langs) {
		notes = append(notes, "the chats' language changes when trainbot restarts")
	}
	r.cur = cfg
	summary := fmt.Sprintf("%d job(s), %d operator(s), %d viewer(s), %d schedule(s), %d alert rule(s) for every job",
		len(bc.jobs), len(cfg.Auth.Operators), len(cfg.Auth.Viewers), len(bc.schedules), len(bc.alerts))
	if len(notes) > 0 {
		summary += "; " + strings.Join(notes, "; ")
	}
	return summary, nil
}

// senderNames are the names of the push channels' senders.
func senderNames(p pushedChannels) []string {
	var names []string
	for _, s := range p.senders {
		names = append(names, s.Name())
	}
	return names
}

// operators are the operators of the config in force.
func (r *reloader) operators() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Auth.Operators
}

// closeSchedules stops the schedules in force.
func (r *reloader) closeSchedules(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sched == nil {
		return nil
	}
	return r.sched.Close(ctx)
}

// readConfig reads a config file as serve does (defaults, the file, the
// environment), keeping cur's data directory and log level (given by flags,
// or not changeable while running).
func readConfig(path string, environ []string, cur *config.Config) (*config.Config, *botConfig, error) {
	return parseConfig(path, environ, func(cfg *config.Config) {
		cfg.DataDir, cfg.LogLevel = cur.DataDir, cur.LogLevel
	})
}

// reloadOnHangup reloads on SIGHUP (systemctl reload, trainbot reload)
// until the returned func is called. It catches the signal rather than
// setting SIG_IGN, which the runs' processes would inherit.
func (r *reloader) reloadOnHangup() func() { return onHangup(r.onHangup) }

func (r *reloader) onHangup(ctx context.Context) {
	if r.path == "" {
		r.log.Warn("SIGHUP: there is no config file to reload (trainbot runs without --config)")
		return
	}
	summary, err := r.reload(ctx)
	if err != nil {
		r.log.Error("config reload failed; the old config stays", "config", r.path, "err", err)
		r.notify(func(l i18n.Lang) chat.Reply {
			return chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertTrainbot, Text: l.T(i18n.ReloadFailed, err)}
		})
		return
	}
	r.log.Info("config reloaded", "config", r.path, "summary", summary)
	r.notify(func(l i18n.Lang) chat.Reply {
		return chat.Reply{Kind: chat.KindNotice, Text: l.T(i18n.Reloaded, filepath.Base(r.path), summary)}
	})
}

// writeServePID records serve's pid in the data directory; the returned
// func removes it (if it is still this process's).
func writeServePID(dataDir string) (func(), error) {
	path := filepath.Join(dataDir, ServePIDFile)
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

// cmdReload asks the trainbot serving a data directory to re-read its
// config file (SIGHUP to the pid in serve.pid).
func cmdReload(ctx context.Context, args []string, e env) int {
	fs := newFlags("reload", "[--config FILE | --data DIR]", e)
	var cf configFlags
	cf.register(fs, false)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	cfg, _, code := cf.load(e)
	if cfg == nil {
		return code
	}
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, ServePIDFile))
	if err != nil {
		return errorf(e, "no trainbot serve runs on %s (%v)", cfg.DataDir, err)
	}
	fields := strings.Fields(string(b))
	pid := 0
	if len(fields) > 0 {
		pid, _ = strconv.Atoi(fields[0])
	}
	if pid <= 0 {
		return errorf(e, "%s: %q is not a pid", filepath.Join(cfg.DataDir, ServePIDFile), strings.TrimSpace(string(b)))
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || (len(fields) > 1 && fields[1] != strconv.FormatUint(uint64(st.Start), 10)) {
		return errorf(e, "pid %d in %s is not that trainbot serve any more (it stopped without removing the file)", pid, filepath.Join(cfg.DataDir, ServePIDFile))
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return errorf(e, "signal pid %d: %v", pid, err)
	}
	fmt.Fprintf(e.stdout, "sent SIGHUP to trainbot serve (pid %d): it re-reads its config; its log and the chats say whether the new one was taken\n", pid)
	return exitOK
}

// restartSections are the sections that changed from was to now whose
// parts are opened once, at the start: the transports', [http], [gpu].
func restartSections(was, now *config.Config) []string {
	var out []string
	for _, k := range transports {
		if !reflect.DeepEqual(was.Section(k.Name), now.Section(k.Name)) {
			out = append(out, "["+k.Name+"]")
		}
	}
	if was.HTTP != now.HTTP {
		out = append(out, "[http]")
	}
	if was.GPU != now.GPU {
		out = append(out, "[gpu]")
	}
	return out
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"

	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/internal/reload"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/trainer"
)

// reloadable is what a config reload changes while serve runs: the auth
// lists, jobs, alert rules, schedules, [watch] dirs, the time zone and the
// push channels. Its apply is internal/reload's Apply: cmd is the one place
// that knows both the config and the parts it configures. An invalid file
// changes nothing.
type reloadable struct {
	path    string   // the config file
	environ []string // for TRAINBOT_* keys
	cur     *config.Config
	extra   []*trainer.Job // jobs that are not the config's (demo's)
	sup     *trainer.Supervisor
	router  *command.Router
	log     *slog.Logger

	mu    sync.Mutex
	sched *schedule.Scheduler
	start func([]scheduleEntry) (*schedule.Scheduler, error)
	// setPush puts new push channels and quiet hours in place of those
	// named (a reload); nil: they change at the next restart only.
	setPush   func(old []string, p pushedChannels)
	pushNames []string // the push channels in force
}

// apply reads the file and applies it; the error says why nothing
// changed.
func (r *reloadable) apply(ctx context.Context) (string, error) {
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
func (r *reloadable) operators() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Auth.Operators
}

// closeSchedules stops the schedules in force.
func (r *reloadable) closeSchedules(ctx context.Context) error {
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
	pid, err := reload.Signal(cfg.DataDir)
	if err != nil {
		return errorf(e, "%v", err)
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

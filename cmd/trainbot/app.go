package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	recv "github.com/trainbot/trainbot/bot/receivers"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/journal"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/internal/reload"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web"
)

// botOptions say what to wire.
type botOptions struct {
	cfg  *config.Config
	bc   *botConfig // cfg turned into each package's options
	jobs []*trainer.Job
	// console attaches the terminal chat to stdin/stdout.
	console bool
	// exitAtEOF ends the bot when the console input ends, once the active
	// runs have ended (demo and console modes).
	exitAtEOF bool
	// daemon is serve: the messengers of the config (Telegram when
	// [telegram] has a token, WeCom, Feishu, DingTalk), SIGHUP reloads, a
	// pid file; the runs are left running when it stops.
	daemon bool
}

// runBot starts the bot, runs until the input ends or a signal arrives, and
// stops it. Start and stop are in this one place: each part is opened in
// turn and recorded in a lifecycle, which closes exactly what was opened,
// in reverse order, on every path out — so the order of opening below is
// the reverse of the shutdown order:
//
//	log, store                       closed last: everything uses them
//	delivery pipeline                delivers what is due, keeps the rest in the outbox
//	notifier                         posts what is queued (end reports of runs stopped below)
//	supervisor                       serve detaches (runs go on), terminal chats stop the runs
//	progress publisher               stops first of the run watchers
//	schedules, GPU telemetry         no more reports, starts, samples
//	receivers                        no message is taken any more
//	HTTP (/metrics, /healthz, pages) closed first
func runBot(ctx context.Context, e env, o botOptions) int {
	cfg := o.cfg
	painter, err := newPainter(cfg.Plots)
	if err != nil {
		return errorf(e, "%v", err)
	}
	// Private by default: everything trainbot writes is its user's (0600,
	// directories 0700), or its group's with shared_group (the umask is
	// set as the config is loaded); so is what it wrote before.
	skipped, err := private.MakeDataDir(cfg.DataDir, o.bc.sharing)
	if err != nil {
		return errorf(e, "%v", err)
	}
	logger, closeLog, err := openLogger(e, o)
	if err != nil {
		return errorf(e, "log: %v", err)
	}
	if len(skipped) > 0 {
		logger.Warn("could not change the mode of some files in the data directory", "count", len(skipped), "first", skipped[0])
	}
	if o.bc.sharing.Shared() {
		logger.Info(o.bc.sharing.Note(cfg.DataDir))
	}
	for _, x := range private.Exposures(cfg.DataDir, o.bc.configPath, cfg.SecretsInFile(), o.bc.sharing) {
		logger.Warn(x.What+" readable by "+x.Who, "path", x.Path, "mode", fmt.Sprintf("%04o", x.Mode.Perm()), "secrets", strings.Join(x.Keys, ","), "fix", x.Fix)
	}
	life := &lifecycle{log: logger}
	defer life.closeAll()
	life.opened("log", func() error { closeLog(); return nil })
	stopHangup := func() {}
	if o.daemon { // serve: a daemon; SIGHUP reloads once the parts that reload exist
		stopHangup = reload.IgnoreHangup(logger)
		life.opened("stop catching SIGHUP", func() error { stopHangup(); return nil })
	}
	// Each step's deadline starts when it is closed; a second signal of a
	// terminal chat cuts the stop of the runs short (see below).
	shutdown := context.WithoutCancel(ctx)
	within := func(d time.Duration, f func(context.Context) error) func() error {
		return func() error {
			c, cancel := context.WithTimeout(shutdown, d)
			defer cancel()
			return f(c)
		}
	}

	health := &storeHealth{} // the disk full, trainbot.db replaced: told once the notifier exists
	st, err := store.Open(cfg.DataDir, store.Options{Logger: logger, OnHealth: health.on, ThinEarlierRuns: true, MoveAsideDamaged: true,
		KeepSamples: time.Duration(cfg.Store.KeepSamples), KeepAudit: time.Duration(cfg.Store.KeepAudit)})
	if err != nil {
		return errorf(e, "%v", err)
	}
	life.opened("store", st.Close)

	// Transports: what receives messages and what sends replies.
	var receivers []chat.Receiver
	var senders []chat.Sender
	var always []chat.ChatKey
	if o.console {
		con := console.New(e.stdin, e.stdout, filepath.Join(cfg.DataDir, "charts"))
		receivers, senders = append(receivers, con), append(senders, con)
		always = append(always, chat.ChatKey{Transport: console.Name, Chat: console.Chat})
	}
	access := accessFromConfig(cfg.Auth)
	confirmStop := map[string]bool{telegram.Name: true}
	if o.daemon && cfg.Telegram.Token != "" {
		tg, err := telegram.New(telegram.Options{Token: cfg.Telegram.Token, APIEndpoint: cfg.Telegram.APIEndpoint,
			PollTimeout: time.Duration(cfg.Telegram.PollTimeout), State: st, Logger: logger, Lang: o.bc.langs.For(telegram.Name)})
		if err != nil {
			return errorf(e, "%v", err)
		}
		receivers, senders = append(receivers, tg), append(senders, tg)
		if len(access.Operators)+len(access.Viewers) == 0 {
			logger.Warn("[auth] has no operators or viewers: everyone is refused; send the bot a message to learn your user id")
		}
	}
	if o.daemon {
		ms, err := messengers(cfg, st, logger)
		if err != nil {
			return errorf(e, "%v", err)
		}
		for _, m := range ms {
			receivers, senders = append(receivers, m), append(senders, m)
			confirmStop[m.Name()] = true // they all have buttons
			if len(access.Members[m.Name()]) == 0 {
				logger.Warn("[auth] has no "+m.Name()+"_operators or "+m.Name()+"_viewers: everyone is refused there; send the bot a message to learn your user id", "transport", m.Name())
			}
		}
	}
	if len(receivers) == 0 && len(o.bc.channels) == 0 {
		return errorf(e, "nothing to serve: set [telegram] token (or TRAINBOT_TELEGRAM_TOKEN), [wecom], [feishu] or [dingtalk], [console] enabled = true, or a [[push]] channel")
	}
	pushed, err := pushChannels(o.bc, logger)
	if err != nil {
		return errorf(e, "%v", err)
	}
	senders = append(senders, pushed.senders...)

	pipeline := deliver.New(deliver.Options{Senders: senders, Store: st, Logger: logger, Quiet: pushed.quiet, Languages: o.bc.langs})
	pipeline.Start()
	life.opened("deliver what is due (the rest waits in the outbox)", within(15*time.Second, pipeline.Close))

	// Page links: chat messages about a run get a [网页 Open] button when
	// [http] public_url is set.
	var pageURL func(int64) string
	if cfg.HTTP.PublicURL != "" {
		links, err := pageLinks(cfg.HTTP, cfg.DataDir, false)
		if err != nil {
			return errorf(e, "%v", err)
		}
		pageURL = links.Run
	}
	charts := &render.Charts{Data: st, Painter: painter, Smoothing: chartSmoothing(cfg.Plots)}
	alerts := web.NewAlerts(chat.AlertKinds)
	notifier := notify.New(notify.Options{Post: pipeline.Post, Always: always, Subscriptions: st, Channels: pushed.channels,
		Charts: chartsHook(charts, logger), Extremes: st.MetricExtremes, OnAlert: alerts.Inc, PageURL: pageURL, Languages: o.bc.langs, Logger: logger})
	notifier.Start()
	life.opened("post the queued notices", within(15*time.Second, notifier.Close))
	health.attach(notifier.PushIn)

	sup, err := trainer.New(ctx, trainer.Options{Jobs: o.jobs, Recorder: st, DataDir: cfg.DataDir, Logger: logger, SecretEnv: cfg.SecretEnv(), Queue: st, Alerts: o.bc.alerts,
		HostAvailable: hostAvailable})
	if err != nil {
		return errorf(e, "%v", err)
	}
	// The runs belong to their supervisors: serve leaves them running and
	// the next trainbot re-attaches; so does every path out on an error. A
	// terminal chat that got to its end stops what still runs, since a
	// person ends the session there; a second signal kills instead of
	// waiting.
	stopRuns := false
	life.opened("leave or stop the runs", func() error {
		if !stopRuns {
			if n := len(sup.Active()); n > 0 {
				logger.Info("leaving the active runs running; the next trainbot re-attaches", "runs", n)
			}
			return sup.Detach(shutdown)
		}
		c, cancel := context.WithCancel(shutdown)
		defer cancel()
		if len(sup.Active()) > 0 && ctx.Err() != nil {
			fmt.Fprintln(e.stderr, "trainbot: stopping the active run (press Ctrl-C again to kill it)")
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			go func() {
				select {
				case <-sig:
					cancel()
				case <-c.Done():
				}
			}()
		}
		return sup.Close(c)
	})
	sup.Subscribe(notifier.OnEvent)

	inPlace := map[string]bool{}
	for _, s := range senders {
		if ip, ok := s.(chat.InPlaceProgress); ok && ip.ProgressInPlace() {
			inPlace[s.Name()] = true
		}
	}
	if interval := cfg.ProgressInterval(); interval > 0 {
		progress := notify.NewProgressPublisher(notify.ProgressOptions{Trainer: sup, Post: pipeline.Post, Subscriptions: st,
			InPlace: func(t string) bool { return inPlace[t] }, Interval: interval, Memory: lastMemory(st, logger), PageURL: pageURL, Languages: o.bc.langs, Logger: logger})
		sup.Subscribe(progress.OnEvent)
		progress.Start()
		life.opened("post the final progress", within(15*time.Second, progress.Close))
	}
	// Runs an earlier trainbot left running are re-attached (and
	// announced) once the notifier listens.
	if err := sup.Resume(ctx); err != nil {
		return errorf(e, "%v", err)
	}

	router := &command.Router{Trainer: sup, History: st, Logger: logger, Location: cfg.Location(), WatchDirs: cfg.Watch.Dirs, Smoothing: chartSmoothing(cfg.Plots), Plots: painter,
		Access: access, ConfirmStop: confirmStop, HostAvailable: hostAvailable, PageURL: pageURL, Languages: o.bc.langs}
	startSched := func(entries []scheduleEntry) (*schedule.Scheduler, error) {
		return startSchedules(entries, sup, st, notifier, chartsHook(charts, logger), logger)
	}
	sched, err := startSched(o.bc.schedules)
	if err != nil {
		return errorf(e, "%v", err)
	}
	reloadLog := logger.With("component", "reload")
	rl := &reloadable{path: o.bc.configPath, environ: e.environ, cur: cfg, extra: o.jobs[:len(o.jobs)-len(o.bc.jobs)], sup: sup, router: router,
		log: reloadLog, sched: sched, start: startSched, pushNames: senderNames(pushed),
		setPush: func(old []string, p pushedChannels) {
			pipeline.Reconfigure(old, p.senders, p.quiet)
			notifier.SetChannels(p.channels)
		}}
	notifyReload := func(words func(i18n.Lang) chat.Reply) {
		// To the chats that get trainbot's notices, and to each operator's
		// own Telegram chat; the key makes it once per chat.
		key := fmt.Sprintf("reload:%d", time.Now().UnixNano())
		keyed := func(l i18n.Lang) chat.Reply {
			r := words(l)
			r.Key = key
			return r
		}
		notifier.PushIn(keyed)
		if o.daemon && cfg.Telegram.Token != "" {
			r := keyed(o.bc.langs.For(telegram.Name))
			for _, op := range rl.operators() {
				pipeline.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: op}, Reply: r, Durable: true})
			}
		}
	}
	life.opened("stop the schedules", within(10*time.Second, rl.closeSchedules))
	if o.daemon { // serve: SIGHUP and trainbot reload re-read the config
		reloader := reload.New(reload.Options{Path: o.bc.configPath, Apply: rl.apply, Notify: notifyReload, Logger: reloadLog})
		stopReload := reloader.OnHangup() // before the ignoring stops: no SIGHUP falls between
		stopHangup()
		life.opened("stop reloading on SIGHUP", func() error { stopReload(); return nil })
		removePID, err := reload.WritePID(cfg.DataDir)
		if err != nil {
			logger.Warn("write serve.pid: trainbot reload will not find this trainbot", "err", err)
		} else {
			life.opened("remove serve.pid", func() error { removePID(); return nil })
		}
	}

	// GPU telemetry: NVML when there is a driver, each run's host memory
	// from /proc always; samples stored, run peaks raised, alerts pushed,
	// 显卡 answered.
	telemetry, noGPU := gpu.Open()
	if noGPU != nil {
		logger.Info("no GPU telemetry; sampling host memory only", "reason", gpu.Reason(noGPU))
	}
	life.opened("close the GPU telemetry", telemetry.Close)
	monitor := gpu.NewMonitor(gpu.MonitorOptions{Sampler: telemetry, Interval: time.Duration(cfg.GPU.Interval),
		Runs: sup, Recorder: st, Alert: notifier.GPUAlert,
		Thresholds: gpu.Thresholds{MemoryPercent: cfg.GPU.MemoryAlert, TempC: cfg.GPU.TempAlert}, Logger: logger.With("component", "gpu")})
	monitor.Start()
	life.opened("stop GPU sampling", func() error { monitor.Close(); return nil })
	router.GPUs = monitor

	// Receivers: a failing one is reported and started again; none ends
	// the bot. Their messages are answered by the router, and the answers
	// delivered like everything else.
	runCtx, stopReceivers := context.WithCancel(ctx)
	rcv := recv.Run(runCtx, receivers, pipeline.Answer(router), recv.Options{Logger: logger, Report: notifier.PushInExcept,
		Channels: len(pushed.channels), ExitAtEOF: o.exitAtEOF})
	life.opened("stop taking messages", within(15*time.Second, func(c context.Context) error {
		stopReceivers()
		// Telegram lets the messages it is answering finish first.
		if n := rcv.Wait(c); n > 0 {
			return fmt.Errorf("%d transport(s) still running", n)
		}
		return nil
	}))

	// HTTP ([http] listen): /metrics and /healthz, opened last so that it
	// is closed first; it only reads what the parts above expose.
	if cfg.HTTP.Listen != "" {
		metrics := web.NewMetrics(web.Sources{Active: sup.Active, GPU: monitor.Last, EndedRuns: st.EndedRuns,
			OutboxPending: st.OutboxPending, Alerts: alerts, Logger: logger})
		checks := []web.Check{{Name: "store", Up: func(c context.Context) error { return health.up(c, st) }}}
		if len(receivers) > 0 {
			checks = append(checks, web.Check{Name: "transports", Up: rcv.Up})
		}
		signer, err := web.LoadKey(cfg.DataDir)
		if err != nil {
			return errorf(e, "%v", err)
		}
		pages := &web.Pages{Store: st, Status: sup.Status, Tail: runTail(sup), Signer: signer}
		srv := web.New(web.Options{Listen: cfg.HTTP.Listen, MaxConnections: cfg.HTTP.MaxConnections, Metrics: metrics, Checks: checks, Pages: pages,
			Logger: logger.With("component", "http")})
		if err := srv.Start(); err != nil {
			return errorf(e, "[http] listen %q: %v", cfg.HTTP.Listen, err)
		}
		life.opened("stop the HTTP server", within(5*time.Second, srv.Close))
	}

	for {
		select {
		case <-ctx.Done():
			stopRuns = o.exitAtEOF
			return 130
		case name := <-rcv.Ended():
			if name != console.Name || !o.exitAtEOF {
				continue
			}
			// End of input: let the active run finish, then leave.
			stopRuns = true
			if len(sup.Active()) > 0 {
				logger.Info("input ended; waiting for the active run to end")
			}
			if err := sup.Wait(ctx); err != nil {
				return 130
			}
			return exitOK
		}
	}
}

// lastMemory reads a run's newest memory sample for live progress.
func lastMemory(st *store.Store, logger *slog.Logger) func(context.Context, int64) (history.RunMemory, bool) {
	return func(ctx context.Context, runID int64) (history.RunMemory, bool) {
		m, ok, err := st.LastRunMemory(ctx, runID)
		if err != nil {
			logger.Debug("read run memory", "run", runID, "err", err)
		}
		return m, ok
	}
}

// openLogger logs to DATA/trainbot.log in terminal-chat modes (the
// terminal is the chat; only warnings go to stderr), and to stderr
// otherwise: in the journal's format when stderr is the journal (serve
// under systemd).
func openLogger(e env, o botOptions) (*slog.Logger, func(), error) {
	level, err := config.ParseLevel(o.cfg.LogLevel)
	if err != nil {
		return nil, nil, err
	}
	if !o.console {
		if journal.Under(e.environ, e.stderr) {
			return slog.New(journal.Handler(e.stderr, level)), func() {}, nil
		}
		return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})), func() {}, nil
	}
	f, err := os.OpenFile(filepath.Join(o.cfg.DataDir, "trainbot.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	h := slog.NewMultiHandler(
		slog.NewTextHandler(f, &slog.HandlerOptions{Level: level}),
		slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: max(level, slog.LevelWarn)}),
	)
	return slog.New(h), func() { f.Close() }, nil
}

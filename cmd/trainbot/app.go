package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/gpufree"
	"github.com/trainbot/trainbot/bot/notify"
	recv "github.com/trainbot/trainbot/bot/receivers"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/internal/journal"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/internal/reload"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/gpuclaim"
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
	// mcp is `trainbot mcp`: no chat is read; the MCP server (package
	// mcpserver) answers on stdin/stdout until its client leaves, and the
	// runs are left running for the next trainbot, as serve leaves them.
	mcp bool
	// mcpHTTP is mcp's --http: the address of the streamable HTTP
	// transport ("" for stdin/stdout).
	mcpHTTP string
	// cli are the flags a command the bot suggests (trainbot plot 12)
	// needs to read this bot's config and history (cliFlags).
	cli string
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
	b := &bot{ctx: ctx, e: e, o: o, cfg: o.cfg}
	defer b.life.closeAll()
	for _, open := range []func() int{
		b.openLog,        // the data directory, made private, and the log
		b.openStore,      // the store
		b.openTransports, // receivers, senders and push channels: made, not running yet
		b.openDelivery,   // the delivery pipeline
		b.openNotifier,   // the notifier
		b.openGPUs,       // NVML, the host's GPU locks, the allocator runs' GPUs are claimed with
		b.openHosts,      // one SSH connection per [[hosts]] entry, dialled in the background
		b.openSupervisor, // the supervisor and the progress publisher; left runs re-attached
		b.openRouter,     // the router (nothing to close)
		b.openSchedules,  // the schedules
		b.openReload,     // serve: reloading on SIGHUP, serve.pid
		b.openGPU,        // GPU sampling, 通知空闲
		b.openHostGPUs,   // the [[hosts]]' GPUs, sampled over their connections
		b.openReceivers,  // the receivers: messages are taken from here on
		b.openHTTP,       // HTTP (/metrics, /healthz, pages)
	} {
		if code := open(); code != exitOK {
			return code
		}
	}
	if o.mcp {
		return b.serveMCP()
	}
	return b.wait()
}

// bot is what runBot has opened so far. Each open method opens one part
// (or a few that go together), records its close in life and returns an
// exit status: exitOK, or the failure already reported.
type bot struct {
	ctx  context.Context
	e    env
	o    botOptions
	cfg  *config.Config
	life lifecycle
	log  *slog.Logger
	// shutdown is where each step's close deadline starts: ctx, but not
	// cancelled with it.
	shutdown context.Context
	// stopHangup stops ignoring SIGHUP (serve, while it starts).
	stopHangup func()

	painter   *plots.Painter
	health    *storeHealth
	st        *store.Store
	receivers []chat.Receiver
	senders   []chat.Sender
	always    []chat.ChatKey // chats that get every notice (the console)
	access    command.Access
	pushed    pushedChannels
	pipeline  *deliver.Pipeline
	pageURL   func(int64) string
	charts    *render.Charts
	alerts    *web.Alerts
	notifier  *notify.Notifier
	sup       *trainer.Supervisor
	// stopRuns makes the close stop the active runs instead of leaving
	// them running (a terminal chat that got to its end).
	stopRuns   bool
	router     *command.Router
	reloadable *reloadable
	telemetry  gpu.Backend
	// hosts are the [[hosts]] connections by name (empty without any).
	hosts map[string]*hosts.Host
	// links are the hosts runs start on (trainer/agent over hosts).
	links    map[string]trainer.RemoteHost
	noGPU    error // why there is no NVML, nil with it
	av       *gpu.Availability
	gpus     *gpuclaim.Allocator // nil without NVML or a safe lock directory
	noLocks  error               // why the lock directory cannot be used, nil when it can
	monitor  *gpu.Monitor
	sampling atomic.Pointer[gpu.Monitor] // the monitor, for what runs beside openGPU (claims at Resume)
	rcv      *recv.Set
}

// within makes a close with a deadline d, which starts when it is closed.
func (b *bot) within(d time.Duration, f func(context.Context) error) func() error {
	return func() error {
		c, cancel := context.WithTimeout(b.shutdown, d)
		defer cancel()
		return f(c)
	}
}

// openLog makes the data directory, opens the log and tells in it what of
// the data directory and the config others may read.
func (b *bot) openLog() int {
	e, o, cfg := b.e, b.o, b.cfg
	painter, err := newPainter(cfg.Plots)
	if err != nil {
		return errorf(e, "%v", err)
	}
	b.painter = painter
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
	b.log = logger
	if len(skipped) > 0 {
		logger.Warn("could not change the mode of some files in the data directory", "count", len(skipped), "first", skipped[0])
	}
	if o.bc.sharing.Shared() {
		logger.Info(o.bc.sharing.Note(cfg.DataDir))
	}
	for _, x := range private.Exposures(cfg.DataDir, o.bc.configPath, cfg.SecretsInFile(), o.bc.sharing) {
		logger.Warn(x.What+" readable by "+x.Who, "path", x.Path, "mode", fmt.Sprintf("%04o", x.Mode.Perm()), "secrets", strings.Join(x.Keys, ","), "fix", x.Fix)
	}
	b.life.log = logger
	b.life.opened("log", func() error { closeLog(); return nil })
	b.stopHangup = func() {}
	if o.daemon { // serve: a daemon; SIGHUP reloads once the parts that reload exist
		b.stopHangup = reload.IgnoreHangup(logger)
		b.life.opened("stop catching SIGHUP", func() error { b.stopHangup(); return nil })
	}
	// Each step's deadline starts when it is closed; a second signal of a
	// terminal chat cuts the stop of the runs short (see openSupervisor).
	b.shutdown = context.WithoutCancel(b.ctx)
	return exitOK
}

func (b *bot) openStore() int {
	cfg := b.cfg
	b.health = &storeHealth{} // the disk full, trainbot.db replaced: told once the notifier exists
	st, err := store.Open(cfg.DataDir, store.Options{Logger: b.log, OnHealth: b.health.on, ThinEarlierRuns: true, MoveAsideDamaged: true,
		KeepSamples: time.Duration(cfg.Store.KeepSamples), KeepAudit: time.Duration(cfg.Store.KeepAudit)})
	if err != nil {
		return errorf(b.e, "%v", err)
	}
	b.st = st
	b.life.opened("store", st.Close)
	return exitOK
}

// openTransports makes the transports and the push channels; nothing of
// theirs runs yet (the pipeline sends, the receivers receive).
func (b *bot) openTransports() int {
	e, o, cfg, st, logger := b.e, b.o, b.cfg, b.st, b.log
	// Transports: what receives messages and what sends replies.
	var receivers []chat.Receiver
	var senders []chat.Sender
	var always []chat.ChatKey
	if o.console {
		con := console.New(e.stdin, e.stdout, filepath.Join(cfg.DataDir, "charts"))
		receivers, senders = append(receivers, con), append(senders, con)
		always = append(always, chat.ChatKey{Transport: console.Name, Chat: console.Chat})
	}
	access := accessFromConfig(cfg)
	if o.daemon {
		ts, err := openTransports(cfg, access, st, o.bc.langs, logger)
		if err != nil {
			return errorf(e, "%v", err)
		}
		for _, t := range ts {
			receivers, senders = append(receivers, t), append(senders, t)
		}
	}
	if len(receivers) == 0 && len(o.bc.channels) == 0 && !o.mcp {
		return errorf(e, "%s", nothingToServe())
	}
	pushed, err := pushChannels(o.bc, logger)
	if err != nil {
		return errorf(e, "%v", err)
	}
	senders = append(senders, pushed.senders...)
	b.receivers, b.senders, b.always, b.access, b.pushed = receivers, senders, always, access, pushed
	return exitOK
}

func (b *bot) openDelivery() int {
	b.pipeline = deliver.New(deliver.Options{Senders: b.senders, Store: b.st, Logger: b.log, Quiet: b.pushed.quiet, Languages: b.o.bc.langs})
	b.pipeline.Start()
	b.life.opened("deliver what is due (the rest waits in the outbox)", b.within(15*time.Second, b.pipeline.Close))
	return exitOK
}

func (b *bot) openNotifier() int {
	cfg, st, logger, pushed := b.cfg, b.st, b.log, b.pushed
	// Page links: chat messages about a run get a [网页 Open] button when
	// [http] public_url is set.
	if cfg.HTTP.PublicURL != "" {
		links, err := pageLinks(cfg.HTTP, cfg.DataDir, false)
		if err != nil {
			return errorf(b.e, "%v", err)
		}
		b.pageURL = links.Run
	}
	b.charts = &render.Charts{Data: st, Painter: b.painter, Smoothing: chartSmoothing(cfg.Plots), CLI: b.o.cli}
	b.alerts = web.NewAlerts(chat.AlertKinds)
	b.notifier = notify.New(notify.Options{Post: b.pipeline.Post, Always: b.always, Subscriptions: st, Channels: pushed.channels,
		Charts: chartsHook(b.charts, logger), Extremes: st.MetricExtremes, OnAlert: b.alerts.Inc, PageURL: b.pageURL, Languages: b.o.bc.langs, Logger: logger})
	b.notifier.Start()
	b.life.opened("post the queued notices", b.within(15*time.Second, b.notifier.Close))
	b.health.attach(b.notifier.PushIn)
	return exitOK
}

// openSupervisor starts supervising runs, and the live progress of each;
// then re-attaches to the runs an earlier trainbot left running.
func (b *bot) openSupervisor() int {
	ctx, e, o, cfg, st, logger := b.ctx, b.e, b.o, b.cfg, b.st, b.log
	sup, err := trainer.New(ctx, trainer.Options{Jobs: o.jobs, Recorder: st, DataDir: cfg.DataDir, Logger: logger, SecretEnv: cfg.SecretEnv(), Queue: st, Alerts: o.bc.alerts,
		HostAvailable: hostAvailable, GPUs: b.gpuAllocator(), GPURetry: time.Duration(cfg.GPU.Interval),
		Hosts: b.links})
	if err != nil {
		return errorf(e, "%v", err)
	}
	b.sup = sup
	// The runs belong to their supervisors: serve leaves them running and
	// the next trainbot re-attaches; so does every path out on an error. A
	// terminal chat that got to its end stops what still runs, since a
	// person ends the session there; a second signal kills instead of
	// waiting.
	b.life.opened("leave or stop the runs", func() error {
		if !b.stopRuns {
			if n := len(sup.Active()); n > 0 {
				logger.Info("leaving the active runs running; the next trainbot re-attaches", "runs", n)
			}
			return sup.Detach(b.shutdown)
		}
		c, cancel := context.WithCancel(b.shutdown)
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
	sup.Subscribe(b.notifier.OnEvent)

	inPlace := map[string]bool{}
	for _, s := range b.senders {
		if ip, ok := s.(chat.InPlaceProgress); ok && ip.ProgressInPlace() {
			inPlace[s.Name()] = true
		}
	}
	if interval := cfg.ProgressInterval(); interval > 0 {
		progress := notify.NewProgressPublisher(notify.ProgressOptions{Trainer: sup, Post: b.pipeline.Post, Subscriptions: st,
			InPlace: func(t string) bool { return inPlace[t] }, Interval: interval, Memory: lastMemory(st, logger), PageURL: b.pageURL, Languages: o.bc.langs, Logger: logger})
		sup.Subscribe(progress.OnEvent)
		progress.Start()
		b.life.opened("post the final progress", b.within(15*time.Second, progress.Close))
	}
	// Runs an earlier trainbot left running are re-attached (and
	// announced) once the notifier listens.
	if err := sup.Resume(ctx); err != nil {
		return errorf(e, "%v", err)
	}
	return exitOK
}

// openRouter makes the router; the receivers hand it their messages once
// they run.
func (b *bot) openRouter() int {
	cfg := b.cfg
	// 存档's second answer (the new file) goes out through the pipeline;
	// closed before it, and before the runs are left.
	later := command.NewLater(func(m chat.Message, r chat.Reply) {
		b.pipeline.Post(deliver.Envelope{To: m.ChatKey(), Reply: r, Durable: true})
	}, b.log.With("component", "later"))
	b.life.opened("stop waiting for checkpoints (存档)", later.Close)
	b.router = &command.Router{Trainer: b.sup, History: b.st, Logger: b.log, Location: cfg.Location(), WatchDirs: cfg.Watch.Dirs, Smoothing: chartSmoothing(cfg.Plots), CLI: b.o.cli, Plots: b.painter,
		Access: b.access, ConfirmStop: confirmStops(), HostAvailable: hostAvailable, PageURL: b.pageURL, Languages: b.o.bc.langs, Later: later}
	return exitOK
}

// openSchedules starts the schedules, held with what else a reload
// changes (reloadable).
func (b *bot) openSchedules() int {
	if b.o.mcp { // serve's: schedules, chats and pages are not doubled by an MCP server
		return exitOK
	}
	e, o, cfg, st, logger, sup, notifier, pipeline := b.e, b.o, b.cfg, b.st, b.log, b.sup, b.notifier, b.pipeline
	startSched := func(entries []scheduleEntry) (*schedule.Scheduler, error) {
		return startSchedules(entries, sup, st, notifier, chartsHook(b.charts, logger), logger)
	}
	sched, err := startSched(o.bc.schedules)
	if err != nil {
		return errorf(e, "%v", err)
	}
	b.reloadable = &reloadable{path: o.bc.configPath, environ: e.environ, cur: cfg, extra: o.jobs[:len(o.jobs)-len(o.bc.jobs)], sup: sup, router: b.router,
		log: logger.With("component", "reload"), sched: sched, start: startSched, pushNames: senderNames(b.pushed),
		setPush: func(old []string, p pushedChannels) {
			pipeline.Reconfigure(old, p.senders, p.quiet)
			notifier.SetChannels(p.channels)
		}}
	b.life.opened("stop the schedules", b.within(10*time.Second, b.reloadable.closeSchedules))
	return exitOK
}

// openReload makes serve re-read the config on SIGHUP (systemctl reload,
// trainbot reload, which finds it by serve.pid); the terminal chats do not
// reload.
func (b *bot) openReload() int {
	o, cfg, rl, notifier, pipeline := b.o, b.cfg, b.reloadable, b.notifier, b.pipeline
	if !o.daemon {
		return exitOK
	}
	notify := func(words func(i18n.Lang) chat.Reply) {
		// To the chats that get trainbot's notices, and to each operator's
		// own Telegram chat; the key makes it once per chat.
		key := fmt.Sprintf("reload:%d", time.Now().UnixNano())
		keyed := func(l i18n.Lang) chat.Reply {
			r := words(l)
			r.Key = key
			return r
		}
		notifier.PushIn(keyed)
		if served(cfg, telegram.Name) {
			r := keyed(o.bc.langs.For(telegram.Name))
			for _, op := range rl.operators() {
				pipeline.Post(deliver.Envelope{To: chat.ChatKey{Transport: telegram.Name, Chat: op}, Reply: r, Durable: true})
			}
		}
	}
	reloader := reload.New(reload.Options{Path: o.bc.configPath, Apply: rl.apply, Notify: notify, Logger: rl.log})
	stopReload := reloader.OnHangup() // before the ignoring stops: no SIGHUP falls between
	b.stopHangup()
	b.life.opened("stop reloading on SIGHUP", func() error { stopReload(); return nil })
	removePID, err := reload.WritePID(cfg.DataDir)
	if err != nil {
		b.log.Warn("write serve.pid: trainbot reload will not find this trainbot", "err", err)
	} else {
		b.life.opened("remove serve.pid", func() error { removePID(); return nil })
	}
	return exitOK
}

// openGPUs opens the GPU telemetry (NVML when there is a driver) and,
// with it, what shares the GPUs: the host-wide lock directory ([gpu]
// lock_dir), the Availability the monitor feeds ([gpu] busy_memory,
// busy_util) and the allocator the supervisor claims a run's GPUs with
// ([gpu] free_for, visible). Without NVML, or with a lock directory that
// is not safe, a start that asks for GPUs is refused with the reason.
func (b *bot) openGPUs() int {
	cfg, logger := b.cfg, b.log
	b.telemetry, b.noGPU = openGPU()
	if b.noGPU != nil {
		logger.Info("no GPU telemetry; sampling host memory only", "reason", gpu.Reason(b.noGPU))
	}
	b.life.opened("close the GPU telemetry", b.telemetry.Close)
	b.av = gpu.NewAvailability(uint64(cfg.GPU.BusyMemory), cfg.GPU.BusyUtil)
	if b.noGPU != nil {
		return exitOK
	}
	locks, err := gpulock.Open(cfg.GPU.LockDir)
	if err != nil {
		logger.Warn("runs that ask for GPUs are refused: the GPU lock directory is not safe", "err", err)
		b.noLocks = err
		return exitOK
	}
	b.gpus = gpuclaim.New(gpuclaim.Options{Last: func() gpu.Snapshot {
		m := b.sampling.Load() // the queue may claim at Resume, before sampling starts
		if m == nil {
			return gpu.Snapshot{} // nothing is free yet
		}
		return m.Last()
	}, Active: func(run int64) bool { return b.sup.IsActive(run) }, Availability: b.av, Locks: locks, FreeFor: time.Duration(cfg.GPU.FreeFor), Visible: cfg.GPU.Visible, DataDir: cfg.DataDir,
		Logger: logger.With("component", "gpu")})
	return exitOK
}

// openGPU opens the GPU telemetry: gpu.Open (a test's mock host instead).
var openGPU = gpu.Open

// gpuAllocator is the allocator for trainer.Options: nil (not a nil
// pointer in the interface) without one.
func (b *bot) gpuAllocator() trainer.GPUAllocator {
	switch {
	case b.noLocks != nil:
		return gpuclaim.Refusing(b.noLocks)
	case b.gpus == nil:
		return nil
	}
	return b.gpus
}

// openGPU starts sampling: each run's host memory from /proc always, the
// devices with NVML; samples stored, run peaks raised, alerts pushed,
// 显卡 answered; and 通知空闲, which watches the samples for free GPUs.
func (b *bot) openGPU() int {
	cfg, logger := b.cfg, b.log
	b.monitor = gpu.NewMonitor(gpu.MonitorOptions{Sampler: b.telemetry, Interval: time.Duration(cfg.GPU.Interval),
		Runs: b.sup, Recorder: b.st, Alert: b.notifier.GPUAlert, Thresholds: gpuThresholds(cfg.GPU), Availability: b.av,
		Logger: logger.With("component", "gpu")})
	b.monitor.Start()
	b.sampling.Store(b.monitor)
	b.life.opened("stop GPU sampling", func() error { b.monitor.Close(); return nil })
	b.router.GPUs = b.monitor
	if b.gpus != nil {
		w := gpufree.New(gpufree.Options{Met: b.gpus.Met, State: b.st, Languages: b.o.bc.langs, Logger: logger.With("component", "gpufree"),
			Post: func(to chat.ChatKey, r chat.Reply) {
				b.pipeline.Post(deliver.Envelope{To: to, Reply: r, Durable: true})
			}})
		w.Start()
		b.life.opened("stop watching for free GPUs", w.Close)
		b.router.GPUFree = w
	}
	return exitOK
}

// openReceivers starts taking messages. A failing receiver is reported and
// started again; none ends the bot. Their messages are answered by the
// router, and the answers delivered like everything else.
func (b *bot) openReceivers() int {
	if b.o.mcp { // serve's: schedules, chats and pages are not doubled by an MCP server
		return exitOK
	}
	runCtx, stopReceivers := context.WithCancel(b.ctx)
	rcv := recv.Run(runCtx, b.receivers, b.pipeline.Answer(b.router), recv.Options{Logger: b.log, Report: b.notifier.PushInExcept,
		Channels: len(b.pushed.channels), ExitAtEOF: b.o.exitAtEOF})
	b.rcv = rcv
	b.life.opened("stop taking messages", b.within(15*time.Second, func(c context.Context) error {
		stopReceivers()
		// Telegram lets the messages it is answering finish first.
		if n := rcv.Wait(c); n > 0 {
			return fmt.Errorf("%d transport(s) still running", n)
		}
		return nil
	}))
	return exitOK
}

// openHTTP serves [http] listen: /metrics, /healthz and the runs' pages,
// opened last so that it is closed first; it only reads what the parts
// above expose.
func (b *bot) openHTTP() int {
	if b.o.mcp { // serve's: schedules, chats and pages are not doubled by an MCP server
		return exitOK
	}
	cfg, st, sup, logger := b.cfg, b.st, b.sup, b.log
	if cfg.HTTP.Listen == "" {
		return exitOK
	}
	metrics := web.NewMetrics(web.Sources{Active: sup.Active, GPU: b.monitor.Last, EndedRuns: st.EndedRuns,
		OutboxPending: st.OutboxPending, Alerts: b.alerts, Logger: logger})
	checks := []web.Check{{Name: "store", Up: func(c context.Context) error { return b.health.up(c, st) }}}
	if len(b.receivers) > 0 {
		checks = append(checks, web.Check{Name: "transports", Up: b.rcv.Up})
	}
	signer, err := web.LoadKey(cfg.DataDir)
	if err != nil {
		return errorf(b.e, "%v", err)
	}
	pages := &web.Pages{Store: st, Status: sup.Status, Tail: runTail(sup), Signer: signer, CLI: b.o.cli}
	srv := web.New(web.Options{Listen: cfg.HTTP.Listen, MaxConnections: cfg.HTTP.MaxConnections, Metrics: metrics, Checks: checks, Pages: pages,
		Logger: logger.With("component", "http")})
	if err := srv.Start(); err != nil {
		return errorf(b.e, "[http] listen %q: %v", cfg.HTTP.Listen, err)
	}
	b.life.opened("stop the HTTP server", b.within(5*time.Second, srv.Close))
	return exitOK
}

// wait runs until a signal (130) or, in a terminal chat, the end of the
// input once the active runs have ended.
func (b *bot) wait() int {
	for {
		select {
		case <-b.ctx.Done():
			b.stopRuns = b.o.exitAtEOF
			return 130
		case name := <-b.rcv.Ended():
			if name != console.Name || !b.o.exitAtEOF {
				continue
			}
			// End of input: let the active run finish, then leave.
			b.stopRuns = true
			if len(b.sup.Active()) > 0 {
				b.log.Info("input ended; waiting for the active run to end")
			}
			if err := b.sup.Wait(b.ctx); err != nil {
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
	if !o.console && !o.mcp { // the terminal, or stdout, is taken
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

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot"
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// botOptions say what to wire.
type botOptions struct {
	cfg  *config.Config
	jobs []*trainer.Job
	// console attaches the terminal chat to stdin/stdout.
	console bool
	// exitAtEOF ends the bot when the console input ends, once the active
	// runs have ended (demo and console modes).
	exitAtEOF bool
	// telegram adds the Telegram transport when [telegram] has a token (serve).
	telegram bool
}

// runBot wires store, supervisor, router, notifier and transports, runs
// until the input ends or a signal arrives, and shuts down in order:
// transports stop taking messages; the supervisor stops the active runs and
// waits for them; GPU sampling stops; the progress publisher sends the
// final progress edits;
// the notifier delivers what is queued (alerts into the outbox); the outbox
// delivers what is due (what it cannot stays stored for the next start);
// the store is closed. Transports' Send keeps working after their Run has
// returned, for the last three steps.
func runBot(ctx context.Context, e env, o botOptions) int {
	cfg := o.cfg
	painter, err := newPainter(cfg.Plots)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return errorf(e, "data directory: %v", err)
	}
	logger, closeLog, err := openLogger(e, o)
	if err != nil {
		return errorf(e, "log: %v", err)
	}
	defer closeLog()

	health := &storeHealth{} // the disk full, trainbot.db replaced: told once notifier exists
	st, err := store.Open(cfg.DataDir, store.Options{Logger: logger, OnHealth: health.on})
	if err != nil {
		return errorf(e, "%v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("close store", "err", err)
		}
	}()
	sup, err := trainer.New(ctx, trainer.Options{Jobs: o.jobs, Recorder: st, DataDir: cfg.DataDir, Logger: logger})
	if err != nil {
		return errorf(e, "%v", err)
	}
	// On every path out, nothing observes runs after the store closes
	// (after the shutdown below, this finds nothing left to do).
	defer sup.Detach(context.WithoutCancel(ctx))

	var transports []bot.Transport
	var always []bot.ChatKey
	var con *console.Console
	if o.console {
		con = console.New(e.stdin, e.stdout, filepath.Join(cfg.DataDir, "charts"))
		transports = append(transports, con)
		always = append(always, bot.ChatKey{Transport: console.Name, Chat: console.Chat})
	}
	access := bot.Access{Operators: cfg.Auth.Operators, Viewers: cfg.Auth.Viewers, Chats: cfg.Auth.Chats}
	if o.telegram && cfg.Telegram.Token != "" {
		tg, err := telegram.New(telegram.Options{Token: cfg.Telegram.Token, APIEndpoint: cfg.Telegram.APIEndpoint,
			PollTimeout: time.Duration(cfg.Telegram.PollTimeout), State: st, Logger: logger})
		if err != nil {
			return errorf(e, "%v", err)
		}
		transports = append(transports, tg)
		if len(access.Operators)+len(access.Viewers) == 0 {
			logger.Warn("[auth] has no operators or viewers: everyone is refused; send the bot a message to learn your user id")
		}
	}
	alerts, err := alertsOf(cfg)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if len(transports) == 0 && len(alerts.push) == 0 {
		return errorf(e, "nothing to serve: set [telegram] token (or TRAINBOT_TELEGRAM_TOKEN), [console] enabled = true, or a [[push]] channel")
	}
	channels, err := pushChannels(alerts.push, logger)
	if err != nil {
		return errorf(e, "%v", err)
	}
	// Alerts go through the outbox, to chats and push channels alike: stored
	// before they are sent, retried until delivered, across restarts.
	deliverable := slices.Clone(transports)
	for _, c := range channels {
		deliverable = append(deliverable, c.Transport)
	}
	outbox := bot.NewOutbox(bot.OutboxOptions{Store: st, Transports: deliverable, Logger: logger})
	outbox.Start()
	charts := &bot.Charts{Data: st, Painter: painter, Smoothing: chartSmoothing(cfg.Plots)}
	notifier := bot.NewNotifier(bot.NotifierOptions{Transports: transports, Always: always, Subscriptions: st, Outbox: outbox, Logger: logger,
		Channels: channels, Quiet: alerts.quiet, Charts: chartsHook(charts, logger), Extremes: st.MetricExtremes})
	sup.Subscribe(notifier.OnEvent)
	notifier.Start()
	health.attach(notifier.Push)
	var progress *bot.ProgressPublisher
	if interval := time.Duration(cfg.Telegram.ProgressInterval); interval > 0 {
		progress = bot.NewProgressPublisher(bot.ProgressOptions{Trainer: sup, Transports: transports, Subscriptions: st,
			Interval: interval, Memory: lastMemory(st, logger), Logger: logger})
		sup.Subscribe(progress.OnEvent)
		progress.Start()
	}
	// Runs an earlier trainbot left running are re-attached (and
	// announced) once the notifier listens.
	if err := sup.Resume(ctx); err != nil {
		return errorf(e, "%v", err)
	}
	router := &bot.Router{Trainer: sup, History: st, Logger: logger, Smoothing: chartSmoothing(cfg.Plots), Plots: painter,
		Access: access, ConfirmStop: map[string]bool{telegram.Name: true}}
	// Scheduled reports and starts; stopped first at shutdown.
	sched, err := startSchedules(alerts.schedules, sup, st, notifier, chartsHook(charts, logger), logger)
	if err != nil {
		return errorf(e, "%v", err)
	}

	// GPU telemetry: NVML when there is a driver, each run's host memory
	// from /proc always; samples stored, run peaks raised, alerts pushed,
	// 显卡 answered. Closed after the supervisor, before the notifier.
	telemetry, noGPU := gpu.Open()
	if noGPU != nil {
		logger.Info("no GPU telemetry; sampling host memory only", "reason", gpu.Reason(noGPU))
	}
	monitor := gpu.NewMonitor(gpu.MonitorOptions{Sampler: telemetry, Interval: time.Duration(cfg.GPU.Interval),
		Runs: sup, Recorder: st, Alert: func(a gpu.Alert) { notifier.Push(gpuAlertReply(a)) },
		Thresholds: gpu.Thresholds{MemoryPercent: cfg.GPU.MemoryAlert, TempC: cfg.GPU.TempAlert}, Logger: logger.With("component", "gpu")})
	monitor.Start()
	router.GPU = func(ctx context.Context) bot.Reply { return gpuChatReply(ctx, monitor) }

	runCtx, stopTransports := context.WithCancel(ctx)
	defer stopTransports()
	// A transport that fails is reported and started again; none ends the bot.
	chats := runTransports(runCtx, transports, router, transportOptions{Logger: logger, Report: notifier.PushExcept,
		Channels: len(channels), ExitAtEOF: o.exitAtEOF})
	code := exitOK
	interrupted := false
wait:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break wait
		case name := <-chats.Ended():
			if name == console.Name && o.exitAtEOF {
				// End of input: let the active run finish, then leave.
				if len(sup.Active()) > 0 {
					logger.Info("input ended; waiting for the active run to end")
				}
				if err := sup.Wait(ctx); err != nil {
					interrupted = true
				}
				break wait
			}
		}
	}
	stopTransports()
	schedCtx, cancelSched := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	if err := sched.Close(schedCtx); err != nil {
		logger.Warn("scheduled jobs still running at shutdown", "err", err)
	}
	cancelSched()
	// Wait for the transports to stop taking messages: Telegram lets the
	// messages it is answering finish first.
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	if n := chats.Wait(stopCtx); n > 0 {
		logger.Warn("transports still running at shutdown", "transports", n)
	}
	cancelStop()

	// The runs belong to their supervisors: serve leaves them running and
	// the next trainbot re-attaches. A terminal chat stops what still
	// runs, since a person ends the session there; a second signal kills
	// instead of waiting.
	closeCtx, cancelClose := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelClose()
	if !o.exitAtEOF {
		if n := len(sup.Active()); n > 0 {
			logger.Info("leaving the active runs running; the next trainbot re-attaches", "runs", n)
		}
		if err := sup.Detach(closeCtx); err != nil {
			logger.Warn("detach from runs", "err", err)
		}
	} else if interrupted && len(sup.Active()) > 0 {
		fmt.Fprintln(e.stderr, "trainbot: stopping the active run (press Ctrl-C again to kill it)")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		go func() {
			select {
			case <-sig:
				cancelClose()
			case <-closeCtx.Done():
			}
		}()
	}
	if o.exitAtEOF {
		if err := sup.Close(closeCtx); err != nil {
			logger.Warn("runs killed at shutdown", "err", err)
		}
	}
	monitor.Close()
	if err := telemetry.Close(); err != nil {
		logger.Warn("close gpu telemetry", "err", err)
	}
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancelDrain()
	if progress != nil {
		if err := progress.Close(drainCtx); err != nil {
			logger.Warn("final progress not sent at shutdown", "err", err)
		}
	}
	if err := notifier.Close(drainCtx); err != nil {
		logger.Warn("notices not delivered at shutdown", "err", err)
	}
	if err := outbox.Close(drainCtx); err != nil {
		logger.Warn("alerts left in the outbox for the next start", "err", err)
	}
	if interrupted && code == exitOK {
		code = 130
	}
	return code
}

// lastMemory reads a run's newest memory sample for live progress.
func lastMemory(st *store.Store, logger *slog.Logger) func(context.Context, int64) (store.RunMemory, bool) {
	return func(ctx context.Context, runID int64) (store.RunMemory, bool) {
		m, ok, err := st.LastRunMemory(ctx, runID)
		if err != nil {
			logger.Debug("read run memory", "run", runID, "err", err)
		}
		return m, ok
	}
}

// openLogger logs to DATA/trainbot.log in terminal-chat modes (the
// terminal is the chat; only warnings go to stderr), and to stderr
// otherwise.
func openLogger(e env, o botOptions) (*slog.Logger, func(), error) {
	level, err := config.ParseLevel(o.cfg.LogLevel)
	if err != nil {
		return nil, nil, err
	}
	if !o.console {
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

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot"
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// botOptions say what to wire.
type botOptions struct {
	dataDir   string
	jobs      []*trainer.Job
	smoothing float64
	logLevel  slog.Level
	// console attaches the terminal chat to stdin/stdout.
	console bool
	// exitAtEOF ends the bot when the console input ends, once the active
	// runs have ended (demo and console modes).
	exitAtEOF bool
	// gpu is the [gpu] section: sampling interval and alert thresholds.
	gpu config.GPUConfig
	// alerts are the push channels, quiet hours and schedules (alerts.go).
	alerts alertsOptions
}

// runBot wires store, supervisor, router, notifier and transports, runs
// until the input ends or a signal arrives, and shuts down in order:
// transports stop taking messages; the supervisor stops the active runs and
// waits for them; GPU sampling stops; the notifier delivers what is queued;
// the store is closed.
func runBot(ctx context.Context, e env, o botOptions) int {
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return errorf(e, "data directory: %v", err)
	}
	logger, closeLog, err := openLogger(e, o)
	if err != nil {
		return errorf(e, "log: %v", err)
	}
	defer closeLog()

	st, err := store.Open(o.dataDir, store.Options{Logger: logger})
	if err != nil {
		return errorf(e, "%v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("close store", "err", err)
		}
	}()
	sup, err := trainer.New(ctx, trainer.Options{Jobs: o.jobs, Recorder: st, DataDir: o.dataDir, Logger: logger})
	if err != nil {
		return errorf(e, "%v", err)
	}

	var transports []bot.Transport
	var always []bot.ChatKey
	var con *console.Console
	if o.console {
		con = console.New(e.stdin, e.stdout, filepath.Join(o.dataDir, "charts"))
		transports = append(transports, con)
		always = append(always, bot.ChatKey{Transport: console.Name, Chat: console.Chat})
	}
	if len(transports) == 0 && len(o.alerts.push) == 0 {
		return errorf(e, "nothing to serve: enable a transport ([console] enabled = true) or a push channel ([[push]])")
	}
	channels, err := pushChannels(o.alerts.push, logger)
	if err != nil {
		return errorf(e, "%v", err)
	}
	charts := chartsHook(st, o.smoothing, logger)
	notifier := bot.NewNotifier(bot.NotifierOptions{Transports: transports, Always: always, Subscriptions: st, Logger: logger,
		Channels: channels, Quiet: o.alerts.quiet, Charts: charts, Extremes: st.MetricExtremes})
	sup.Subscribe(notifier.OnEvent)
	notifier.Start()
	router := &bot.Router{Trainer: sup, History: st, Logger: logger, Smoothing: o.smoothing}
	// Scheduled reports and starts; stopped first at shutdown.
	sched, err := startSchedules(o.alerts.schedules, sup, st, notifier, charts, logger)
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
	monitor := gpu.NewMonitor(gpu.MonitorOptions{Sampler: telemetry, Interval: time.Duration(o.gpu.Interval),
		Runs: sup, Recorder: st, Alert: func(a gpu.Alert) { notifier.Push(gpuAlertReply(a)) },
		Thresholds: gpu.Thresholds{MemoryPercent: o.gpu.MemoryAlert, TempC: o.gpu.TempAlert}, Logger: logger.With("component", "gpu")})
	monitor.Start()
	router.GPU = func(ctx context.Context) bot.Reply { return gpuChatReply(ctx, monitor) }

	runCtx, stopTransports := context.WithCancel(ctx)
	defer stopTransports()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(transports))
	for _, t := range transports {
		go func() { results <- result{t.Name(), t.Run(runCtx, router)} }()
	}
	running := len(transports)
	code := exitOK
	interrupted := false
	if running == 0 { // push channels and schedules only: run until a signal
		<-ctx.Done()
		interrupted = true
	}
wait:
	for running > 0 {
		select {
		case <-ctx.Done():
			interrupted = true
			break wait
		case r := <-results:
			running--
			if r.err != nil && !errors.Is(r.err, context.Canceled) {
				logger.Error("transport stopped", "transport", r.name, "err", r.err)
				fmt.Fprintf(e.stderr, "trainbot: %s: %v\n", r.name, r.err)
				code = exitFail
				break wait
			}
			if r.name == console.Name && o.exitAtEOF {
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

	// Stop what still runs. A second signal kills instead of waiting.
	closeCtx, cancelClose := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelClose()
	if interrupted && len(sup.Active()) > 0 {
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
	if err := sup.Close(closeCtx); err != nil {
		logger.Warn("runs killed at shutdown", "err", err)
	}
	monitor.Close()
	if err := telemetry.Close(); err != nil {
		logger.Warn("close gpu telemetry", "err", err)
	}
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancelDrain()
	if err := notifier.Close(drainCtx); err != nil {
		logger.Warn("notices not delivered at shutdown", "err", err)
	}
	if interrupted && code == exitOK {
		code = 130
	}
	return code
}

// openLogger logs to DATA/trainbot.log in terminal-chat modes (the
// terminal is the chat; only warnings go to stderr), and to stderr
// otherwise.
func openLogger(e env, o botOptions) (*slog.Logger, func(), error) {
	if !o.console {
		return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: o.logLevel})), func() {}, nil
	}
	f, err := os.OpenFile(filepath.Join(o.dataDir, "trainbot.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	h := slog.NewMultiHandler(
		slog.NewTextHandler(f, &slog.HandlerOptions{Level: o.logLevel}),
		slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: max(o.logLevel, slog.LevelWarn)}),
	)
	return slog.New(h), func() { f.Close() }, nil
}

package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// ignoreHangup makes serve go on after a SIGHUP that comes while it starts
// (before the reloader exists), logging that it does nothing. It catches
// the signal rather than setting SIG_IGN, which the runs' processes would
// inherit. The returned func stops it.
func ignoreHangup(logger *slog.Logger) func() {
	return onHangup(func(context.Context) {
		logger.Warn("SIGHUP ignored: trainbot is still starting; send it again to reload the config")
	})
}

// onHangup calls f for each SIGHUP until the returned func is called (it
// waits for a call in progress).
func onHangup(f func(ctx context.Context)) func() {
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

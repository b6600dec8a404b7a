// Package receivers keeps the bot's chat transports receiving, so that
// nothing a transport does ends the bot (and with it the runs): a Receive
// that fails is logged, reported once on the other transports and push
// channels, and started again on bot/reconnect's loop; a permanent error
// (chat.IsPermanent) lets the bot go on without it; Up is /healthz's
// check of them.
package receivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/reconnect"
	"github.com/trainbot/trainbot/i18n"
)

// Options configure Run.
type Options struct {
	Logger *slog.Logger
	// Report tells the chats of the other transports, and the push
	// channels, that a transport stopped (notifier.PushExcept); nil: logged
	// only.
	Report func(words func(i18n.Lang) chat.Reply, except string)
	// Channels is how many push channels there are: the log says what is
	// left when the last transport is gone.
	Channels int
	// ExitAtEOF says that the end of the console's input ends the bot
	// (demo, console); runBot decides that, on Ended.
	ExitAtEOF bool
	// MinBackoff is the pause before a failed transport is started again
	// (default 1 s); it doubles with each failure in a row up to MaxBackoff
	// (default 5 min). A Receive that lasted Stable (default 1 min) was
	// fine: the next failure starts over, and is reported again.
	MinBackoff, MaxBackoff, Stable time.Duration
	// UpAfter is how long a transport started again after a failure must
	// run before /healthz counts it as up (default 10 s).
	UpAfter time.Duration
}

// transports runs the receivers of runBot, so that nothing a transport
// does ends the bot (and with it the runs): a Receive that fails is logged,
// reported once on the other transports and push channels, and started
// again with reconnect.Loop's capped exponential backoff — unless its error is permanent
// (chat.IsPermanent: Telegram refused the token), when the bot goes on
// without it. A Receive that returns nil ended its input (the console):
// runBot hears of it on Ended and decides. When no transport is left the
// bot goes on, for its runs, schedules and push channels, until it is
// stopped.
type Set struct {
	opts  Options
	log   *slog.Logger
	ts    []chat.Receiver
	ended chan string
	wg    sync.WaitGroup

	mu      sync.Mutex
	live    int // transports not gone for good
	running int // Receive loops not returned
	downs   map[string]*down
}

// down is a transport that failed: it is up again once a
// Receive started after the failure has run for UpAfter.
type down struct {
	err       error
	gone      bool      // stopped for good
	restarted time.Time // zero until started again
}

// Run starts every receiver's Receive with deliver until ctx ends.
func Run(ctx context.Context, ts []chat.Receiver, deliver func(context.Context, chat.Message), o Options) *Set {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.Stable <= 0 {
		o.Stable = time.Minute
	}
	if o.UpAfter <= 0 {
		o.UpAfter = 10 * time.Second
	}
	r := &Set{opts: o, log: o.Logger, ts: ts, ended: make(chan string, len(ts)), live: len(ts), running: len(ts),
		downs: map[string]*down{}}
	for _, t := range ts {
		r.wg.Go(func() { r.keep(ctx, t, deliver) })
	}
	return r
}

// Ended receives the name of each transport whose input ended.
func (r *Set) Ended() <-chan string { return r.ended }

// Wait waits until every Receive has returned (after ctx of Run
// ended), or until ctx ends; it returns how many still run.
func (r *Set) Wait(ctx context.Context) int {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return 0
	case <-ctx.Done():
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.running
	}
}

// keep runs one transport until ctx ends, its input ends, or it fails
// for good, on reconnect.Loop: a Receive that lasted Stable was fine, and
// the next failure starts over.
func (r *Set) keep(ctx context.Context, t chat.Receiver, deliver func(context.Context, chat.Message)) {
	defer func() {
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
	}()
	name := t.Name()
	log := r.log.With("transport", name)
	ended := false
	loop := reconnect.Loop{
		Backoff: reconnect.Backoff{Initial: r.opts.MinBackoff, Max: r.opts.MaxBackoff},
		Stable:  r.opts.Stable,
		OnLoss: func(l reconnect.Loss) {
			if l.Failures == 1 {
				r.report(name, func(lang i18n.Lang) string {
					after := l.Wait.String()
					if lang == i18n.Zh {
						after = lang.Duration(l.Wait)
					}
					return lang.T(i18n.TransportRetry, name, l.Err, name, after)
				})
			}
			log.Error("transport stopped; starting it again", "in", l.Wait, "failures", l.Failures, "up", l.Up.Round(time.Millisecond), "err", l.Err)
		},
	}
	err := loop.Run(ctx, func(ctx context.Context, _ func()) error {
		began := time.Now()
		r.mark(name, func(d *down) { d.restarted = began })
		err := receiveOnce(ctx, t, deliver, log)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			ended = true
			return nil
		}
		r.mark(name, func(d *down) { d.err, d.gone, d.restarted = err, chat.IsPermanent(err), time.Time{} })
		return err
	})
	switch {
	case ctx.Err() != nil:
	case ended:
		log.Info("input ended")
		r.gone(true)
		r.ended <- name
	case err != nil:
		log.Error("transport stopped for good: trainbot goes on without it; fix the config and restart trainbot", "err", err)
		r.report(name, func(l i18n.Lang) string { return l.T(i18n.TransportGone, name, err) })
		r.gone(false)
	}
}

// mark changes what /healthz knows of a transport that failed (nothing
// for one that never did).
func (r *Set) mark(name string, f func(d *down)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.downs[name]
	if d == nil {
		d = &down{}
	}
	f(d)
	if d.err != nil {
		r.downs[name] = d
	}
}

// Up is /healthz's check of the transports: nil when none is down, else
// which are and why. A transport is down from its failure until a Receive
// started again has run for UpAfter; one stopped for good stays down. One
// that reconnects inside Receive (chat.Linked: Telegram, WeCom, Feishu,
// DingTalk) is down too when it has not been connected for longer than
// the cap of its backoff.
func (r *Set) Up(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	now := time.Now()
	for _, t := range r.ts {
		lt, ok := t.(chat.Linked)
		if _, failed := r.downs[t.Name()]; !ok || failed {
			continue
		}
		l := lt.Link()
		if l.Connected || l.Since.IsZero() || now.Sub(l.Since) <= l.Backoff {
			continue
		}
		gone := now.Sub(l.Since)
		if gone >= time.Second {
			gone = gone.Round(time.Second)
		}
		err := fmt.Errorf("%s not connected for %s (it tries again at least every %s)", t.Name(), gone.Round(time.Millisecond), l.Backoff)
		if l.Err != nil {
			err = fmt.Errorf("%w: %w", err, l.Err)
		}
		errs = append(errs, err)
	}
	for name, d := range r.downs {
		switch {
		case d.gone:
			errs = append(errs, fmt.Errorf("%s stopped for good: %w", name, d.err))
		case d.restarted.IsZero() || time.Since(d.restarted) < r.opts.UpAfter:
			errs = append(errs, fmt.Errorf("%s failed, starting again: %w", name, d.err))
		default:
			delete(r.downs, name)
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// receiveOnce is t.Receive, with a panic turned into an error.
func receiveOnce(ctx context.Context, t chat.Receiver, deliver func(context.Context, chat.Message), log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("transport panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return t.Receive(ctx, deliver)
}

func (r *Set) report(name string, text func(i18n.Lang) string) {
	if r.opts.Report == nil {
		return
	}
	key := fmt.Sprintf("transport:%s:stopped:%d", name, time.Now().UnixMilli())
	r.opts.Report(func(l i18n.Lang) chat.Reply {
		return chat.Reply{Text: text(l), Kind: chat.KindAlert, Alert: chat.AlertTrainbot, Key: key}
	}, name)
}

// gone counts a transport that will not run again, and says so when it was
// the last.
func (r *Set) gone(eof bool) {
	r.mu.Lock()
	r.live--
	last := r.live == 0
	r.mu.Unlock()
	if !last || (eof && r.opts.ExitAtEOF) {
		return
	}
	if r.opts.Channels > 0 {
		r.log.Warn("no chat transport left: trainbot goes on with its runs, schedules and push channels until it is stopped (SIGTERM, Ctrl-C)",
			"push_channels", r.opts.Channels)
		return
	}
	r.log.Error("no chat transport left and no push channel: nobody can be told anything, but trainbot goes on with its runs and schedules until it is stopped (SIGTERM, Ctrl-C)")
}

// Package reconnect is trainbot's one backoff and its one reconnect loop:
// every transport's reconnects (Telegram's polls, the WeCom, Feishu and
// DingTalk long connections, the supervisor of the receivers in
// cmd/trainbot) go through Loop, and bot/deliver's retry pauses are
// Backoff's delays. It handles the traps the five copies it replaces fell
// into:
//
//   - The delay resets once a connection has proved healthy (a frame
//     received, a ping answered, a poll answered: the session calls
//     healthy), not after a fixed uptime. DingTalk drops its long
//     connection as a matter of course, about every minute, and does not
//     push a robot message missed meanwhile again; a reset that waited
//     for 2 min of uptime never came, so the delay doubled on each routine
//     drop up to its cap and every drop cost up to a minute of messages.
//     Stable remains for a session that cannot tell (a transport's
//     Receive, seen from the supervisor).
//   - Every loss is logged, with key/values: the first after a healthy
//     session as "connection lost; reconnecting", the ones after a session
//     that never proved healthy as "still cannot connect; retrying" (both
//     warnings; before, the ones in a row went to the debug level, so
//     after the first routine drop nothing was told again).
//   - One count: the first failure after a reset waits Initial, the n-th
//     Initial·Factorⁿ⁻¹, at most Max. (The supervisor's copy counted from
//     0 and deliver's from 1; a shift by the count overflowed past 63.)
//     Delay stops multiplying at the cap, so any count is safe.
//   - Jitter only shortens a delay (drawn from [d·(1−Jitter), d]), so Max
//     stays the longest pause: /healthz's chat.Link.Backoff relies on it.
//   - A service's own wait (chat.RetryAfter: a 429's retry_after, a
//     throttling answer) is kept when it is longer than the backoff, even
//     past Max; a permanent error (chat.IsPermanent: a refused token,
//     another instance took over) ends the loop, it is never retried.
//   - The pause is cut short by the context, and nothing sleeps to wait
//     for another goroutine; Loop's clock (Now, Sleep) is a field, so its
//     tests run with a fake one.
package reconnect

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// Default values of Backoff's zero fields.
const (
	DefaultInitial = time.Second
	DefaultMax     = 5 * time.Minute
	DefaultFactor  = 2.0
)

// maxJitter keeps a jittered delay from reaching 0 (a tight loop).
const maxJitter = 0.9

// Backoff is a capped exponential backoff with optional jitter. The zero
// value waits 1 s, 2 s, 4 s, … up to 5 min; it is not safe for concurrent
// use (one loop owns it).
type Backoff struct {
	// Initial is the pause after the first failure (default 1 s).
	Initial time.Duration
	// Max caps every pause (default 5 min).
	Max time.Duration
	// Factor multiplies the pause after each failure in a row (default 2;
	// below 1 is taken as the default, 1 keeps it constant).
	Factor float64
	// Jitter draws each pause of Next from [d·(1−Jitter), d] (0: none; at
	// most 0.9), so that many clients cut off at once do not come back at
	// once.
	Jitter float64
	// Rand returns a number in [0, 1) for the jitter (default
	// math/rand/v2.Float64); tests set it.
	Rand func() float64

	failures int
}

func (b Backoff) params() (initial, maxWait time.Duration, factor float64) {
	initial, maxWait, factor = b.Initial, b.Max, b.Factor
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxWait <= 0 {
		maxWait = DefaultMax
	}
	if factor < 1 {
		factor = DefaultFactor
	}
	return initial, maxWait, factor
}

// Delay is the pause after the n-th failure in a row (n ≥ 1; less is
// taken as 1), without jitter: Initial·Factorⁿ⁻¹, at most Max. It is pure.
func (b Backoff) Delay(n int) time.Duration {
	initial, maxWait, factor := b.params()
	d := float64(initial)
	if factor > 1 {
		for i := 1; i < n && d < float64(maxWait); i++ {
			d *= factor
		}
	}
	if d >= float64(maxWait) {
		return maxWait
	}
	return time.Duration(d)
}

// Next counts one more failure in a row and returns the pause before the
// next try: Delay of the count, shortened by the jitter.
func (b *Backoff) Next() time.Duration {
	b.failures++
	d := b.Delay(b.failures)
	if j := min(b.Jitter, maxJitter); j > 0 {
		r := b.Rand
		if r == nil {
			r = rand.Float64
		}
		d -= time.Duration(float64(d) * j * r())
	}
	return d
}

// Reset starts over: the next failure waits Initial.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures is the count of failures in a row since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

// Loss is one lost session, as Loop tells OnLoss.
type Loss struct {
	// Err is why the session ended.
	Err error
	// Failures counts the losses in a row, this one included: 1 is the
	// first after a healthy session (or the first of all).
	Failures int
	// Wait is the pause before the next session.
	Wait time.Duration
	// Healthy says that the session proved healthy before it was lost.
	Healthy bool
	// Up is how long the session lasted.
	Up time.Duration
}

// Loop runs sessions one after another until its context ends, with a
// Backoff between them that resets once a session proved healthy.
type Loop struct {
	// Log gets a warning for each loss (nil: none; OnLoss words them).
	Log *slog.Logger
	// Backoff is the pause between sessions.
	Backoff Backoff
	// Stable, when set, counts a session that lasted that long as healthy
	// even though it never said so.
	Stable time.Duration
	// Link, when set, is told when Run begins (with the cap of the
	// backoff) and of each lost session; the session says Up itself
	// when it is connected.
	Link *chat.LinkState
	// OnLoss, when set, is told of each loss before the pause (not of
	// a permanent error, which Run returns).
	OnLoss func(Loss)
	// Now and Sleep are the clock (defaults time.Now and chat.Sleep).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Run calls connect until ctx ends, connect returns nil (the session ended
// for good: the end of the console's input), or it returns a permanent
// error (chat.IsPermanent), which Run returns; it returns nil otherwise.
// Each call is one session: it connects and reads until the connection is
// lost, and calls healthy (from any goroutine, any number of times) once
// the connection has proved healthy, so that the next loss waits Initial
// again. A chat.RetryAfter error's wait is kept when it is longer than the
// backoff.
func (l Loop) Run(ctx context.Context, connect func(ctx context.Context, healthy func()) error) error {
	now, sleep := l.Now, l.Sleep
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = chat.Sleep
	}
	b := l.Backoff
	if l.Link != nil {
		_, maxWait, _ := b.params()
		l.Link.Begin(maxWait)
	}
	for {
		var proved atomic.Bool
		began := now()
		err := connect(ctx, func() { proved.Store(true) })
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return nil
		}
		if l.Link != nil {
			l.Link.Down(err)
		}
		if chat.IsPermanent(err) {
			return err
		}
		up := now().Sub(began)
		healthy := proved.Load() || (l.Stable > 0 && up >= l.Stable)
		if healthy {
			b.Reset()
		}
		wait := b.Next()
		if _, after := chat.Classify(err); after > wait {
			wait = after
		}
		loss := Loss{Err: err, Failures: b.Failures(), Wait: wait, Healthy: healthy, Up: up}
		l.log(loss)
		if l.OnLoss != nil {
			l.OnLoss(loss)
		}
		if sleep(ctx, wait) != nil {
			return nil
		}
	}
}

func (l Loop) log(loss Loss) {
	if l.Log == nil {
		return
	}
	msg := "connection lost; reconnecting"
	if loss.Failures > 1 {
		msg = "still cannot connect; retrying"
	}
	l.Log.Warn(msg, "in", loss.Wait.Round(time.Millisecond), "failures", loss.Failures, "healthy", loss.Healthy,
		"up", loss.Up.Round(time.Millisecond), "err", loss.Err)
}

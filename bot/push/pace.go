package push

import (
	"context"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot"
)

// Window is a rate limit: at most N messages in any span of Per.
type Window struct {
	N   int
	Per time.Duration
}

// Pacer keeps sends within sliding-window rate limits. Wait blocks until a
// send is allowed; it never refuses one.
type Pacer struct {
	windows []Window
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	sent    []time.Time // recent send times, oldest first
	keep    int         // how many to remember: the largest N
	blocked time.Time   // no send before this (the channel said: too fast)
}

// NewPacer returns a pacer for the windows; now and sleep may be nil.
func NewPacer(windows []Window, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Pacer {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = bot.Sleep
	}
	p := &Pacer{windows: windows, now: now, sleep: sleep}
	for _, w := range windows {
		p.keep = max(p.keep, w.N)
	}
	return p
}

// Wait blocks until one more send keeps every window, and counts it; it
// returns ctx's error if ctx ends first.
func (p *Pacer) Wait(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.Lock()
		now := p.now()
		d := p.delay(now)
		if d <= 0 {
			p.sent = append(p.sent, now)
			if len(p.sent) > p.keep {
				p.sent = append(p.sent[:0], p.sent[len(p.sent)-p.keep:]...)
			}
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// delay is how long to wait before the next send may go.
func (p *Pacer) delay(now time.Time) time.Duration {
	d := p.blocked.Sub(now)
	for _, w := range p.windows {
		if w.N <= 0 || len(p.sent) < w.N {
			continue
		}
		// The N-th most recent send must have left the window.
		t := p.sent[len(p.sent)-w.N]
		d = max(d, t.Add(w.Per).Sub(now))
	}
	return d
}

// Block holds every send for d (the channel answered: too fast).
func (p *Pacer) Block(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := p.now().Add(d); until.After(p.blocked) {
		p.blocked = until
	}
}

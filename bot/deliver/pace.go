package deliver

import (
	"context"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// Pacer keeps sends within sliding-window rate limits (chat.Window: at
// most N in any span of Per). Wait blocks until a send is allowed; it never
// refuses one. Each lane has one for its destination, and lanes of a
// sender share one for the sender's limit over all its chats.
type Pacer struct {
	windows []chat.Window
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	sent []time.Time // recent send times, oldest first
	keep int         // how many to remember: the largest N
}

// NewPacer returns a pacer for the windows; now and sleep may be nil (the
// clock, and a timer that minds ctx).
func NewPacer(windows []chat.Window, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Pacer {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = chat.Sleep
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
	var d time.Duration
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

// Spare reports whether one more send now leaves every window at most half
// full (a window of N allows max(N/2, 1)): room that a send which must
// delay no other (a refusal) may take. It counts nothing and never waits.
func (p *Pacer) Spare() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spareLocked()
}

// TakeSpare is Spare and, when there is room, Count, in one step: another
// sender cannot take the same room in between.
func (p *Pacer) TakeSpare() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.spareLocked() {
		return false
	}
	p.countLocked()
	return true
}

func (p *Pacer) spareLocked() bool {
	now := p.now()
	for _, w := range p.windows {
		if w.N <= 0 {
			continue
		}
		in := 0
		for i := len(p.sent) - 1; i >= 0 && now.Sub(p.sent[i]) < w.Per; i-- {
			in++
		}
		if in+1 > max(w.N/2, 1) {
			return false
		}
	}
	return true
}

// Count counts a send made now without waiting (one Spare allowed).
func (p *Pacer) Count() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.countLocked()
}

func (p *Pacer) countLocked() {
	p.sent = append(p.sent, p.now())
	if len(p.sent) > p.keep {
		p.sent = append(p.sent[:0], p.sent[len(p.sent)-p.keep:]...)
	}
}

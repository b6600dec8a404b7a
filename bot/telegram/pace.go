package telegram

import (
	"context"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot"
)

// Rate is a pace: one message every Every, with bursts of up to Burst.
type Rate struct {
	Every time.Duration
	Burst int
}

// Telegram's limits (core.telegram.org/bots/faq): about one message a
// second in a chat, 20 a minute in a group, 30 a second in all. A group's
// burst of 3 plus one every 3.53 s keeps any minute at 20 or fewer.
var (
	DefaultPrivateRate = Rate{Every: time.Second, Burst: 3}
	DefaultGroupRate   = Rate{Every: 3530 * time.Millisecond, Burst: 3}
	DefaultGlobalRate  = Rate{Every: 34 * time.Millisecond, Burst: 30}
)

// pacer spaces the calls of each chat (and of the whole bot) with the
// generic cell rate algorithm, and holds a chat back for the wait a 429
// answer asked for. reserve is pure arithmetic on the clock it is given.
type pacer struct {
	private, group, global Rate

	mu     sync.Mutex
	chats  map[int64]*cell
	all    cell
	maxMap int
}

// cell is one rate's state: tat is the theoretical arrival time of the next
// call; blocked holds calls back after a 429.
type cell struct {
	tat     time.Time
	blocked time.Time
}

func newPacer(private, group, global Rate) *pacer {
	return &pacer{private: private, group: group, global: global, chats: map[int64]*cell{}, maxMap: 4096}
}

// isGroup: group, supergroup and channel ids are negative.
func isGroup(chat int64) bool { return chat < 0 }

// take reserves a slot in c at rate r and returns when it is.
func (c *cell) take(r Rate, now time.Time) time.Time {
	at := now
	if r.Every > 0 {
		tolerance := time.Duration(max(r.Burst-1, 0)) * r.Every
		if earliest := c.tat.Add(-tolerance); earliest.After(at) {
			at = earliest
		}
	}
	if c.blocked.After(at) {
		at = c.blocked
	}
	if r.Every > 0 {
		base := c.tat
		if at.After(base) {
			base = at
		}
		c.tat = base.Add(r.Every)
	}
	return at
}

// reserve books a call to chat at now and returns how long to wait for it.
func (p *pacer) reserve(chat int64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.chats[chat]
	if c == nil {
		if len(p.chats) >= p.maxMap {
			for id, old := range p.chats {
				if old.tat.Before(now) && old.blocked.Before(now) {
					delete(p.chats, id)
				}
			}
		}
		c = &cell{}
		p.chats[chat] = c
	}
	r := p.private
	if isGroup(chat) {
		r = p.group
	}
	at := c.take(r, now)
	// The bot-wide slot is booked at now even when the chat's is later: the
	// algorithm wants arrivals in time order, and booking early only errs
	// on the safe side.
	if g := p.all.take(p.global, now); g.After(at) {
		at = g
	}
	return at.Sub(now)
}

// block holds a chat back until now+d (a 429's retry_after).
func (p *pacer) block(chat int64, now time.Time, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.chats[chat]
	if c == nil {
		c = &cell{}
		p.chats[chat] = c
	}
	if until := now.Add(d); until.After(c.blocked) {
		c.blocked = until
	}
}

// wait waits for a slot to call chat.
func (p *pacer) wait(ctx context.Context, chat int64) error {
	return bot.Sleep(ctx, p.reserve(chat, time.Now()))
}

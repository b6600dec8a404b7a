package deliver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// The refusal rule: what delivery does with a chat.KindRefusal reply, the
// answer to someone who may not use the bot. Every attempt is in the
// audit (the router writes it); the answer is only a courtesy, and a flood
// of attempts must cost the people who may use the bot nothing:
//
//   - A button press the transport can answer on its own (chat.Press) is
//     answered with the refusal, shown to the presser alone; nothing goes
//     to the chat.
//   - Otherwise a refused sender is told at most once per chat per
//     Options.RefusalEvery (10 minutes); the other attempts get no answer.
//     The rule remembers in memory: a restart may tell a sender again.
//   - A refusal goes on a lane of its own for the chat, never on the
//     members' lane: no member's answer waits behind one. It is sent at
//     once when that delays no one — the members' lane of the chat has
//     nothing waiting and the chat's and the sender's pace have more than
//     half of their room free (Pacer.Spare) — or not at all (its sender
//     may then be told at the next attempt). It is never stored in the
//     outbox and is tried EphemeralTries times at most.

// DefaultRefusalEvery is how often a refused sender is told no in a chat.
const DefaultRefusalEvery = 10 * time.Minute

// maxRefusalQueue bounds the refusals waiting in one chat's refusal lane;
// more are not sent.
const maxRefusalQueue = 4

// maxRefused bounds the senders the refusal rule remembers; while it is
// full of ones told within RefusalEvery, new ones are not told.
const maxRefused = 10_000

// errNoRoom is a refusal's attempt that would have delayed the members.
var errNoRoom = errors.New("a refusal now would delay the chat's members")

// refusalKey is a refused sender in a chat.
type refusalKey struct {
	to  chat.ChatKey
	who string
}

// refusalGate remembers when each refused sender was last told no in each
// chat.
type refusalGate struct {
	every time.Duration

	mu    sync.Mutex
	told  map[refusalKey]time.Time
	swept time.Time
}

func newRefusalGate(every time.Duration) *refusalGate {
	return &refusalGate{every: every, told: map[refusalKey]time.Time{}}
}

// allow reports whether who may be told no in to now, and remembers it.
func (g *refusalGate) allow(to chat.ChatKey, who string, now time.Time) bool {
	k := refusalKey{to, who}
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.told[k]; ok && now.Sub(at) < g.every {
		return false
	}
	if len(g.told) >= maxRefused {
		if now.Sub(g.swept) < time.Second {
			return false // swept a moment ago: a flood of new senders
		}
		g.swept = now
		for k, at := range g.told {
			if now.Sub(at) >= g.every {
				delete(g.told, k)
			}
		}
		if len(g.told) >= maxRefused {
			return false
		}
	}
	g.told[k] = now
	return true
}

// forget lets who be told at the next attempt: the refusal allowed was
// not sent.
func (g *refusalGate) forget(to chat.ChatKey, who string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.told, refusalKey{to, who})
}

// refuse delivers a refusal by the refusal rule (Post's path for
// KindRefusal).
func (p *Pipeline) refuse(e Envelope) {
	e.Durable, e.NotBefore = false, time.Time{}
	if !p.refusals.allow(e.To, e.Refused, p.opts.Now()) {
		p.log.Debug("refusal not sent: told in this chat not long ago", "to", e.To.String(), "user", e.Refused)
		return
	}
	if p.closing.Load() {
		p.refusals.forget(e.To, e.Refused)
		return
	}
	p.refusalLane(e.To).add(&item{env: e})
}

// answerRefusal is what Answer does with a refusal to m: the press's own
// answer when it has one, else a refusal to the chat.
func (p *Pipeline) answerRefusal(ctx context.Context, m chat.Message, r chat.Reply) {
	if m.Press != nil && m.Press.Answer(ctx, r.Text) {
		p.log.Debug("refusal shown to the presser", "to", m.ChatKey().String(), "user", m.User.Who())
		return
	}
	p.Post(Envelope{To: m.ChatKey(), Reply: r, Refused: m.User.Who()})
}

// refusalLane returns the refusal lane of a destination, made on first
// use. It shares the pace of the destination's lane.
func (p *Pipeline) refusalLane(to chat.ChatKey) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.refusalLanes[to]
	if l == nil {
		m := p.laneLocked(to)
		l = &lane{p: p, to: to, refusal: true, pace: m.pace, shared: m.shared, wake: make(chan struct{}, 1), uploaded: make(chan uploadResult, 1)}
		p.refusalLanes[to] = l
	}
	return l
}

// roomForRefusal takes room for a refusal to l's destination when sending
// it now delays no one, and reports whether it did.
func (l *lane) roomForRefusal() bool {
	l.p.mu.Lock()
	members := l.p.lanes[l.to]
	l.p.mu.Unlock()
	if members != nil && members.waiting() {
		return false
	}
	// Checked and taken in one step per pacer. When the chat's pace has
	// room and the shared one has none, the chat's counts one send that
	// did not happen: it errs toward the members.
	for _, pc := range []*Pacer{l.pace, l.shared} {
		if pc != nil && !pc.TakeSpare() {
			return false
		}
	}
	return true
}

// waiting reports whether the lane has anything to send or in flight.
func (l *lane) waiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.texts) > 0 || len(l.charts) > 0 || l.uploading != nil
}

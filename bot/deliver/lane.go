package deliver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// item is an envelope in its lane.
type item struct {
	env      Envelope
	id       int64 // outbox row, 0 when not stored
	chart    bool  // goes by the upload path
	attempts int   // failed attempts so far (across restarts)
	next     time.Time
	done     int  // messages of the reply delivered by earlier attempts
	inflight bool // an attempt is being made
}

// lane delivers the envelopes of one destination. Its goroutine runs while
// there is something to send; the lane itself (its order, the keys it
// delivered, its pace) lives as long as the pipeline.
type lane struct {
	p      *Pipeline
	to     chat.ChatKey
	pace   *Pacer // the destination's own limits; nil when none
	shared *Pacer // the sender's limits over all its destinations; nil when none
	wake   chan struct{}
	// refusal marks a refusal lane (refusal.go): its items are sent
	// when there is room to spare, or not at all.
	refusal bool
	// uploaded gets the outcome of the upload in flight.
	uploaded chan uploadResult

	mu        sync.Mutex
	texts     []*item // in order
	charts    []*item // in order, one upload at a time
	uploading *item
	sent      keySet // keys delivered (durable envelopes)
	running   bool
}

type uploadResult struct {
	it  *item
	err error
}

func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// add queues an item: a durable one unless its key was delivered or is
// queued; an ephemeral one in place of the unsent one with its key.
func (l *lane) add(it *item) {
	key := it.env.Reply.Key
	l.mu.Lock()
	defer l.mu.Unlock()
	q := &l.texts
	if it.chart {
		q = &l.charts
	}
	switch {
	case key != "" && !it.env.Durable:
		for i, old := range *q {
			if old.env.Reply.Key == key && !old.inflight && !old.env.Durable {
				(*q)[i] = it // newest wins
				l.signal()
				return
			}
		}
	case key != "":
		if l.sent.has(key) || slices.ContainsFunc(*q, func(o *item) bool { return o.env.Reply.Key == key }) {
			l.p.log.Debug("duplicate; not sent again", "to", l.to.String(), "key", key)
			return
		}
	}
	if l.refusal && len(*q) >= maxRefusalQueue {
		l.p.log.Debug("refusal not sent: too many waiting", "to", l.to.String(), "user", it.env.Refused)
		l.p.refusals.forget(l.to, it.env.Refused)
		return
	}
	*q = append(*q, it)
	if !l.running {
		// Under the pipeline's lock: Close waits for no goroutine started
		// after it began.
		l.p.mu.Lock()
		if !l.p.closing.Load() {
			l.running = true
			l.p.wg.Add(1)
			go l.run(l.p.ctx)
		}
		l.p.mu.Unlock()
	}
	l.signal()
}

// due returns the item of q to send now, or when the next one is due. An
// item held (NotBefore) holds back nothing; one waiting for its retry holds
// back the items after it: a destination gets its replies in order.
func due(q []*item, now time.Time) (*item, time.Time) {
	var at time.Time
	earlier := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	for _, it := range q {
		if it.inflight {
			return nil, at
		}
		if it.env.NotBefore.After(now) {
			earlier(it.env.NotBefore)
			continue
		}
		if it.next.After(now) {
			earlier(it.next)
			return nil, at
		}
		return it, time.Time{}
	}
	return nil, at
}

// run sends the lane's items until there is nothing left to send now and
// nothing in flight; while the pipeline closes, until nothing is due now.
func (l *lane) run(ctx context.Context) {
	defer l.p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		stop := ctx.Err() != nil || l.p.closing.Load()
		l.mu.Lock()
		text, textAt := due(l.texts, now)
		var chart *item
		var chartAt time.Time
		if l.uploading == nil {
			chart, chartAt = due(l.charts, now)
		}
		if ctx.Err() != nil {
			text, chart = nil, nil
		}
		if text == nil && chart == nil && l.uploading == nil && (stop || len(l.texts)+len(l.charts) == 0) {
			l.running = false
			l.mu.Unlock()
			return
		}
		if text != nil {
			text.inflight = true
		}
		if chart != nil {
			chart.inflight = true
			l.uploading = chart
		}
		l.mu.Unlock()

		if chart != nil {
			go func() { l.uploaded <- uploadResult{it: chart, err: l.attempt(ctx, chart)} }()
		}
		if text != nil {
			l.settle(ctx, text, l.attempt(ctx, text))
			continue
		}
		if chart != nil {
			continue
		}
		wait := time.Hour
		for _, at := range []time.Time{textAt, chartAt} {
			if !at.IsZero() {
				wait = min(wait, max(at.Sub(now), time.Millisecond))
			}
		}
		if stop && l.uploading != nil {
			wait = time.Hour // only the upload in flight is waited for
		}
		if ctx.Err() != nil {
			// Cancelled: the upload in flight ends soon; wait for it alone.
			r := <-l.uploaded
			l.mu.Lock()
			l.uploading = nil
			l.mu.Unlock()
			l.settle(ctx, r.it, r.err)
			continue
		}
		timer.Reset(wait)
		select {
		case <-l.wake:
		case <-timer.C:
		case r := <-l.uploaded:
			l.mu.Lock()
			l.uploading = nil
			l.mu.Unlock()
			l.settle(ctx, r.it, r.err)
		case <-ctx.Done():
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// attempt makes one attempt at an item, within the destination's and the
// sender's pace; on a refusal lane, only when there is room to spare.
func (l *lane) attempt(ctx context.Context, it *item) error {
	if l.refusal {
		if !l.roomForRefusal() {
			return errNoRoom
		}
	} else {
		for _, p := range []*Pacer{l.pace, l.shared} {
			if p != nil {
				if err := p.Wait(ctx); err != nil {
					return err
				}
			}
		}
	}
	actx, cancel := context.WithTimeout(ctx, l.p.opts.SendTimeout)
	defer cancel()
	s := l.p.sender(l.to.Transport) // a reload may have replaced or removed it
	if s == nil {
		return chat.Permanent("the channel was removed by a config reload", fmt.Errorf("%s: no such channel", l.to.Transport))
	}
	n, err := s.Send(actx, l.to.Chat, it.env.Reply, it.done)
	l.mu.Lock()
	it.done = max(it.done, n)
	l.mu.Unlock()
	return err
}

// settle applies the outcome of an attempt: the one place where the retry
// policy is applied and the outcome recorded.
func (l *lane) settle(ctx context.Context, it *item, err error) {
	log := l.p.log.With("to", l.to.String(), "key", it.env.Reply.Key, "run", it.env.Reply.RunID)
	if err != nil && ctx.Err() != nil {
		// Shutting down: not the message's fault; it stays as it was.
		l.mu.Lock()
		it.inflight = false
		l.mu.Unlock()
		return
	}
	now := time.Now()
	if err == nil {
		l.remove(it, true)
		if it.attempts > 0 {
			log.Info("delivered after retries", "attempts", it.attempts+1)
		}
		if it.id != 0 {
			id := it.id
			l.p.rec.write(id, func(ctx context.Context) error { return l.p.opts.Store.MarkOutboxSent(ctx, id, now) })
		}
		return
	}
	it.attempts++
	if errors.Is(err, errNoRoom) {
		l.remove(it, false)
		l.p.refusals.forget(l.to, it.env.Refused)
		log.Debug("refusal not sent: it would delay the chat's members", "user", it.env.Refused)
		return
	}
	v := l.p.opts.Policy.Decide(it.attempts, it.env.Durable, it.chart, err)
	reason := chat.ReasonOf(err)
	if v.GiveUp {
		l.remove(it, false)
		if l.refusal {
			l.p.refusals.forget(l.to, it.env.Refused)
		}
		if v.Permanent {
			log.Error("refused for good; not tried again", "attempts", it.attempts, "err", err)
		} else {
			log.Warn("not delivered; given up", "attempts", it.attempts, "err", err)
		}
		if it.id != 0 {
			id := it.id
			l.p.rec.write(id, func(ctx context.Context) error { return l.p.opts.Store.MarkOutboxFailed(ctx, id, now, reason) })
		}
		if it.chart {
			l.p.Post(chartFallback(l.p.opts.Languages.For(l.to.Transport), l.to, it, err))
		}
		return
	}
	l.mu.Lock()
	it.next = now.Add(v.Wait)
	it.inflight = false
	l.mu.Unlock()
	log.Warn("not delivered yet; will try again", "attempt", it.attempts, "retry_in", v.Wait, "err", err)
	if it.id != 0 {
		id, next := it.id, it.next
		l.p.rec.write(id, func(ctx context.Context) error { return l.p.opts.Store.MarkOutboxRetry(ctx, id, next, reason) })
	}
}

// remove takes an item out of its queue; sent remembers its key.
func (l *lane) remove(it *item, sent bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	del := func(q []*item) []*item { return slices.DeleteFunc(q, func(o *item) bool { return o == it }) }
	l.texts, l.charts = del(l.texts), del(l.charts)
	if sent && it.env.Durable {
		l.sent.add(it.env.Reply.Key)
	}
}

// chartFallback is the text a chat gets for charts that could not be sent:
// why, and how to draw them on the host.
func chartFallback(lang i18n.Lang, to chat.ChatKey, it *item, err error) Envelope {
	r := it.env.Reply
	var b strings.Builder
	b.WriteString(lang.T(i18n.ChartsNotSent, len(r.Images), chat.ReasonOf(err)))
	var cmds []string
	for _, img := range r.Images {
		if img.Command != "" {
			cmds = append(cmds, img.Command)
		}
	}
	if len(cmds) > 0 {
		b.WriteString(lang.T(i18n.OnTheHost, strings.Join(cmds, "\n")))
	}
	key := ""
	if r.Key != "" {
		key = r.Key + "#fallback"
	}
	return Envelope{To: to, Durable: it.env.Durable,
		Reply: chat.Reply{Text: b.String(), Kind: r.Kind, RunID: r.RunID, Alert: r.Alert, Key: key, ReplyTo: r.ReplyTo}}
}

// keySet remembers the keys delivered to one destination, up to keySetMax
// (the oldest are forgotten first; the outbox remembers them longer).
type keySet struct {
	keys  map[string]bool
	order []string
}

const keySetMax = 4096

func (s *keySet) has(key string) bool { return key != "" && s.keys[key] }

func (s *keySet) add(key string) {
	if key == "" || s.keys[key] {
		return
	}
	if s.keys == nil {
		s.keys = map[string]bool{}
	}
	if len(s.order) >= keySetMax {
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
	s.keys[key] = true
	s.order = append(s.order, key)
}

package bot

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// This file holds what the notifier adds for push channels and quiet
// hours, kept apart from its core so that the core can change on its own:
// routing replies to push channels by alert kind, a queue and retry loop
// per channel (a channel that is down or slow never holds up the others),
// de-duplication by Reply.Key per chat or channel, and quiet hours.

// PushChannel is a push-only transport (a WeCom, Feishu or DingTalk group
// robot, a webhook) and what it wants.
type PushChannel struct {
	// Transport sends; its Name ("wecom:lab") names the channel. Its Run is
	// not used.
	Transport Transport
	// Alerts are the alert kinds it gets (AlertKinds); nil means all.
	Alerts []string
	// Progress makes it also get started notices, progress and reports.
	Progress bool
	Quiet    QuietHours
}

// Wants reports whether the channel gets r.
func (c PushChannel) Wants(r Reply) bool {
	switch r.Kind {
	case KindAlert:
		return c.Alerts == nil || slices.Contains(c.Alerts, r.Alert)
	case KindProgress, KindNotice:
		return c.Progress
	}
	return false
}

// Permanent reports whether err says that trying again cannot help (a bad
// webhook key): errors with a Retryable() bool method that returns false.
// Other errors are taken as temporary.
func Permanent(err error) bool {
	var r interface{ Retryable() bool }
	return errors.As(err, &r) && !r.Retryable()
}

func (n *Notifier) now() time.Time {
	if n.opts.Now != nil {
		return n.opts.Now()
	}
	return time.Now()
}

// sendTo delivers r to one chat of a chat transport, minding its quiet
// hours and the replies it already got.
func (n *Notifier) sendTo(ctx context.Context, chat ChatKey, r Reply) {
	t := n.transports[chat.Transport]
	if t == nil {
		return
	}
	if q, ok := n.opts.Quiet[chat]; ok {
		switch d, until := q.Decide(n.now(), r); d {
		case Drop:
			n.log.Debug("quiet hours: progress not sent", "chat", chat.String(), "run", r.RunID)
			return
		case Hold:
			if n.opts.Outbox != nil && n.opts.Outbox.Has(chat.Transport) {
				// Stored with its hold: it survives a restart like any alert.
				if _, err := n.opts.Outbox.AddAt(context.WithoutCancel(ctx), chat, r, until); err == nil {
					n.log.Info("quiet hours: alert held", "chat", chat.String(), "run", r.RunID, "until", until.Format(time.RFC3339))
					return
				}
			}
			n.holdUntil(chat, r, until)
			return
		}
	}
	if n.sent.has(chat.String(), r.Key) {
		return
	}
	if err := n.dispatch(ctx, t, chat, r); err != nil {
		n.log.Error("deliver notice", "chat", chat.String(), "run", r.RunID, "err", err)
		return
	}
	n.sent.add(chat.String(), r.Key)
}

// holdUntil delivers r to chat when its quiet hours end.
func (n *Notifier) holdUntil(chat ChatKey, r Reply, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		n.log.Warn("quiet hours: alert not delivered, trainbot is shutting down", "chat", chat.String(), "run", r.RunID)
		return
	}
	n.log.Info("quiet hours: alert held", "chat", chat.String(), "run", r.RunID, "until", until.Format(time.RFC3339))
	var timer *time.Timer
	timer = time.AfterFunc(until.Sub(n.now()), func() {
		n.mu.Lock()
		i := slices.Index(n.held, timer)
		if i >= 0 {
			n.held = slices.Delete(n.held, i, i+1)
		}
		n.mu.Unlock()
		if i >= 0 {
			n.enqueue(item{reply: &r, to: &chat})
		}
	})
	n.held = append(n.held, timer)
}

// stopHeld drops the replies held for quiet hours (at shutdown).
func (n *Notifier) stopHeld() {
	n.mu.Lock()
	defer n.mu.Unlock()
	dropped := 0
	for _, t := range n.held {
		if t.Stop() {
			dropped++
		}
	}
	n.held = nil
	if dropped > 0 {
		n.log.Warn("quiet hours: held alerts not delivered at shutdown", "count", dropped)
	}
}

// startChannels starts one delivery loop per push channel.
func (n *Notifier) startChannels(ctx context.Context) {
	for _, c := range n.opts.Channels {
		w := &channelWorker{n: n, ch: c, name: c.Transport.Name(), wake: make(chan struct{}, 1), done: make(chan struct{})}
		n.workers = append(n.workers, w)
		go w.run(ctx)
	}
}

// pushChannels hands r to every push channel that wants it: alerts to the
// outbox (stored before they are sent, retried until delivered, across
// restarts, once per Key), anything else to the channel's own queue.
func (n *Notifier) pushChannels(ctx context.Context, r Reply) {
	for _, w := range n.workers {
		if !w.ch.Wants(r) {
			continue
		}
		if r.Kind == KindAlert && n.opts.Outbox != nil && n.opts.Outbox.Has(w.name) {
			at := time.Time{}
			switch d, until := w.ch.Quiet.Decide(n.now(), r); d {
			case Drop:
				continue
			case Hold:
				at = until
				n.log.Info("quiet hours: alert held", "channel", w.name, "run", r.RunID, "until", until.Format(time.RFC3339))
			}
			_, err := n.opts.Outbox.AddAt(context.WithoutCancel(ctx), ChatKey{Transport: w.name}, r, at)
			if err == nil {
				continue
			}
			n.log.Error("store alert; pushing it from memory", "channel", w.name, "err", err)
		}
		w.push(r)
	}
}

// closeChannels lets every channel deliver what it has queued, until ctx
// ends; then their loops are cancelled (by the notifier's cancel).
func (n *Notifier) closeChannels(ctx context.Context) error {
	for _, w := range n.workers {
		w.close()
	}
	var err error
	for _, w := range n.workers {
		select {
		case <-w.done:
		case <-ctx.Done():
			n.cancel()
			<-w.done
			err = ctx.Err()
		}
	}
	return err
}

// channelWorker delivers the replies of one push channel, in order,
// retrying each with a growing pause until it is delivered, refused for
// good, or the notifier stops. Progress replies get three tries.
type channelWorker struct {
	n    *Notifier
	ch   PushChannel
	name string
	wake chan struct{}
	done chan struct{}
	sent keySet // owned by run

	mu      sync.Mutex
	queue   []Reply
	held    []heldReply
	closing bool
}

type heldReply struct {
	r     Reply
	until time.Time
}

func (w *channelWorker) push(r Reply) {
	w.mu.Lock()
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	w.signal()
}

func (w *channelWorker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *channelWorker) close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.signal()
}

func (w *channelWorker) run(ctx context.Context) {
	defer close(w.done)
	log := w.n.log.With("channel", w.name)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		w.mu.Lock()
		lost := len(w.queue)
		held := len(w.held)
		w.mu.Unlock()
		if lost > 0 || held > 0 {
			log.Warn("push channel stopped with replies not delivered", "queued", lost, "held_for_quiet_hours", held)
		}
	}()
	for {
		w.mu.Lock()
		now := w.n.now()
		// Replies held for quiet hours whose time has come go first.
		var next time.Time
		keep := w.held[:0]
		var due []Reply
		for _, h := range w.held {
			if !h.until.After(now) {
				due = append(due, h.r)
				continue
			}
			keep = append(keep, h)
			if next.IsZero() || h.until.Before(next) {
				next = h.until
			}
		}
		w.held = keep
		if len(due) > 0 {
			w.queue = append(due, w.queue...)
		}
		var r Reply
		has := len(w.queue) > 0
		if has {
			r = w.queue[0]
			w.queue = w.queue[1:]
		}
		closing := w.closing
		w.mu.Unlock()
		if has {
			if !w.deliver(ctx, log, r) {
				return
			}
			continue
		}
		if closing || ctx.Err() != nil {
			return
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			if timer == nil {
				timer = time.NewTimer(next.Sub(now))
			} else {
				timer.Reset(next.Sub(now))
			}
			tc = timer.C
		}
		select {
		case <-w.wake:
		case <-tc:
		case <-ctx.Done():
			return
		}
	}
}

// deliver sends one reply with retries; it returns false when ctx ended.
func (w *channelWorker) deliver(ctx context.Context, log *slog.Logger, r Reply) bool {
	switch d, until := w.ch.Quiet.Decide(w.n.now(), r); d {
	case Drop:
		log.Debug("quiet hours: progress not pushed", "run", r.RunID)
		return true
	case Hold:
		log.Info("quiet hours: alert held", "run", r.RunID, "until", until.Format(time.RFC3339))
		w.mu.Lock()
		w.held = append(w.held, heldReply{r: r, until: until})
		w.mu.Unlock()
		return true
	}
	if w.sent.has("", r.Key) {
		return true
	}
	pause := w.n.opts.RetryPause
	tries := 0
	for {
		tries++
		err := w.ch.Transport.Send(ctx, 0, r)
		if err == nil {
			w.sent.add("", r.Key)
			if tries > 1 {
				log.Info("push delivered after retries", "run", r.RunID, "tries", tries)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if Permanent(err) {
			log.Error("push refused; not retrying", "run", r.RunID, "err", err)
			return true
		}
		if r.Kind != KindAlert && tries >= 3 {
			log.Warn("progress push not delivered", "run", r.RunID, "tries", tries, "err", err)
			return true
		}
		ra, _ := RetryAfter(err)
		wait := max(pause, ra)
		log.Warn("push failed, retrying", "run", r.RunID, "try", tries, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		pause = min(pause*2, w.n.opts.MaxRetryPause)
	}
}

// keySet remembers the reply keys delivered to each chat or channel, up to
// keySetMax each (the oldest are forgotten first).
type keySet struct {
	m map[string]*keyRing
}

const keySetMax = 4096

type keyRing struct {
	keys  map[string]bool
	order []string
}

func (s *keySet) has(chat, key string) bool {
	if key == "" || s.m == nil {
		return false
	}
	r := s.m[chat]
	return r != nil && r.keys[key]
}

func (s *keySet) add(chat, key string) {
	if key == "" {
		return
	}
	if s.m == nil {
		s.m = map[string]*keyRing{}
	}
	r := s.m[chat]
	if r == nil {
		r = &keyRing{keys: map[string]bool{}}
		s.m[chat] = r
	}
	if r.keys[key] {
		return
	}
	if len(r.order) >= keySetMax {
		delete(r.keys, r.order[0])
		r.order = r.order[1:]
	}
	r.keys[key] = true
	r.order = append(r.order, key)
}

package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// Subscriptions lists the chats that chose to get (or not get) pushes.
type Subscriptions interface {
	Subscriptions(ctx context.Context) ([]store.Subscription, error)
}

// NotifierOptions configure a Notifier.
type NotifierOptions struct {
	Transports []Transport
	// Always are chats that get every notice (the local console).
	Always        []ChatKey
	Subscriptions Subscriptions // may be nil
	// Outbox, when set, takes the KindAlert replies: they are stored before
	// they are sent and retried until delivered, across restarts.
	Outbox *Outbox
	Logger *slog.Logger
	// Retries is how many times a failed send is tried again (default 3),
	// with a doubling pause starting at RetryPause (default 1 s).
	Retries    int
	RetryPause time.Duration

	// Channels are push-only transports (group robots, webhooks). Each has
	// its own queue and retries alerts until they are delivered, so one
	// that is down or slow never holds up the others. See route.go.
	Channels []PushChannel
	// MaxRetryPause caps the pause between tries of a channel (default 5 min).
	MaxRetryPause time.Duration
	// Quiet are the quiet hours of chats of the chat transports.
	Quiet map[ChatKey]QuietHours
	// Now is the clock of quiet hours (default time.Now).
	Now func() time.Time
	// Charts, when set, draws the charts that go with the end-of-run report.
	Charts func(ctx context.Context, run *trainer.Run) []Image
	// Extremes, when set, reads the lowest and highest value of each metric
	// of a run, for the best metrics of the end-of-run report.
	Extremes func(ctx context.Context, runID int64) (map[string]store.Extremes, error)
}

// Notifier turns run events into messages and sends them to the chats that
// should see them: the chat that started the run, the Always chats, and
// every chat that subscribed (muted chats get alerts but no progress).
//
// Events are queued by OnEvent, which never blocks the supervisor, and
// turned into replies by one goroutine, in order. Alerts go to the outbox;
// other replies to a chat go to that chat's queue, sent in order by a
// goroutine of its own, so a chat that is slow or down holds up no alert,
// no push channel and no other chat. An alert for a chat whose queue is
// not empty joins the queue and goes to the outbox after the replies
// before it, so a chat gets its replies in order.
type Notifier struct {
	opts       NotifierOptions
	transports map[string]Transport
	log        *slog.Logger

	mu      sync.Mutex
	queue   []item
	wake    chan struct{}
	closing bool
	stopped bool // the loop has ended: what comes later is not queued
	cancel  context.CancelFunc
	done    chan struct{}

	held    []*time.Timer    // replies held for quiet hours (guarded by mu)
	workers []*channelWorker // one per push channel
	sent    keySet           // keys delivered per chat; owned by loop

	chats   map[ChatKey]*chatQueue // chats with replies being sent (guarded by mu)
	senders sync.WaitGroup         // one goroutine per chat in chats
}

// chatQueue holds the replies waiting for one chat.
type chatQueue struct {
	replies []queued
}

type queued struct {
	r      Reply
	outbox bool // an alert for the outbox, after the replies before it
}

// NewNotifier returns a notifier; Start begins delivery.
func NewNotifier(opts NotifierOptions) *Notifier {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Retries <= 0 {
		opts.Retries = 3
	}
	if opts.RetryPause <= 0 {
		opts.RetryPause = time.Second
	}
	if opts.MaxRetryPause <= 0 {
		opts.MaxRetryPause = 5 * time.Minute
	}
	n := &Notifier{opts: opts, transports: map[string]Transport{}, log: opts.Logger, wake: make(chan struct{}, 1), done: make(chan struct{}),
		chats: map[ChatKey]*chatQueue{}}
	for _, t := range opts.Transports {
		n.transports[t.Name()] = t
	}
	return n
}

// item is a queued run event or a ready-made reply.
type item struct {
	event *trainer.Event
	reply *Reply
	to    *ChatKey // only this chat (a reply held for quiet hours)
	// except names a transport whose chats do not get it (the one it is
	// about, which cannot deliver it).
	except string
}

// OnEvent queues a run event; it is a trainer.Listener.
func (n *Notifier) OnEvent(e trainer.Event) {
	n.enqueue(item{event: &e})
}

// Push queues a reply that is not about a run event (a GPU alert, a
// scheduled report). KindAlert replies go to every known chat, muted ones
// too; other kinds go to the Always chats and the subscribed ones.
func (n *Notifier) Push(r Reply) {
	n.enqueue(item{reply: &r})
}

// PushExcept is Push for every chat but those of the named transport: a
// notice that the transport stopped goes to the others.
func (n *Notifier) PushExcept(r Reply, transport string) {
	n.enqueue(item{reply: &r, except: transport})
}

func (n *Notifier) enqueue(it item) {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		n.late(it)
		return
	}
	n.queue = append(n.queue, it)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// late takes what comes after the notifier stopped (a run that ended late
// in a shutdown): an alert is stored in the outbox, with its quiet-hours
// hold, for every chat and push channel that should get it, and goes out
// at the next start; anything else is dropped with a warning. Nothing is
// sent: the transports may be gone.
func (n *Notifier) late(it item) {
	e := trainer.Event{Run: &trainer.Run{}}
	var r Reply
	if it.event != nil {
		e = *it.event
		var ok bool
		if r, ok = EventReply(e); !ok {
			return
		}
	} else {
		r = *it.reply
	}
	if r.Kind != KindAlert || n.opts.Outbox == nil {
		n.log.Warn("not sent: trainbot is shutting down", "run", r.RunID, "key", r.Key)
		return
	}
	ctx := context.Background()
	store := func(to ChatKey, q QuietHours) {
		if !n.opts.Outbox.Has(to.Transport) {
			n.log.Error("alert not delivered: trainbot is shutting down", "chat", to.String(), "run", r.RunID, "key", r.Key)
			return
		}
		d, until := q.Decide(n.now(), r)
		if d == Drop {
			return
		}
		if _, err := n.opts.Outbox.AddAt(ctx, to, r, until); err != nil {
			n.log.Error("alert not delivered: trainbot is shutting down", "chat", to.String(), "run", r.RunID, "key", r.Key, "err", err)
		}
	}
	var chats []ChatKey
	if it.to != nil {
		chats = []ChatKey{*it.to}
	} else {
		chats = n.targets(ctx, e, r.Kind)
	}
	for _, chat := range chats {
		if n.transports[chat.Transport] != nil && chat.Transport != it.except {
			store(chat, n.opts.Quiet[chat])
		}
	}
	if it.to != nil {
		return
	}
	for _, w := range n.workers {
		if w.ch.Wants(r) {
			store(ChatKey{Transport: w.name}, w.ch.Quiet)
		}
	}
}

// Start begins delivering queued events.
func (n *Notifier) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.startChannels(ctx)
	go n.loop(ctx)
}

// Close delivers what is queued (until ctx ends) and stops.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	n.stopHeld()
	select {
	case <-n.done:
	case <-ctx.Done():
		n.cancel()
		<-n.done
	}
	// The loop has ended: no chat gets a new sender.
	sent := make(chan struct{})
	go func() { n.senders.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-ctx.Done():
		n.cancel()
		<-sent
	}
	err := n.closeChannels(ctx)
	n.cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (n *Notifier) loop(ctx context.Context) {
	defer close(n.done)
	for {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		if len(q) == 0 && (n.closing || ctx.Err() != nil) {
			n.stopped = true
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		for _, it := range q {
			switch {
			case it.event != nil:
				n.deliver(ctx, *it.event)
			case it.to != nil:
				n.sendTo(ctx, *it.to, *it.reply)
			default:
				n.deliverReply(ctx, *it.reply, it.except)
			}
		}
		if len(q) > 0 {
			continue
		}
		select {
		case <-n.wake:
		case <-ctx.Done():
		}
	}
}

// deliver sends one event to its chats.
func (n *Notifier) deliver(ctx context.Context, e trainer.Event) {
	reply, ok := EventReply(e)
	if !ok {
		return
	}
	if e.Kind == trainer.EventEnded {
		n.completeEndReport(ctx, e, &reply)
	}
	for _, chat := range n.targets(ctx, e, reply.Kind) {
		n.sendTo(ctx, chat, reply)
	}
	n.pushChannels(ctx, reply)
}

// deliverReply sends a pushed reply to its chats but those of the
// transport except.
func (n *Notifier) deliverReply(ctx context.Context, r Reply, except string) {
	for _, chat := range n.targets(ctx, trainer.Event{Run: &trainer.Run{}}, r.Kind) {
		if chat.Transport != except {
			n.sendTo(ctx, chat, r)
		}
	}
	n.pushChannels(ctx, r)
}

// dispatch hands an alert to the outbox, which stores it before sending,
// and queues anything else for the chat's sender.
func (n *Notifier) dispatch(ctx context.Context, t Transport, chat ChatKey, r Reply) error {
	toOutbox := r.Kind == KindAlert && n.opts.Outbox != nil
	n.mu.Lock()
	q, busy := n.chats[chat]
	if toOutbox && !busy {
		n.mu.Unlock()
		_, err := n.opts.Outbox.Add(context.WithoutCancel(ctx), chat, r)
		if err == nil {
			return nil
		}
		n.log.Error("store alert; sending it directly", "chat", chat.String(), "err", err)
		toOutbox = false
		n.mu.Lock()
		q, busy = n.chats[chat]
	}
	// The chat's sender takes it, after what it has queued.
	if !busy {
		q = &chatQueue{}
		n.chats[chat] = q
	}
	q.replies = append(q.replies, queued{r: r, outbox: toOutbox})
	n.mu.Unlock()
	if !busy {
		n.senders.Add(1)
		go n.sendChat(ctx, t, chat, q)
	}
	return nil
}

// store hands an alert to the outbox; if it cannot be stored it is sent
// at once.
func (n *Notifier) store(ctx context.Context, t Transport, chat ChatKey, r Reply) {
	_, err := n.opts.Outbox.Add(context.WithoutCancel(ctx), chat, r)
	if err == nil {
		return
	}
	n.log.Error("store alert; sending it directly", "chat", chat.String(), "err", err)
	if err := n.send(ctx, t, chat.Chat, r); err != nil {
		n.log.Error("deliver alert", "chat", chat.String(), "run", r.RunID, "err", err)
	}
}

// sendChat sends the replies queued for a chat, in order, until the queue
// is empty.
func (n *Notifier) sendChat(ctx context.Context, t Transport, chat ChatKey, q *chatQueue) {
	defer n.senders.Done()
	for {
		n.mu.Lock()
		if len(q.replies) == 0 {
			delete(n.chats, chat)
			n.mu.Unlock()
			return
		}
		it := q.replies[0]
		q.replies = q.replies[1:]
		n.mu.Unlock()
		if it.outbox {
			n.store(ctx, t, chat, it.r)
			continue
		}
		if err := n.send(ctx, t, chat.Chat, it.r); err != nil {
			n.log.Error("deliver notice", "chat", chat.String(), "run", it.r.RunID, "err", err)
		}
	}
}

func (n *Notifier) send(ctx context.Context, t Transport, chat int64, r Reply) error {
	pause := n.opts.RetryPause
	var err error
	for attempt := 0; attempt <= n.opts.Retries; attempt++ {
		if err = t.Send(ctx, chat, r); err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt == n.opts.Retries || Permanent(err) {
			break
		}
		ra, _ := RetryAfter(err)
		wait := max(pause, ra)
		n.log.Warn("send failed, retrying", "transport", t.Name(), "chat", chat, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		pause *= 2
	}
	return err
}

// targets are the chats an event goes to, without duplicates.
func (n *Notifier) targets(ctx context.Context, e trainer.Event, kind Kind) []ChatKey {
	var out []ChatKey
	add := func(k ChatKey) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	origin, hasOrigin := parseChatKey(e.Run.Origin)
	// The starter already got the reply to 开始; an on_oom retry it did not ask for.
	startReplied := e.Kind == trainer.EventStarted && e.Run.RetryOf == 0
	for _, k := range n.opts.Always {
		if startReplied && hasOrigin && k == origin {
			continue
		}
		add(k)
	}
	if hasOrigin && !startReplied {
		add(origin)
	}
	if n.opts.Subscriptions != nil {
		// Read even when a shutdown that ran out of time cancelled ctx:
		// the alerts still queued are stored for every chat.
		subs, err := n.opts.Subscriptions.Subscriptions(context.WithoutCancel(ctx))
		if err != nil {
			n.log.Warn("read subscriptions", "err", err)
		}
		for _, s := range subs {
			k := ChatKey{Transport: s.Transport, Chat: s.Chat}
			if startReplied && hasOrigin && k == origin {
				continue
			}
			if s.Subscribed || kind == KindAlert {
				add(k)
			}
		}
	}
	return out
}

func parseChatKey(s string) (ChatKey, bool) {
	t, id, ok := strings.Cut(s, ":")
	if !ok || t == "" {
		return ChatKey{}, false
	}
	var chat int64
	if _, err := fmt.Sscan(id, &chat); err != nil {
		return ChatKey{}, false
	}
	return ChatKey{Transport: t, Chat: chat}, true
}

// EventReply is the message for a run event; ok is false for events that
// are not announced.
func EventReply(e trainer.Event) (Reply, bool) {
	r := e.Run
	switch e.Kind {
	case trainer.EventStarted:
		text := fmt.Sprintf("▶️ run #%d started: %s", r.ID, r.Job)
		if len(r.Params) > 0 {
			text += " " + paramsText(r.Params)
		}
		if r.StartedBy != "" {
			text += " (by " + r.StartedBy + ")"
		}
		return Reply{Text: text, Kind: KindNotice, RunID: r.ID, Buttons: startButtons(), Key: fmt.Sprintf("run:%d:started", r.ID)}, true
	case trainer.EventAttached:
		text := fmt.Sprintf("🔗 re-attached to run #%d (%s) — running for %s", r.ID, r.Job, units.Duration(r.Duration(e.At)))
		return Reply{Text: text, Kind: KindNotice, RunID: r.ID, Buttons: startButtons(), Key: fmt.Sprintf("run:%d:attached:%d", r.ID, e.At.Unix())}, true
	case trainer.EventAlert:
		a := e.Alert
		text := fmt.Sprintf("%s run #%d (%s): %s", OutcomeIcon(a.Kind), r.ID, r.Job, a.Text)
		var buttons [][]Button
		switch a.Kind {
		case trainer.OutcomeOOM:
			text = oomAlertText(e)
			buttons = oomButtons(e.Job, r)
		case trainer.OutcomeNaN:
			text = fmt.Sprintf("⚠️ run #%d (%s) has a NaN loss: %s", r.ID, r.Job, a.Text)
		case trainer.OutcomeStalled:
			text = fmt.Sprintf("⏸ run #%d (%s) looks stalled: %s", r.ID, r.Job, a.Text)
		}
		return Reply{Text: text, Kind: KindAlert, RunID: r.ID, Key: fmt.Sprintf("run:%d:alert:%s:%d", r.ID, a.Kind, e.At.Unix()),
			Alert: string(a.Kind), Buttons: buttons}, true
	case trainer.EventEnded:
		reply := Reply{Text: EndReport(e), Kind: KindAlert, RunID: r.ID, Key: fmt.Sprintf("run:%d:ended", r.ID), Alert: string(r.Outcome)}
		if _, advise := retryText(e); advise {
			reply.Buttons = oomButtons(e.Job, r)
		}
		return reply, true
	}
	return Reply{}, false
}

// EndReport describes how a run ended: outcome, duration, steps, final
// metrics, peak memory, the detail, and what on_oom did or what to try
// after running out of memory.
func EndReport(e trainer.Event) string { return endReport(e, "") }

// endReport is EndReport with a line of best metrics (BestText) after the
// final ones.
func endReport(e trainer.Event, best string) string {
	r := e.Run
	var b strings.Builder
	verb := string(r.Outcome)
	switch r.Outcome {
	case trainer.OutcomeOOM:
		verb = "ran out of memory"
	case trainer.OutcomeNaN:
		verb = "diverged (NaN loss)"
	case trainer.OutcomeStopped:
		verb = "stopped"
		if r.StoppedBy != "" {
			verb += " by " + r.StoppedBy
		}
	}
	fmt.Fprintf(&b, "%s run #%d (%s) %s after %s", OutcomeIcon(r.Outcome), r.ID, r.Job, verb, units.Duration(r.Duration(e.At)))
	if r.Steps > 0 {
		if r.Total > 0 {
			fmt.Fprintf(&b, " · step %d/%d", r.Steps, r.Total)
		} else {
			fmt.Fprintf(&b, " · %d steps", r.Steps)
		}
	}
	if e.Status != nil && len(e.Status.Last) > 0 {
		b.WriteString("\n" + metricsText(e.Status.Last, 6))
	}
	if best != "" {
		b.WriteString("\n" + best)
	}
	var mem []string
	if r.PeakGPUMem != nil {
		mem = append(mem, "peak GPU memory "+units.Bytes(*r.PeakGPUMem))
	}
	if r.PeakHostMem != nil {
		mem = append(mem, "peak host memory "+units.Bytes(*r.PeakHostMem))
	}
	if len(mem) > 0 {
		b.WriteString("\n" + strings.Join(mem, " · "))
	}
	if r.Outcome != trainer.OutcomeFinished && r.Outcome != trainer.OutcomeStopped && r.Detail != "" {
		b.WriteString("\n" + r.Detail)
	}
	line, advise := retryText(e)
	if line != "" {
		b.WriteString("\n" + line)
	}
	if advise {
		if adv := OOMAdvice(e.OOM, r, e.Job); len(adv) > 0 {
			b.WriteString("\nWhat to try:\n• " + strings.Join(adv, "\n• "))
		}
	}
	return b.String()
}

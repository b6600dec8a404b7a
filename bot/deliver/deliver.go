// Package deliver is trainbot's one delivery pipeline. Every outgoing
// message — a command's answer, a run's alert or end report, a notice, live
// progress — is an Envelope: a destination (a chat of a transport, or a
// push channel), a reply, a key, durable or not, and a time before which
// it is not sent. Post hands it over and never blocks.
//
// One lane per destination, with a goroutine of its own while it has work,
// owns what happens next: the order of the destination's replies,
// duplicate suppression by key, quiet-hour holds, the service's pace, and
// the only retry policy (Policy). A destination that is slow or down
// delays no other. Durable envelopes (alerts, end reports, notices,
// command answers) are written to the outbox before anything is sent, so
// they survive a restart and a 429 storm; ephemeral ones (live progress)
// stay in memory, and the newest replaces an unsent older one of the same
// key. A reply's charts go on a side path of its lane when the sender
// uploads them separately (chat.ChartUploader): a slow or refused upload
// holds back no later reply, and one that cannot be sent becomes one text
// that says why and how to draw the chart on the host.
//
// A refusal (chat.KindRefusal, the answer to someone who may not use the
// bot) follows the refusal rule (refusal.go): seldom, on a lane of its own,
// and only when it delays none of the chat's members.
//
// When the outcome of an attempt cannot be recorded (the disk is full),
// the lane still knows it in memory and does not send again; the record is
// retried every RecordRetry. Only a restart before it lands sends the
// reply once more: at most once more per restart.
package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Envelope is one reply for one destination.
type Envelope struct {
	To    chat.ChatKey
	Reply chat.Reply // Reply.Key is the envelope's key: sent to To once
	// Durable envelopes are stored in the outbox before they are sent and
	// tried until delivered (or refused for good), across restarts.
	// KindProgress replies are never durable.
	Durable bool
	// NotBefore holds the envelope until then (quiet hours); it holds
	// back none of the destination's other envelopes.
	NotBefore time.Time
	// Refused is, for a KindRefusal reply, who is refused (chat.User.Who):
	// the refusal rule tells each sender no once per chat per
	// RefusalEvery.
	Refused string
}

// Options configure a Pipeline.
type Options struct {
	Senders []chat.Sender
	// Store keeps durable envelopes (the store's outbox); nil keeps them in
	// memory only.
	Store  Store
	Logger *slog.Logger
	// Quiet are the quiet hours of destinations (a push channel is
	// chat.ChatKey{Transport: its name}).
	Quiet map[chat.ChatKey]QuietHours
	// Policy is the retry policy (DefaultPolicy when zero).
	Policy Policy
	// SendTimeout bounds one attempt (default 2 min).
	SendTimeout time.Duration
	// Keep is how long delivered envelopes stay in the outbox to suppress
	// duplicates (default 30 days).
	Keep time.Duration
	// RecordRetry is the pause between tries of an outbox write that
	// failed (default 2 s).
	RecordRetry time.Duration
	// RefusalEvery is how often one refused sender is told no in a chat
	// (default DefaultRefusalEvery, 10 minutes).
	RefusalEvery time.Duration
	// Now is the clock of quiet hours and of the refusal rule (default
	// time.Now).
	Now func() time.Time
	// Languages is the language of each destination's transport, for what
	// delivery itself says (charts that could not be sent).
	Languages i18n.Languages
}

// Pipeline delivers envelopes. New, Start, Post…, Close.
type Pipeline struct {
	opts    Options
	log     *slog.Logger
	smu     sync.RWMutex // guards senders, paces and quiet (Reconfigure)
	senders map[string]chat.Sender
	paces   map[string]*Pacer // per sender, shared by its lanes
	quiet   map[chat.ChatKey]QuietHours
	seq     atomic.Int64

	closing atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // lane goroutines

	mu           sync.Mutex // guards lanes, refusalLanes, and closing against a lane's start
	lanes        map[chat.ChatKey]*lane
	refusalLanes map[chat.ChatKey]*lane // refusals, apart from the members' lanes

	refusals *refusalGate
	rec      *recorder
}

// New returns a pipeline; Start begins delivery.
func New(opts Options) *Pipeline {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Policy == (Policy{}) {
		opts.Policy = DefaultPolicy
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 2 * time.Minute
	}
	if opts.Keep <= 0 {
		opts.Keep = 30 * 24 * time.Hour
	}
	if opts.RecordRetry <= 0 {
		opts.RecordRetry = 2 * time.Second
	}
	if opts.RefusalEvery <= 0 {
		opts.RefusalEvery = DefaultRefusalEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pipeline{opts: opts, log: opts.Logger.With("component", "deliver"), senders: map[string]chat.Sender{}, paces: map[string]*Pacer{},
		ctx: ctx, cancel: cancel, lanes: map[chat.ChatKey]*lane{}, refusalLanes: map[chat.ChatKey]*lane{}, refusals: newRefusalGate(opts.RefusalEvery)}
	for _, s := range opts.Senders {
		p.addSender(s)
	}
	p.quiet = opts.Quiet
	p.rec = newRecorder(p.log, opts.RecordRetry)
	return p
}

func (p *Pipeline) addSender(s chat.Sender) {
	p.senders[s.Name()] = s
	if pc, ok := s.(chat.Paced); ok {
		if _, all := pc.Pace(0); len(all) > 0 {
			p.paces[s.Name()] = NewPacer(all, nil, nil)
		}
	}
}

// sender is the sender of a transport, nil when there is none.
func (p *Pipeline) sender(name string) chat.Sender {
	p.smu.RLock()
	defer p.smu.RUnlock()
	return p.senders[name]
}

// Reconfigure replaces senders (a reload of the config: the push
// channels): the ones named in remove go, add come (replacing those of the
// same name), and quiet replaces the quiet hours. Messages already queued
// for a removed sender fail for good ("removed by a reload"); queued ones
// for a replaced one go out through the new one.
func (p *Pipeline) Reconfigure(remove []string, add []chat.Sender, quiet map[chat.ChatKey]QuietHours) {
	p.smu.Lock()
	defer p.smu.Unlock()
	for _, name := range remove {
		delete(p.senders, name)
		delete(p.paces, name)
	}
	for _, s := range add {
		p.addSender(s)
	}
	p.quiet = quiet
}

// Start prunes old delivered envelopes from the outbox, and hands the
// pending ones to their lanes, oldest first: what an earlier trainbot
// could not deliver goes out now.
func (p *Pipeline) Start() {
	p.rec.started.Store(true)
	go p.rec.run()
	if p.opts.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if n, err := p.opts.Store.PruneOutbox(ctx, time.Now().Add(-p.opts.Keep)); err != nil {
		p.log.Warn("prune outbox", "err", err)
	} else if n > 0 {
		p.log.Debug("outbox pruned", "items", n)
	}
	pending, err := p.opts.Store.PendingOutbox(ctx, "")
	if err != nil {
		p.log.Error("read outbox: undelivered messages wait for the next start", "err", err)
		return
	}
	orphans := map[string]int{}
	for _, row := range pending {
		s := p.sender(row.Transport)
		if s == nil {
			orphans[row.Transport]++
			continue
		}
		it, err := p.itemOf(row, s)
		if err != nil {
			// Only this program writes payloads; one that cannot be read
			// can never be sent, and must hold back nothing.
			p.log.Error("outbox item cannot be decoded; dropped", "id", row.ID, "key", row.Key, "err", err)
			id, now := row.ID, time.Now()
			p.rec.write(id, func(ctx context.Context) error { return p.opts.Store.MarkOutboxFailed(ctx, id, now, "undecodable") })
			continue
		}
		p.lane(it.env.To).add(it)
	}
	for name, n := range orphans {
		p.log.Warn("undelivered messages wait for a transport that is not configured", "transport", name, "messages", n)
	}
}

// Post hands an envelope over for delivery; it never blocks on a
// destination. A durable envelope is in the outbox when Post returns
// (unless the outbox cannot be written: then it is delivered from memory
// and the error logged). After Close, durable envelopes are only stored,
// for the next start; ephemeral ones are dropped.
func (p *Pipeline) Post(e Envelope) {
	if e.Reply.Empty() {
		return
	}
	s := p.sender(e.To.Transport)
	if s == nil {
		p.log.Debug("no such transport; not sent", "to", e.To.String(), "key", e.Reply.Key)
		return
	}
	if e.Reply.Kind == chat.KindRefusal {
		// Quiet hours let it through, as any answer to what was just typed.
		p.refuse(e)
		return
	}
	p.smu.RLock()
	q, ok := p.quiet[e.To]
	p.smu.RUnlock()
	if ok {
		switch d, until := q.Decide(p.opts.Now(), e.Reply); d {
		case Drop:
			p.log.Debug("quiet hours: not sent", "to", e.To.String(), "run", e.Reply.RunID)
			return
		case Hold:
			p.log.Info("quiet hours: held", "to", e.To.String(), "run", e.Reply.RunID, "until", until.Format(time.RFC3339))
			if until.After(e.NotBefore) {
				e.NotBefore = until
			}
		}
	}
	if e.Reply.Kind == chat.KindProgress {
		e.Durable = false
	}
	for _, it := range split(e, s) {
		p.post(it)
	}
}

// Answer returns what a receiver calls for each incoming message: the
// handler's answer, posted as a durable envelope to the message's chat
// (in a group, as a reply to the message). A refusal goes by the refusal
// rule instead: to the press itself when the message is a press its
// transport can answer (chat.Press), else to the chat, seldom.
func (p *Pipeline) Answer(h chat.Handler) func(context.Context, chat.Message) {
	return func(ctx context.Context, m chat.Message) {
		ctx, answered := chat.WithAnswer(ctx)
		defer answered() // what the handler left for later follows this answer
		r := h.Handle(ctx, m)
		if r.Empty() {
			return
		}
		if m.Group && r.ReplyTo == 0 {
			r.ReplyTo = m.ID
		}
		if r.Kind == chat.KindRefusal {
			p.answerRefusal(ctx, m, r)
			return
		}
		p.Post(Envelope{To: m.ChatKey(), Reply: r, Durable: true})
	}
}

// split cuts a reply whose charts the sender uploads separately into its
// text and its charts, each an envelope of its own (the charts' key is the
// reply's with "#charts").
func split(e Envelope, s chat.Sender) []*item {
	up, ok := s.(chat.ChartUploader)
	if !ok || !up.UploadsCharts() || len(e.Reply.Images) == 0 {
		return []*item{{env: e}}
	}
	if e.Reply.Text == "" {
		return []*item{{env: e, chart: true}}
	}
	text, charts := e, e
	text.Reply.Images = nil
	charts.Reply.Text = ""
	charts.Reply.Buttons = nil
	if e.Reply.Key != "" {
		charts.Reply.Key = e.Reply.Key + "#charts"
	}
	return []*item{{env: text}, {env: charts, chart: true}}
}

func (p *Pipeline) post(it *item) {
	e := it.env
	if e.Durable && p.opts.Store != nil {
		id, added, err := p.store(e)
		switch {
		case err != nil:
			p.log.Error("outbox: not stored; delivered from memory", "to", e.To.String(), "key", e.Reply.Key, "err", err)
		case !added:
			p.log.Debug("duplicate; not sent again", "to", e.To.String(), "key", e.Reply.Key)
			return
		default:
			it.id = id
		}
	}
	if p.closing.Load() {
		switch {
		case it.id != 0:
			p.log.Info("stored for the next start: trainbot is shutting down", "to", e.To.String(), "key", e.Reply.Key)
		case e.Durable:
			p.log.Error("not delivered: trainbot is shutting down", "to", e.To.String(), "run", e.Reply.RunID, "key", e.Reply.Key)
		default:
			p.log.Debug("not sent: trainbot is shutting down", "to", e.To.String(), "run", e.Reply.RunID)
		}
		return
	}
	p.lane(e.To).add(it)
}

// lane returns the destination's lane, made on first use.
func (p *Pipeline) lane(to chat.ChatKey) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.laneLocked(to)
}

// laneLocked is lane, with p.mu held.
func (p *Pipeline) laneLocked(to chat.ChatKey) *lane {
	l := p.lanes[to]
	if l == nil {
		p.smu.RLock()
		s, shared := p.senders[to.Transport], p.paces[to.Transport]
		p.smu.RUnlock()
		l = &lane{p: p, to: to, shared: shared, wake: make(chan struct{}, 1), uploaded: make(chan uploadResult, 1)}
		if pc, ok := s.(chat.Paced); ok {
			if own, _ := pc.Pace(to.Chat); len(own) > 0 {
				l.pace = NewPacer(own, nil, nil)
			}
		}
		p.lanes[to] = l
	}
	return l
}

// Close delivers what is due now, until ctx ends, and stops. What waits
// for a retry or for the end of quiet hours stays in the outbox for the
// next start; ephemeral envelopes are dropped. If ctx ends first, the
// attempts in flight are cancelled. It returns ctx's error then.
func (p *Pipeline) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing.Store(true)
	lanes := make([]*lane, 0, len(p.lanes)+len(p.refusalLanes))
	for _, l := range p.lanes {
		lanes = append(lanes, l)
	}
	for _, l := range p.refusalLanes {
		lanes = append(lanes, l)
	}
	p.mu.Unlock()
	for _, l := range lanes {
		l.signal()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		p.cancel()
		<-done
	}
	p.cancel()
	if n := p.rec.close(); n > 0 {
		p.log.Warn("messages delivered but not recorded as such: each may be sent once more at the next start", "messages", n)
	}
	return err
}

func (p *Pipeline) autoKey() string {
	return fmt.Sprintf("auto:%d:%d", time.Now().UnixNano(), p.seq.Add(1))
}

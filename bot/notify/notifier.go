// Package notify turns what happens to runs into envelopes for bot/deliver:
// run events (started, re-attached, alerts, ended) and pushed notices (GPU
// alerts, scheduled reports, trainbot's own trouble) go to the chats that
// should see them — the chat that started the run, the Always chats,
// every subscribed chat (muted ones get alerts but no progress), and the
// push channels that want their kind — and the ProgressPublisher keeps one
// live progress message per run. It decides who gets what and in which
// order; how and when it is delivered is bot/deliver's.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// Subscriptions lists the chats that chose to get (or not get) pushes.
type Subscriptions interface {
	// Subscriptions returns every chat that subscribed or muted.
	Subscriptions(ctx context.Context) ([]history.Subscription, error)
}

// Channel is a push channel (a WeCom, Feishu or DingTalk group robot, a
// webhook) and what it wants.
type Channel struct {
	// Name is the channel's sender name ("wecom:lab"); its destination is
	// chat.ChatKey{Transport: Name}.
	Name string
	// Alerts are the alert kinds it gets (chat.AlertKinds); nil means all.
	Alerts []string
	// Progress makes it also get started notices and reports.
	Progress bool
}

// Wants reports whether the channel gets r.
func (c Channel) Wants(r chat.Reply) bool {
	switch r.Kind {
	case chat.KindAlert:
		return c.Alerts == nil || slices.Contains(c.Alerts, r.Alert)
	case chat.KindProgress, chat.KindNotice:
		return c.Progress
	}
	return false
}

// Options configure a Notifier.
type Options struct {
	// Post hands an envelope to delivery (deliver.Pipeline.Post).
	Post func(deliver.Envelope)
	// Always are chats that get every notice (the local console).
	Always        []chat.ChatKey
	Subscriptions Subscriptions // may be nil
	Channels      []Channel
	// Charts, when set, draws the charts that go with an end report, in a
	// language (once per language among the report's destinations).
	Charts func(ctx context.Context, l i18n.Lang, run *trainer.Run) []chat.Image
	// Extremes, when set, reads the lowest and highest value of each metric
	// of a run, for the best metrics of the end report.
	Extremes func(ctx context.Context, runID int64) (map[string]history.Extremes, error)
	// OOMGrace is how long an out-of-memory alert waits for the end of its
	// run (default 3 s): a run that dies of it gets one message, its end
	// report, with what to try once.
	OOMGrace time.Duration
	// OnAlert, when set, hears of each alert posted, once whatever the
	// number of chats and channels it goes to (the /metrics counter).
	OnAlert func(kind string)
	// PageURL, when set, gives a run's web page address: the end report
	// gets a [网页 Open] button (render.PageButtons).
	PageURL func(runID int64) string
	// Languages is the language of each destination's transport (a push
	// channel's name is its transport): every event is worded once per
	// language among the chats it goes to.
	Languages i18n.Languages
	Logger    *slog.Logger
}

// Notifier turns run events and pushed notices into envelopes, in the
// order they came: one goroutine takes them from a queue that OnEvent
// fills without ever blocking the supervisor, so a run's end report is
// posted before the start of its on_oom retry.
type Notifier struct {
	opts Options
	log  *slog.Logger

	chMu        sync.Mutex
	replaced    bool      // SetChannels was called: channelsNow, not opts.Channels
	channelsNow []Channel // the push channels after a reload

	mu      sync.Mutex
	queue   []item
	wake    chan struct{}
	closing bool
	stopped bool // the loop ended: later items are handled by their caller
	cancel  context.CancelFunc
	done    chan struct{}

	// Owned by the loop (by late callers once it stopped, under mu).
	held    map[int64]heldAlert // out-of-memory alerts waiting for their run's end
	advised map[int64]bool      // runs whose OOM alert went out with the advice
}

type heldAlert struct {
	e     trainer.Event
	until time.Time
}

// item is a queued run event, a ready-made reply, or a reply worded per
// language.
type item struct {
	event *trainer.Event
	reply *chat.Reply
	words func(i18n.Lang) chat.Reply
	// except names a transport whose chats do not get it (the one it is
	// about, which cannot deliver it).
	except string
}

// New returns a notifier; Start begins posting.
func New(opts Options) *Notifier {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OOMGrace <= 0 {
		opts.OOMGrace = 3 * time.Second
	}
	return &Notifier{opts: opts, log: opts.Logger.With("component", "notify"), wake: make(chan struct{}, 1), done: make(chan struct{}),
		held: map[int64]heldAlert{}, advised: map[int64]bool{}}
}

// SetChannels replaces the push channels (a reload of the config).
func (n *Notifier) SetChannels(ch []Channel) {
	n.chMu.Lock()
	defer n.chMu.Unlock()
	n.replaced = true
	n.channelsNow = slices.Clone(ch)
}

// channels are the push channels in force.
func (n *Notifier) channels() []Channel {
	n.chMu.Lock()
	defer n.chMu.Unlock()
	if !n.replaced {
		return n.opts.Channels
	}
	return n.channelsNow
}

// OnEvent queues a run event; it is a trainer.Listener.
func (n *Notifier) OnEvent(e trainer.Event) { n.enqueue(item{event: &e}) }

// Push queues a reply that is not about a run event (a GPU alert, a
// scheduled report). KindAlert replies go to every known chat, muted ones
// too; other kinds go to the Always chats and the subscribed ones.
func (n *Notifier) Push(r chat.Reply) { n.enqueue(item{reply: &r}) }

// PushIn is Push for a reply worded in each language: words is called
// once per language among the chats it goes to.
func (n *Notifier) PushIn(words func(i18n.Lang) chat.Reply) { n.enqueue(item{words: words}) }

// GPUAlert queues a GPU alert (it is gpu.MonitorOptions.Alert), worded by
// render.GPUAlert in each chat's language: an Xid error is of kind
// chat.AlertXid, the thresholds crossed (memory, temperature) and ECC
// errors of chat.AlertGPU, so that push channels choose them apart.
func (n *Notifier) GPUAlert(a gpu.Alert) {
	kind := chat.AlertGPU // memory, temperature, ECC thresholds
	if a.Kind == gpu.AlertXid {
		kind = chat.AlertXid
	}
	n.PushIn(func(l i18n.Lang) chat.Reply {
		return chat.Reply{Kind: chat.KindAlert, Text: render.GPUAlert(l, a), RunID: a.RunID, Key: a.Key, Alert: kind}
	})
}

// PushExcept is Push for every chat but those of the named transport: a
// notice that the transport stopped goes to the others.
func (n *Notifier) PushExcept(r chat.Reply, transport string) {
	n.enqueue(item{reply: &r, except: transport})
}

// PushInExcept is PushIn for every chat but those of the named transport.
func (n *Notifier) PushInExcept(words func(i18n.Lang) chat.Reply, transport string) {
	n.enqueue(item{words: words, except: transport})
}

func (n *Notifier) enqueue(it item) {
	n.mu.Lock()
	if n.stopped {
		// A run that ended late in a shutdown: handled here, without
		// charts; delivery stores what is durable for the next start.
		defer n.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n.handle(ctx, it)
		n.flushHeld(ctx, time.Time{})
		return
	}
	n.queue = append(n.queue, it)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Start begins posting queued events.
func (n *Notifier) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go n.loop(ctx)
}

// Close posts what is queued (until ctx ends: then end reports go without
// charts) and stops.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	if n.cancel == nil {
		return nil
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
	select {
	case <-n.done:
		n.cancel()
		return nil
	case <-ctx.Done():
		n.cancel()
		<-n.done
		return ctx.Err()
	}
}

func (n *Notifier) loop(ctx context.Context) {
	defer close(n.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		closing := n.closing
		n.mu.Unlock()
		for _, it := range q {
			n.handle(ctx, it)
		}
		if closing || ctx.Err() != nil {
			n.mu.Lock()
			if len(n.queue) == 0 {
				n.flushHeld(ctx, time.Time{})
				n.stopped = true
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
			continue
		}
		next := n.flushHeld(ctx, time.Now())
		if len(q) > 0 {
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-n.wake:
		case <-timer.C:
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

// handle posts one event or reply.
func (n *Notifier) handle(ctx context.Context, it item) {
	if it.reply != nil {
		r := *it.reply
		n.post(ctx, trainer.Event{Run: &trainer.Run{}}, func(i18n.Lang) chat.Reply { return r }, it.except)
		return
	}
	if it.words != nil {
		n.post(ctx, trainer.Event{Run: &trainer.Run{}}, it.words, it.except)
		return
	}
	e := *it.event
	switch {
	case e.Kind == trainer.EventAlert && e.Alert != nil && e.Alert.Kind == trainer.OutcomeOOM:
		// The run is probably dying of it: its end report will say it all
		// in one message, unless the run goes on past the grace.
		n.held[e.Run.ID] = heldAlert{e: e, until: time.Now().Add(n.opts.OOMGrace)}
		return
	case e.Kind == trainer.EventEnded:
		n.ended(ctx, e)
		return
	}
	if _, ok := EventReply(i18n.ZhEn, e); ok {
		n.post(ctx, e, func(l i18n.Lang) chat.Reply { r, _ := EventReply(l, e); return r }, "")
	}
}

// ended posts a run's end report: with the best metrics and the charts,
// and what to try after running out of memory unless an alert or the
// report of the run it retries already said it.
func (n *Notifier) ended(ctx context.Context, e trainer.Event) {
	id := e.Run.ID
	if h, ok := n.held[id]; ok {
		delete(n.held, id)
		if e.Run.Outcome == trainer.OutcomeOOM {
			if e.OOM == nil {
				e.OOM = h.e.Alert.OOM
			}
		} else {
			n.postHeld(ctx, h) // it survived the OOM and ended otherwise: both are news
		}
	}
	// What to try is said once per chain of on_oom retries: by the first
	// run's report, and again only when on_oom gives up.
	advise := !n.advised[id] && (e.Retry == nil || e.Retry.Attempt == 0 || e.Retry.Next == "")
	delete(n.advised, id)
	var ext map[string]history.Extremes
	if n.opts.Extremes != nil && ctx.Err() == nil {
		var err error
		ext, err = n.opts.Extremes(ctx, id)
		if err != nil {
			n.log.Warn("read best metrics", "run", id, "err", err)
		}
	}
	n.post(ctx, e, func(l i18n.Lang) chat.Reply {
		r, _ := EventReply(l, e)
		r.Text = render.EndReport(l, e, render.BestText(l, ext, 4), advise)
		if n.opts.Charts != nil && ctx.Err() == nil {
			r.Images = append(r.Images, n.opts.Charts(ctx, l, e.Run)...)
		}
		r.Buttons = append(r.Buttons, render.PageButtons(l, n.opts.PageURL, id)...)
		return r
	}, "")
}

// flushHeld posts the held OOM alerts whose grace ended at now (all when
// now is zero) and returns when the next one's ends.
func (n *Notifier) flushHeld(ctx context.Context, now time.Time) time.Time {
	var next time.Time
	ids := make([]int64, 0, len(n.held))
	for id := range n.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		h := n.held[id]
		if !now.IsZero() && h.until.After(now) {
			if next.IsZero() || h.until.Before(next) {
				next = h.until
			}
			continue
		}
		delete(n.held, id)
		n.postHeld(ctx, h)
	}
	return next
}

func (n *Notifier) postHeld(ctx context.Context, h heldAlert) {
	if _, ok := EventReply(i18n.ZhEn, h.e); ok {
		n.advised[h.e.Run.ID] = true
		if len(n.advised) > 1000 {
			clear(n.advised) // runs that never ended here
		}
		n.post(ctx, h.e, func(l i18n.Lang) chat.Reply { r, _ := EventReply(l, h.e); return r }, "")
	}
}

// post hands the reply words says to delivery for every chat and push
// channel that gets it, worded in each one's language (once per
// language).
func (n *Notifier) post(ctx context.Context, e trainer.Event, words func(i18n.Lang) chat.Reply, except string) {
	if n.opts.Post == nil {
		return
	}
	worded := map[i18n.Lang]chat.Reply{}
	in := func(to chat.ChatKey) chat.Reply {
		l := n.opts.Languages.For(to.Transport)
		r, ok := worded[l]
		if !ok {
			r = words(l)
			worded[l] = r
		}
		return r
	}
	first := in(chat.ChatKey{}) // the kind and the alert are the same in every language
	if first.Kind == chat.KindAlert && n.opts.OnAlert != nil {
		n.opts.OnAlert(first.Alert)
	}
	durable := first.Kind != chat.KindProgress
	for _, to := range n.targets(ctx, e, first.Kind) {
		if to.Transport != except {
			n.opts.Post(deliver.Envelope{To: to, Reply: in(to), Durable: durable})
		}
	}
	for _, c := range n.channels() {
		if c.Wants(first) {
			to := chat.ChatKey{Transport: c.Name}
			n.opts.Post(deliver.Envelope{To: to, Reply: in(to), Durable: durable})
		}
	}
}

// targets are the chats an event goes to, without duplicates.
func (n *Notifier) targets(ctx context.Context, e trainer.Event, kind chat.Kind) []chat.ChatKey {
	var out []chat.ChatKey
	add := func(k chat.ChatKey) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	origin, hasOrigin := chat.ParseChatKey(e.Run.Origin)
	// The starter already got the answer to 开始; an on_oom retry it did not ask for.
	// A start from the queue was asked for long ago: the requester is told.
	startReplied := e.Kind == trainer.EventStarted && e.Run.RetryOf == 0 && e.Queued == nil
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
			k := chat.ChatKey{Transport: s.Transport, Chat: s.Chat}
			if startReplied && hasOrigin && k == origin {
				continue
			}
			if s.Subscribed || kind == chat.KindAlert {
				add(k)
			}
		}
	}
	return out
}

// EventReply is the message for a run event; ok is false for events that
// are not announced. An end report's text here has no best metrics (the
// Notifier adds them, and the charts). It is worded in l.
func EventReply(l i18n.Lang, e trainer.Event) (chat.Reply, bool) {
	r := e.Run
	switch e.Kind {
	case trainer.EventStarted:
		if r.Runner == trainer.RunnerWatch {
			text := l.T(i18n.Watching, r.ID, r.Job, r.LogPath)
			if r.PID > 0 {
				text += l.T(i18n.WatchingPID, r.PID)
			}
			return chat.Reply{Text: text, Kind: chat.KindNotice, RunID: r.ID, Key: fmt.Sprintf("run:%d:started", r.ID)}, true
		}
		text := l.T(i18n.RunStarted, r.ID, r.Job)
		if len(r.Params) > 0 {
			text += " " + render.ParamsText(r.Params)
		}
		if q := e.Queued; q != nil {
			text += l.T(i18n.FromQueue, q.ID, l.Duration(e.At.Sub(q.At)))
		}
		if r.StartedBy != "" {
			text += l.T(i18n.StartedBy, r.StartedBy)
		}
		return chat.Reply{Text: text, Kind: chat.KindNotice, RunID: r.ID, Buttons: render.StartButtons(l), Key: fmt.Sprintf("run:%d:started", r.ID)}, true
	case trainer.EventQueue:
		return chat.Reply{Text: "🗑 " + e.Queue.Text, Kind: chat.KindNotice, Key: fmt.Sprintf("queue:%d:dropped", e.Queue.Entry.ID)}, true
	case trainer.EventAttached:
		text := l.T(i18n.Reattached, r.ID, r.Job, l.Duration(r.Duration(e.At)))
		return chat.Reply{Text: text, Kind: chat.KindNotice, RunID: r.ID, Buttons: render.StartButtons(l), Key: fmt.Sprintf("run:%d:attached:%d", r.ID, e.At.Unix())}, true
	case trainer.EventAlert:
		a := e.Alert
		text := l.T(i18n.AlertLine, render.OutcomeIcon(a.Kind), r.ID, r.Job, a.Text)
		var buttons [][]chat.Button
		switch a.Kind {
		case trainer.OutcomeOOM:
			text = render.OOMAlertText(l, e)
			buttons = render.OOMButtons(l, e.Job, r, e.Fit)
		case trainer.OutcomeNaN:
			text = l.T(i18n.NaNAlert, r.ID, r.Job, nanDetail(l, a))
		case trainer.OutcomeStalled:
			text = l.T(i18n.StalledAlert, r.ID, r.Job, stallDetail(l, a))
		case trainer.OutcomeInterrupted:
			if u := a.Unsupervised; u != nil {
				text = l.T(i18n.Unsupervised, r.ID, r.Job, u.SupervisorPID, u.Processes, u.PGID, r.ID)
				buttons = [][]chat.Button{{{Label: l.Button(i18n.BtnStop), Data: fmt.Sprintf("/stop %d", r.ID)}}}
			}
		case trainer.OutcomeRule:
			text = l.T(i18n.RuleAlert, r.ID, r.Job, a.Text)
			buttons = [][]chat.Button{{{Label: l.Button(i18n.BtnPlot), Data: fmt.Sprintf("/plot %d", r.ID)}, {Label: l.Button(i18n.BtnStatus), Data: fmt.Sprintf("/status %d", r.ID)}}}
		}
		return chat.Reply{Text: text, Kind: chat.KindAlert, RunID: r.ID, Key: fmt.Sprintf("run:%d:alert:%s:%d", r.ID, a.Kind, e.At.Unix()),
			Alert: string(a.Kind), Buttons: buttons}, true
	case trainer.EventEnded:
		reply := chat.Reply{Text: render.EndReport(l, e, "", true), Kind: chat.KindAlert, RunID: r.ID, Key: fmt.Sprintf("run:%d:ended", r.ID), Alert: string(r.Outcome)}
		if _, retrying := render.RetryText(l, e); r.Outcome == trainer.OutcomeOOM && !retrying {
			reply.Buttons = render.OOMButtons(l, e.Job, r, e.Fit)
		}
		return reply, true
	}
	return chat.Reply{}, false
}

// nanDetail is what a NaN alert says of its streak, in l; the supervisor's
// English text when the alert does not carry the streak.
func nanDetail(l i18n.Lang, a *trainer.Alert) string {
	n := a.NaN
	if n == nil {
		return a.Text
	}
	return l.T(i18n.NaNStreak, n.Metric, fmt.Sprint(n.Value), n.Count, n.Step)
}

// stallDetail is what a stalled alert says of the silence, in l (a Slurm
// warning has no Stall: its text is the supervisor's).
func stallDetail(l i18n.Lang, a *trainer.Alert) string {
	st := a.Stall
	if st == nil {
		return a.Text
	}
	quiet, after := st.Quiet.String(), st.After.String()
	if l == i18n.Zh {
		quiet, after = l.Duration(st.Quiet), l.Duration(st.After)
	}
	return l.T(i18n.StallDetail, quiet, after)
}

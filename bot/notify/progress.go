package notify

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// ProgressOptions configure a ProgressPublisher.
type ProgressOptions struct {
	Trainer ActiveRuns
	// Post hands an envelope to delivery (deliver.Pipeline.Post).
	Post func(deliver.Envelope)
	// InPlace reports whether a transport shows a run's progress as one
	// message edited in place (chat.InPlaceProgress); nil: none does.
	InPlace       func(transport string) bool
	Subscriptions Subscriptions // may be nil
	// Interval between two updates of a run's progress (default 10 s).
	Interval time.Duration
	// Memory returns the newest memory sample of a run; nil or false when
	// there is none.
	Memory func(ctx context.Context, runID int64) (history.RunMemory, bool)
	// PageURL, when set, gives a run's web page address: the progress
	// message gets a [网页 Open] button (render.PageButtons).
	PageURL func(runID int64) string
	// Languages is the language of each transport's chats.
	Languages i18n.Languages
	Logger    *slog.Logger
}

// ProgressPublisher keeps a live progress message per run: every Interval
// it renders the status of each active run and posts it, as a KindProgress
// reply (ephemeral: the newest replaces an unsent older one), to the chat
// that started the run (on transports that edit in place, unless that chat
// muted pushes) and to every subscribed chat. A reply is posted only when
// its text changed. When the run ends, the chats
// that got its progress on a transport that edits in place get a final
// update with the outcome.
type ProgressPublisher struct {
	opts ProgressOptions
	log  *slog.Logger

	mu     sync.Mutex
	ended  []trainer.Event
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the loop goroutine.
	sent     map[sentKey]string // last text sent per chat and run
	finished map[int64]bool     // runs whose final update went out
}

type sentKey struct {
	chat chat.ChatKey
	run  int64
}

// NewProgressPublisher returns a publisher; Start begins publishing.
func NewProgressPublisher(opts ProgressOptions) *ProgressPublisher {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.InPlace == nil {
		opts.InPlace = func(string) bool { return false }
	}
	return &ProgressPublisher{opts: opts, log: opts.Logger.With("component", "progress"),
		wake: make(chan struct{}, 1), sent: map[sentKey]string{}, finished: map[int64]bool{}}
}

// OnEvent is a trainer.Listener: a run's end queues its final update.
func (p *ProgressPublisher) OnEvent(e trainer.Event) {
	if e.Kind != trainer.EventEnded || e.Run == nil {
		return
	}
	p.mu.Lock()
	p.ended = append(p.ended, e)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start begins publishing.
func (p *ProgressPublisher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.cancel = cancel
	p.done = make(chan struct{})
	p.mu.Unlock()
	go p.loop(ctx)
}

// Close posts the final updates of runs that ended and stops.
func (p *ProgressPublisher) Close(ctx context.Context) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	// The loop sends the final updates queued before this close marker.
	p.ended = append(p.ended, trainer.Event{})
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	<-done
	cancel()
	return ctx.Err()
}

func (p *ProgressPublisher) loop(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.publish(ctx)
		case <-p.wake:
		}
		p.mu.Lock()
		ended := p.ended
		p.ended = nil
		p.mu.Unlock()
		for _, e := range ended {
			if e.Run == nil {
				return // closed
			}
			p.final(ctx, e)
		}
	}
}

// publish sends the progress of every active run that changed.
func (p *ProgressPublisher) publish(ctx context.Context) {
	active := p.opts.Trainer.Active()
	if len(active) == 0 {
		return
	}
	var subs []history.Subscription
	if p.opts.Subscriptions != nil {
		var err error
		if subs, err = p.opts.Subscriptions.Subscriptions(ctx); err != nil {
			p.log.Warn("read subscriptions", "err", err)
		}
	}
	for _, st := range active {
		if p.finished[st.Run.ID] {
			continue
		}
		var mem *history.RunMemory
		if p.opts.Memory != nil {
			if m, ok := p.opts.Memory(ctx, st.Run.ID); ok {
				mem = &m
			}
		}
		texts := map[i18n.Lang]string{}
		for _, to := range p.targets(st.Run, subs) {
			l := p.opts.Languages.For(to.Transport)
			text, ok := texts[l]
			if !ok {
				text = render.ProgressText(l, st, mem)
				texts[l] = text
			}
			k := sentKey{chat: to, run: st.Run.ID}
			if p.sent[k] == text {
				continue
			}
			p.sent[k] = text
			buttons := append(render.StartButtons(l), render.PageButtons(l, p.opts.PageURL, st.Run.ID)...)
			p.post(to, chat.Reply{Text: text, Kind: chat.KindProgress, RunID: st.Run.ID, Buttons: buttons, Key: progressKey(st.Run.ID)})
		}
	}
}

// final replaces the progress of an ended run with its outcome.
func (p *ProgressPublisher) final(ctx context.Context, e trainer.Event) {
	id := e.Run.ID
	p.finished[id] = true
	if len(p.finished) > 1000 {
		for k := range p.finished {
			if k < id-500 {
				delete(p.finished, k)
			}
		}
	}
	for k := range p.sent {
		if k.run != id {
			continue
		}
		delete(p.sent, k)
		// Where progress is a line per update, the end report says it all.
		if p.opts.InPlace(k.chat.Transport) {
			text := render.FinalProgressText(p.opts.Languages.For(k.chat.Transport), e)
			p.post(k.chat, chat.Reply{Text: text, Kind: chat.KindProgress, RunID: id, Key: progressKey(id)})
		}
	}
}

func (p *ProgressPublisher) post(to chat.ChatKey, r chat.Reply) {
	if p.opts.Post != nil {
		p.opts.Post(deliver.Envelope{To: to, Reply: r})
	}
}

// progressKey is the key of a run's progress replies: the newest replaces
// the unsent one.
func progressKey(run int64) string { return fmt.Sprintf("run:%d:progress", run) }

// targets are the chats that get a run's progress: the chat that started
// it, on a transport that edits in place, unless it muted pushes; and every
// subscribed chat.
func (p *ProgressPublisher) targets(run *trainer.Run, subs []history.Subscription) []chat.ChatKey {
	var out []chat.ChatKey
	muted := map[chat.ChatKey]bool{}
	for _, s := range subs {
		k := chat.ChatKey{Transport: s.Transport, Chat: s.Chat}
		if s.Subscribed {
			out = append(out, k)
		} else {
			muted[k] = true
		}
	}
	if origin, ok := chat.ParseChatKey(run.Origin); ok && !muted[origin] {
		if p.opts.InPlace(origin.Transport) {
			found := false
			for _, k := range out {
				found = found || k == origin
			}
			if !found {
				out = append([]chat.ChatKey{origin}, out...)
			}
		}
	}
	return out
}

package bot

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// InPlaceProgress is implemented by transports that show the KindProgress
// replies of one run in one chat as a single message edited in place.
type InPlaceProgress interface {
	// ProgressInPlace reports whether a progress reply replaces the
	// previous one of the same run instead of adding a message.
	ProgressInPlace() bool
}

// ActiveRuns is what the progress publisher reads of the supervisor.
type ActiveRuns interface {
	Active() []trainer.Status
}

// ProgressOptions configure a ProgressPublisher.
type ProgressOptions struct {
	Trainer       ActiveRuns
	Transports    []Transport
	Subscriptions Subscriptions // may be nil
	// Interval between two updates of a run's progress (default 10 s).
	Interval time.Duration
	// Memory returns the newest memory sample of a run; nil or false when
	// there is none.
	Memory func(ctx context.Context, runID int64) (store.RunMemory, bool)
	Logger *slog.Logger
}

// ProgressPublisher keeps a live progress message per run: every Interval
// it renders the status of each active run and sends it, as a KindProgress
// reply, to the chat that started the run (on transports that edit in
// place, unless that chat muted pushes) and to every subscribed chat. A
// reply is sent only when its text changed. When the run ends, the chats
// that got its progress on a transport that edits in place get a final
// update with the outcome.
type ProgressPublisher struct {
	opts       ProgressOptions
	log        *slog.Logger
	transports map[string]Transport

	mu     sync.Mutex
	ended  []trainer.Event
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the loop goroutine.
	sent     map[progressKey]string // last text sent per chat and run
	finished map[int64]bool         // runs whose final update went out
}

type progressKey struct {
	chat ChatKey
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
	p := &ProgressPublisher{opts: opts, log: opts.Logger, transports: map[string]Transport{},
		wake: make(chan struct{}, 1), sent: map[progressKey]string{}, finished: map[int64]bool{}}
	for _, t := range opts.Transports {
		p.transports[t.Name()] = t
	}
	return p
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

// Close sends the final updates of runs that ended and stops; if ctx ends
// first, the update in flight is cancelled.
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
	var subs []store.Subscription
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
		var mem *store.RunMemory
		if p.opts.Memory != nil {
			if m, ok := p.opts.Memory(ctx, st.Run.ID); ok {
				mem = &m
			}
		}
		text := ProgressText(st, mem)
		for _, chat := range p.targets(st.Run, subs) {
			k := progressKey{chat: chat, run: st.Run.ID}
			if p.sent[k] == text {
				continue
			}
			r := Reply{Text: text, Kind: KindProgress, RunID: st.Run.ID, Buttons: startButtons(), Key: fmt.Sprintf("run:%d:progress", st.Run.ID)}
			if p.send(ctx, chat, r) {
				p.sent[k] = text
			}
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
	text := FinalProgressText(e)
	for k := range p.sent {
		if k.run != id {
			continue
		}
		delete(p.sent, k)
		// Where progress is a line per update, the end report says it all.
		if ip, ok := p.transports[k.chat.Transport].(InPlaceProgress); ok && ip.ProgressInPlace() {
			p.send(ctx, k.chat, Reply{Text: text, Kind: KindProgress, RunID: id, Key: fmt.Sprintf("run:%d:progress", id)})
		}
	}
}

func (p *ProgressPublisher) send(ctx context.Context, chat ChatKey, r Reply) bool {
	t := p.transports[chat.Transport]
	if t == nil {
		return false
	}
	// A progress update is worth little once the next one is due, but a
	// first message cut off while Telegram was answering would leave a
	// stray copy: give slow answers time.
	sctx, cancel := context.WithTimeout(ctx, max(p.opts.Interval, 15*time.Second))
	defer cancel()
	if err := t.Send(sctx, chat.Chat, r); err != nil {
		p.log.Warn("progress update not sent", "chat", chat.String(), "run", r.RunID, "err", err)
		return false
	}
	return true
}

// targets are the chats that get a run's progress: the chat that started
// it, on a transport that edits in place, unless it muted pushes; and every
// subscribed chat.
func (p *ProgressPublisher) targets(run *trainer.Run, subs []store.Subscription) []ChatKey {
	var out []ChatKey
	muted := map[ChatKey]bool{}
	for _, s := range subs {
		k := ChatKey{Transport: s.Transport, Chat: s.Chat}
		if s.Subscribed {
			out = append(out, k)
		} else {
			muted[k] = true
		}
	}
	if origin, ok := parseChatKey(run.Origin); ok && !muted[origin] {
		if ip, ok := p.transports[origin.Transport].(InPlaceProgress); ok && ip.ProgressInPlace() {
			found := false
			for _, k := range out {
				found = found || k == origin
			}
			if !found {
				out = append([]ChatKey{origin}, out...)
			}
		}
	}
	return out
}

// ProgressText is the live progress of a run: a bar with step/total, the
// loss, speed, ETA and memory.
//
//	▶️ run #12 · demo · running for 4m10s
//	▓▓▓▓░░░░░░ 41% · step 615/1500 · epoch 6/15
//	loss 0.0686 · 46 steps/s · ETA 19s
//	GPU 7.1 GiB / 80 GiB · peak 7.5 GiB
func ProgressText(st trainer.Status, mem *store.RunMemory) string {
	var b strings.Builder
	r := st.Run
	state := "running"
	if st.Stopping {
		state = "stopping"
	}
	fmt.Fprintf(&b, "▶️ run #%d · %s · %s for %s\n", r.ID, r.Job, state, units.Duration(st.Elapsed))
	pr := st.Progress
	var line []string
	switch {
	case pr.Step == 0:
		line = append(line, "waiting for the first metric")
	case pr.TotalSteps > 0:
		frac := float64(pr.Step) / float64(pr.TotalSteps)
		line = append(line, fmt.Sprintf("%s %d%%", ProgressBar(frac, 10), int(math.Floor(100*min(frac, 1)))),
			fmt.Sprintf("step %d/%d", pr.Step, pr.TotalSteps))
	default:
		line = append(line, fmt.Sprintf("step %d", pr.Step))
	}
	if !math.IsNaN(pr.Epoch) {
		if pr.TotalEpochs > 0 {
			line = append(line, fmt.Sprintf("epoch %s/%d", trimFloat(pr.Epoch), pr.TotalEpochs))
		} else {
			line = append(line, "epoch "+trimFloat(pr.Epoch))
		}
	}
	b.WriteString(strings.Join(line, " · ") + "\n")
	var stats []string
	if m, ok := st.Loss(); ok {
		stats = append(stats, m.Name+" "+units.Value(m.Value))
	}
	if st.StepsPerSec > 0 {
		stats = append(stats, fmt.Sprintf("%s steps/s", trimFloat(roundSig(st.StepsPerSec, 3))))
	}
	if st.ETA > 0 {
		stats = append(stats, "ETA "+units.Duration(st.ETA))
	}
	if len(stats) > 0 {
		b.WriteString(strings.Join(stats, " · ") + "\n")
	}
	if m := memoryText(r, mem); m != "" {
		b.WriteString(m + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// memoryText is "GPU 7.1 GiB / 80 GiB · peak 7.5 GiB", or host memory
// when there is no GPU, or "" when nothing was sampled.
func memoryText(r *trainer.Run, mem *store.RunMemory) string {
	var parts []string
	if mem != nil && mem.GPUBytes != nil {
		s := "GPU " + units.Bytes(*mem.GPUBytes)
		if mem.GPUTotal != nil && *mem.GPUTotal > 0 {
			s += " / " + units.Bytes(*mem.GPUTotal)
		}
		parts = append(parts, s)
	}
	if r.PeakGPUMem != nil {
		if len(parts) > 0 {
			parts = append(parts, "peak "+units.Bytes(*r.PeakGPUMem))
		} else {
			parts = append(parts, "GPU peak "+units.Bytes(*r.PeakGPUMem))
		}
	}
	if len(parts) == 0 {
		if mem != nil && mem.HostBytes != nil {
			parts = append(parts, "RAM "+units.Bytes(*mem.HostBytes))
		} else if r.PeakHostMem != nil {
			parts = append(parts, "RAM peak "+units.Bytes(*r.PeakHostMem))
		}
	}
	return strings.Join(parts, " · ")
}

// FinalProgressText replaces a run's live progress when it ends: the end
// report, with the bar where the run stopped.
func FinalProgressText(e trainer.Event) string {
	text := EndReport(e)
	r := e.Run
	if r.Total > 0 && r.Steps > 0 {
		frac := float64(r.Steps) / float64(r.Total)
		first, rest, _ := strings.Cut(text, "\n")
		bar := fmt.Sprintf("%s %d%%", ProgressBar(frac, 10), int(math.Floor(100*min(frac, 1))))
		text = first + "\n" + bar
		if rest != "" {
			text += "\n" + rest
		}
	}
	return text
}

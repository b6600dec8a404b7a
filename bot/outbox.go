package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/store"
)

// OutboxStore is what the outbox needs of the store.
type OutboxStore interface {
	EnqueueOutbox(ctx context.Context, it store.OutboxItem) (int64, bool, error)
	DueOutbox(ctx context.Context, transport string, now time.Time, limit int) ([]store.OutboxItem, error)
	NextOutboxAt(ctx context.Context, transport string) (time.Time, bool, error)
	MarkOutboxSent(ctx context.Context, id int64, at time.Time) error
	MarkOutboxRetry(ctx context.Context, id int64, next time.Time, lastError string) error
	PendingOutbox(ctx context.Context, transport string) ([]store.OutboxItem, error)
	MarkOutboxFailed(ctx context.Context, id int64, at time.Time, lastError string) error
	PruneOutbox(ctx context.Context, sentBefore time.Time) (int64, error)
}

var _ OutboxStore = (*store.Store)(nil)

// RetryAfterError is implemented by transport errors that say how long to
// wait before the next try (Telegram's 429 "retry_after").
type RetryAfterError interface {
	error
	// RetryAfter is the wait the chat service asked for.
	RetryAfter() time.Duration
}

// RetryAfter returns the wait an error asks for, if it asks for one.
func RetryAfter(err error) (time.Duration, bool) {
	var ra RetryAfterError
	if errors.As(err, &ra) {
		d := ra.RetryAfter()
		return d, d > 0
	}
	return 0, false
}

// OutboxOptions configure an Outbox.
type OutboxOptions struct {
	Store      OutboxStore
	Transports []Transport
	Logger     *slog.Logger
	// MinBackoff is the pause after a first failed attempt (default 2 s);
	// it doubles with every failure up to MaxBackoff (default 5 min). A
	// retry-after from the transport replaces it.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// SendTimeout bounds one attempt (default 2 min).
	SendTimeout time.Duration
	// Parallel is how many chats of one transport are delivered to at once
	// (default 4).
	Parallel int
	// Keep is how long delivered items are kept to de-duplicate (default 30
	// days).
	Keep time.Duration
}

// Outbox delivers replies that must not be lost (alerts). Add stores a
// reply before anything is sent; one delivery loop per transport sends the
// oldest pending reply of each chat, retries failures with a capped
// exponential backoff (or the wait the transport asked for) until they are
// delivered, and marks them sent. What is pending at shutdown is delivered
// at the next start. A reply with the same Key for the same chat is stored,
// and so delivered, once.
//
// It knows nothing of any chat service: every Transport (Telegram, a push
// robot, the console) gets the same store-and-retry.
type Outbox struct {
	opts  OutboxOptions
	log   *slog.Logger
	lanes map[string]*lane
	seq   atomic.Int64

	mu      sync.Mutex
	closing bool
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// lane is the delivery loop of one transport.
type lane struct {
	t    Transport
	wake chan struct{}

	mu sync.Mutex
	// unmarked are items tried whose outcome could not be recorded (the
	// disk is full): they are not tried again while their record is
	// retried, so a chat does not get one alert over and over.
	unmarked map[int64]func(context.Context) error
}

// NewOutbox returns an outbox; Start begins delivery.
func NewOutbox(opts OutboxOptions) *Outbox {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 2 * time.Minute
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.Keep <= 0 {
		opts.Keep = 30 * 24 * time.Hour
	}
	o := &Outbox{opts: opts, log: opts.Logger, lanes: map[string]*lane{}}
	for _, t := range opts.Transports {
		o.lanes[t.Name()] = &lane{t: t, wake: make(chan struct{}, 1), unmarked: map[int64]func(context.Context) error{}}
	}
	return o
}

// Start prunes old delivered items, reports pending items no configured
// transport can deliver, and starts one delivery loop per transport.
func (o *Outbox) Start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return
	}
	o.started = true
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	if n, err := o.opts.Store.PruneOutbox(ctx, time.Now().Add(-o.opts.Keep)); err != nil {
		o.log.Warn("prune outbox", "err", err)
	} else if n > 0 {
		o.log.Debug("outbox pruned", "items", n)
	}
	if pending, err := o.opts.Store.PendingOutbox(ctx, ""); err == nil {
		orphans := map[string]int{}
		for _, it := range pending {
			if o.lanes[it.Transport] == nil {
				orphans[it.Transport]++
			}
		}
		for name, n := range orphans {
			o.log.Warn("undelivered messages wait for a transport that is not configured", "transport", name, "messages", n)
		}
	}
	for _, l := range o.lanes {
		o.wg.Add(1)
		go o.run(ctx, l)
	}
}

// Add stores a reply for a chat and wakes its transport's delivery loop.
// It returns false when a reply with the same Key was already stored for
// that chat. A reply without a Key is never de-duplicated.
func (o *Outbox) Add(ctx context.Context, chat ChatKey, r Reply) (bool, error) {
	return o.AddAt(ctx, chat, r, time.Time{})
}

// Has reports whether the outbox delivers to the named transport.
func (o *Outbox) Has(transport string) bool { return o.lanes[transport] != nil }

// AddAt is Add for a reply held until notBefore (quiet hours); a held reply
// holds back none of the chat's other replies.
func (o *Outbox) AddAt(ctx context.Context, chat ChatKey, r Reply, notBefore time.Time) (bool, error) {
	l := o.lanes[chat.Transport]
	if l == nil {
		return false, fmt.Errorf("outbox: no transport %q", chat.Transport)
	}
	payload, err := encodeReply(r)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	key := r.Key
	if key == "" {
		key = fmt.Sprintf("auto:%d:%d", time.Now().UnixNano(), o.seq.Add(1))
	}
	_, added, err := o.opts.Store.EnqueueOutbox(ctx, store.OutboxItem{Transport: chat.Transport, Chat: chat.Chat, Key: key, Payload: payload, NotBefore: notBefore})
	if err != nil {
		return false, err
	}
	if added {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return added, nil
}

// Close delivers what is due now, then stops. Replies waiting for a retry
// stay stored and are delivered at the next start. If ctx ends first the
// attempts in flight are cancelled.
func (o *Outbox) Close(ctx context.Context) error {
	o.mu.Lock()
	o.closing = true
	started := o.started
	o.mu.Unlock()
	if !started {
		return nil
	}
	for _, l := range o.lanes {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
		o.cancel()
		return nil
	case <-ctx.Done():
		o.cancel()
		<-done
		return ctx.Err()
	}
}

func (o *Outbox) isClosing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// run is the delivery loop of one transport.
func (o *Outbox) run(ctx context.Context, l *lane) {
	defer o.wg.Done()
	name := l.t.Name()
	for {
		unmarked := o.recordAgain(ctx, l)
		items, err := o.opts.Store.DueOutbox(ctx, name, time.Now(), o.opts.Parallel+unmarked)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			o.log.Error("read outbox", "transport", name, "err", err)
			items = nil
		}
		items = l.skipUnmarked(items)
		if len(items) > 0 {
			o.deliverAll(ctx, l, items)
			continue
		}
		if o.isClosing() || ctx.Err() != nil {
			if unmarked > 0 {
				o.log.Warn("messages delivered but not recorded as such: they may be sent again at the next start", "transport", name, "messages", unmarked)
			}
			return
		}
		wait := time.Hour
		if err != nil || unmarked > 0 {
			wait = o.opts.MinBackoff // and record them again
		} else if at, ok, err := o.opts.Store.NextOutboxAt(ctx, name); err != nil {
			wait = o.opts.MinBackoff
		} else if ok {
			wait = max(time.Until(at), time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-l.wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// record writes the outcome of an attempt; when it cannot be written the
// item is held back from delivery until it can (recordAgain).
func (o *Outbox) record(ctx context.Context, l *lane, id int64, log *slog.Logger, write func(context.Context) error) {
	if err := write(ctx); err != nil {
		log.Error("outbox: outcome not recorded; the message is held back until it is", "err", err)
		l.mu.Lock()
		l.unmarked[id] = write
		l.mu.Unlock()
	}
}

// recordAgain tries once more to record the outcomes that could not be,
// and returns how many still cannot.
func (o *Outbox) recordAgain(ctx context.Context, l *lane) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, write := range l.unmarked {
		if write(context.WithoutCancel(ctx)) == nil {
			delete(l.unmarked, id)
		}
	}
	return len(l.unmarked)
}

// skipUnmarked drops the items whose last outcome is not recorded yet.
func (l *lane) skipUnmarked(items []store.OutboxItem) []store.OutboxItem {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unmarked) == 0 {
		return items
	}
	return slices.DeleteFunc(items, func(it store.OutboxItem) bool { return l.unmarked[it.ID] != nil })
}

// deliverAll delivers items of different chats at once.
func (o *Outbox) deliverAll(ctx context.Context, l *lane, items []store.OutboxItem) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { o.deliver(ctx, l, it) })
	}
	wg.Wait()
}

func (o *Outbox) deliver(ctx context.Context, l *lane, it store.OutboxItem) {
	log := o.log.With("transport", it.Transport, "chat", it.Chat, "key", it.Key)
	// Bookkeeping must land even when delivery is being cancelled.
	bctx := context.WithoutCancel(ctx)
	r, err := decodeReply(it.Payload)
	if err != nil {
		// Only this program writes payloads; one that cannot be read can
		// never be sent, and must not hold back the chat's later replies.
		log.Error("outbox item cannot be decoded; dropped", "id", it.ID, "err", err)
		now := time.Now()
		o.record(bctx, l, it.ID, log, func(ctx context.Context) error { return o.opts.Store.MarkOutboxSent(ctx, it.ID, now) })
		return
	}
	sctx, cancel := context.WithTimeout(ctx, o.opts.SendTimeout)
	err = l.t.Send(sctx, it.Chat, r)
	cancel()
	if err == nil {
		now := time.Now()
		o.record(bctx, l, it.ID, log, func(ctx context.Context) error { return o.opts.Store.MarkOutboxSent(ctx, it.ID, now) })
		if it.Attempts > 0 {
			log.Info("delivered after retries", "attempts", it.Attempts+1)
		}
		return
	}
	if ctx.Err() != nil {
		return // shutting down: not the message's fault; it stays as it was
	}
	if Permanent(err) {
		// Trying again cannot help (a bad webhook key, a chat that does not
		// exist): give up on this one so it holds back nothing.
		now, text := time.Now(), err.Error()
		o.record(bctx, l, it.ID, log, func(ctx context.Context) error { return o.opts.Store.MarkOutboxFailed(ctx, it.ID, now, text) })
		log.Error("refused for good; not retrying", "attempt", it.Attempts+1, "err", err)
		return
	}
	delay := o.backoff(it.Attempts)
	if ra, ok := RetryAfter(err); ok {
		delay = ra
	}
	next, text := time.Now().Add(delay), err.Error()
	o.record(bctx, l, it.ID, log, func(ctx context.Context) error { return o.opts.Store.MarkOutboxRetry(ctx, it.ID, next, text) })
	log.Warn("not delivered yet, will retry", "attempt", it.Attempts+1, "retry_in", delay, "err", err)
}

// backoff is the pause after the given number of earlier failures.
func (o *Outbox) backoff(failures int) time.Duration {
	d := o.opts.MinBackoff
	for i := 0; i < failures && d < o.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.opts.MaxBackoff)
}

// storedReply is how a Reply is kept in the outbox.
type storedReply struct {
	Text    string           `json:"text,omitempty"`
	Images  []storedImage    `json:"images,omitempty"`
	Buttons [][]storedButton `json:"buttons,omitempty"`
	Kind    Kind             `json:"kind"`
	Alert   string           `json:"alert,omitempty"`
	RunID   int64            `json:"run_id,omitempty"`
	Key     string           `json:"key,omitempty"`
}

type storedImage struct {
	Name    string `json:"name"`
	PNG     []byte `json:"png"`
	Caption string `json:"caption,omitempty"`
}

type storedButton struct {
	Label string `json:"label"`
	Data  string `json:"data"`
}

func encodeReply(r Reply) ([]byte, error) {
	s := storedReply{Text: r.Text, Kind: r.Kind, Alert: r.Alert, RunID: r.RunID, Key: r.Key}
	for _, img := range r.Images {
		s.Images = append(s.Images, storedImage(img))
	}
	for _, row := range r.Buttons {
		var out []storedButton
		for _, b := range row {
			out = append(out, storedButton(b))
		}
		s.Buttons = append(s.Buttons, out)
	}
	return json.Marshal(s)
}

func decodeReply(b []byte) (Reply, error) {
	var s storedReply
	if err := json.Unmarshal(b, &s); err != nil {
		return Reply{}, err
	}
	r := Reply{Text: s.Text, Kind: s.Kind, Alert: s.Alert, RunID: s.RunID, Key: s.Key}
	for _, img := range s.Images {
		r.Images = append(r.Images, Image(img))
	}
	for _, row := range s.Buttons {
		var out []Button
		for _, b := range row {
			out = append(out, Button(b))
		}
		r.Buttons = append(r.Buttons, out)
	}
	return r, nil
}

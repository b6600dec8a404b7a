// Package gpufree tells a chat once when the GPUs it waits for are free
// (通知空闲 [n] [memory], /notifyfree): n GPUs, each with at least that
// much free memory, that a run could be given right now.
//
// What "free" means is not decided here: Met, which the caller wires to
// the GPU chooser, says whether a request could be met now and with which
// GPUs (quiet for [gpu] free_for, held by no trainbot run), from the
// snapshot the GPU monitor already took. The Watcher keeps the chats'
// requests, asks Met every Every while there is at least one (never
// without), posts one message in the chat's language when a request is
// met and forgets it. A request expires after TTL (a day) unless the chat
// sends it again, which renews it; the chat is then told, once, that the
// wait ended. Requests are kept in the State (trainbot.db's state table),
// one JSON value, so a restart keeps them.
package gpufree

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Met reports whether n GPUs, each with at least memory bytes free (0: any),
// could be given to a run right now, and which (NVML indices). It must be
// cheap: it reads a snapshot, it does not sample.
type Met func(n int, memory uint64) (indices []int, ok bool)

// KV keeps small values across restarts (trainbot.db's state table; see
// bot/inbound.KV).
type KV interface {
	// Get returns the value of key, and whether there is one.
	Get(ctx context.Context, key string) (string, bool, error)
	// Set stores value under key.
	Set(ctx context.Context, key, value string) error
}

// Options configure a Watcher.
type Options struct {
	// Met says whether a request can be met now; required.
	Met Met
	// State keeps the requests across restarts; nil keeps them in memory.
	State KV
	// Post sends a message to a chat (the delivery pipeline, durable);
	// nil sends nothing.
	Post func(chat.ChatKey, chat.Reply)
	// Every is how often the requests are checked (default 2 s).
	Every time.Duration
	// TTL is how long a request waits unless renewed (default 24 h).
	TTL time.Duration
	// Languages words the messages in each transport's language.
	Languages i18n.Languages
	Logger    *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Limits and defaults.
const (
	MaxPerChat   = 5  // requests one chat may have at once
	MaxGPUs      = 64 // the most GPUs one request may ask for
	DefaultEvery = 2 * time.Second
	DefaultTTL   = 24 * time.Hour
	// StateKey is the State key the requests are kept under.
	StateKey = "gpufree.watches"
)

// Errors of Watch.
var (
	// ErrTooMany: the chat already has MaxPerChat requests.
	ErrTooMany = errors.New("gpufree: the chat already waits for as many GPU sets as it may")
	// ErrBadCount: n is not from 1 to MaxGPUs.
	ErrBadCount = errors.New("gpufree: the number of GPUs is out of range")
)

// watch is one chat's request, as kept in the State.
type watch struct {
	Chat    chat.ChatKey `json:"-"`
	ChatKey string       `json:"chat"` // Chat.String()
	N       int          `json:"n"`
	Memory  uint64       `json:"memory,omitempty"`
	Who     string       `json:"who,omitempty"`
	Since   time.Time    `json:"since"`
	Expires time.Time    `json:"expires"`
}

// state is the State's value.
type state struct {
	Version int     `json:"version"`
	Watches []watch `json:"watches"`
}

type request struct {
	n      int
	memory uint64
}

func (w watch) request() request { return request{w.N, w.Memory} }

// Watcher keeps the chats' requests and tells them when they are met.
type Watcher struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	loaded     bool
	loadFailed bool // a load failed; said once
	watches    []watch

	life   sync.Mutex // Start and Close
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Watcher; Start starts its checks.
func New(o Options) *Watcher {
	o.Every = cmp.Or(o.Every, DefaultEvery)
	o.TTL = cmp.Or(o.TTL, DefaultTTL)
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{opts: o, log: log.With("component", "gpufree")}
}

// Watch adds the chat's request for n GPUs with memory bytes free each
// (0: any), or renews it when the chat has it already (renewed), and
// returns when it expires. who is who asked, for the log.
func (w *Watcher) Watch(ctx context.Context, key chat.ChatKey, who string, n int, memory uint64) (expires time.Time, renewed bool, err error) {
	if n < 1 || n > MaxGPUs {
		return time.Time{}, false, fmt.Errorf("%w: %d, want 1 to %d", ErrBadCount, n, MaxGPUs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.load(ctx); err != nil {
		return time.Time{}, false, err
	}
	now := w.opts.Now()
	expires = now.Add(w.opts.TTL)
	before := slices.Clone(w.watches)
	live, at := 0, -1
	for i, x := range w.watches {
		switch {
		case x.Chat != key:
		case x.N == n && x.Memory == memory:
			at = i
		case now.Before(x.Expires):
			live++
		}
	}
	switch {
	case at >= 0 && now.Before(w.watches[at].Expires):
		renewed = true
		w.watches[at].Expires, w.watches[at].Who = expires, who
	case live >= MaxPerChat:
		return time.Time{}, false, ErrTooMany
	case at >= 0: // expired and not yet dropped: asked anew
		w.watches[at] = watch{Chat: key, N: n, Memory: memory, Who: who, Since: now, Expires: expires}
	default:
		w.watches = append(w.watches, watch{Chat: key, N: n, Memory: memory, Who: who, Since: now, Expires: expires})
	}
	if err := w.save(ctx); err != nil {
		w.watches = before
		return time.Time{}, false, err
	}
	w.log.Info("waiting for free GPUs", "chat", key.String(), "who", who, "n", n, "memory", memory, "until", expires, "renewed", renewed)
	return expires, renewed, nil
}

// Cancel drops every request of the chat and returns how many there were.
func (w *Watcher) Cancel(ctx context.Context, key chat.ChatKey) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.load(ctx); err != nil {
		return 0, err
	}
	before := slices.Clone(w.watches)
	w.watches = slices.DeleteFunc(w.watches, func(x watch) bool { return x.Chat == key })
	n := len(before) - len(w.watches)
	if n == 0 {
		return 0, nil
	}
	if err := w.save(ctx); err != nil {
		w.watches = before
		return 0, err
	}
	w.log.Info("no longer waiting for free GPUs", "chat", key.String(), "cancelled", n)
	return n, nil
}

// Start starts checking the requests every Every; Close stops it. A
// second Start does nothing.
func (w *Watcher) Start() {
	w.life.Lock()
	defer w.life.Unlock()
	if w.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go w.loop(ctx, w.done)
}

// Close stops the checks and waits for the one under way. The requests
// stay in the State for the next start.
func (w *Watcher) Close() error {
	w.life.Lock()
	defer w.life.Unlock()
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	<-w.done
	return nil
}

func (w *Watcher) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(w.opts.Every)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check drops the expired requests, asks Met about the others (once per
// distinct request; not at all when there is none), and posts what
// happened: one message per request met or expired.
func (w *Watcher) check(ctx context.Context) {
	w.mu.Lock()
	if err := w.load(ctx); err != nil {
		// Tried again at each check; said once, not every 2 s.
		first := !w.loadFailed
		w.loadFailed = true
		w.mu.Unlock()
		if first {
			w.log.Warn("read the GPU watches; trying again at each check", "err", err)
		}
		return
	}
	var asks []request
	now := w.opts.Now()
	for _, x := range w.watches {
		if now.Before(x.Expires) && !slices.Contains(asks, x.request()) {
			asks = append(asks, x.request())
		}
	}
	some := len(w.watches) > 0
	w.mu.Unlock()
	if !some {
		return // no request: no Met call
	}

	// Met is called without the lock: a slow one delays no 通知空闲.
	type answer struct {
		indices []int
		ok      bool
	}
	met := map[request]answer{}
	for _, q := range asks {
		idx, ok := w.opts.Met(q.n, q.memory)
		met[q] = answer{idx, ok}
	}

	w.mu.Lock()
	now = w.opts.Now()
	type post struct {
		w       watch
		indices []int
		met     bool
	}
	var posts []post
	w.watches = slices.DeleteFunc(w.watches, func(x watch) bool {
		if !now.Before(x.Expires) {
			posts = append(posts, post{w: x})
			return true
		}
		if a := met[x.request()]; a.ok {
			posts = append(posts, post{w: x, indices: a.indices, met: true})
			return true
		}
		return false
	})
	if len(posts) > 0 {
		// Saved before the posts: a crash between them loses a message
		// rather than sending it twice.
		if err := w.save(ctx); err != nil {
			w.log.Warn("save the GPU watches", "err", err)
		}
	}
	w.mu.Unlock()

	for _, p := range posts {
		l := w.opts.Languages.For(p.w.Chat.Transport)
		var r chat.Reply
		if p.met {
			w.log.Info("GPUs free", "chat", p.w.Chat.String(), "who", p.w.Who, "n", p.w.N, "memory", p.w.Memory, "gpus", p.indices, "waited", now.Sub(p.w.Since))
			r = FreeNow(l, p.w.N, p.w.Memory, p.indices)
			r.Key = fmt.Sprintf("gpufree:%d:%d:%d", p.w.N, p.w.Memory, now.UnixNano())
		} else {
			w.log.Info("GPU watch expired", "chat", p.w.Chat.String(), "who", p.w.Who, "n", p.w.N, "memory", p.w.Memory)
			r = Expired(l, p.w.N, p.w.Memory, p.w.Expires.Sub(p.w.Since))
			r.Key = fmt.Sprintf("gpufree:%d:%d:expired:%d", p.w.N, p.w.Memory, p.w.Expires.UnixNano())
		}
		if w.opts.Post != nil {
			w.opts.Post(p.w.Chat, r)
		}
	}
}

// load reads the requests from the State once; w.mu is held. A value that
// cannot be read is logged and replaced at the next save: a broken value
// must not stop 通知空闲 for good.
func (w *Watcher) load(ctx context.Context) error {
	if w.loaded {
		return nil
	}
	if w.opts.State == nil {
		w.loaded = true
		return nil
	}
	v, found, err := w.opts.State.Get(ctx, StateKey)
	if err != nil {
		return fmt.Errorf("read %s: %w", StateKey, err)
	}
	w.loaded = true
	if !found || v == "" {
		return nil
	}
	var s state
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		w.log.Warn("the GPU watches kept in the state cannot be read; starting without them", "key", StateKey, "err", err)
		return nil
	}
	for _, x := range s.Watches {
		key, ok := chat.ParseChatKey(x.ChatKey)
		if !ok || x.N < 1 || x.N > MaxGPUs {
			w.log.Warn("a GPU watch kept in the state is dropped", "chat", x.ChatKey, "n", x.N)
			continue
		}
		x.Chat = key
		w.watches = append(w.watches, x)
	}
	return nil
}

// save writes the requests to the State; w.mu is held.
func (w *Watcher) save(ctx context.Context) error {
	if w.opts.State == nil {
		return nil
	}
	s := state{Version: 1, Watches: make([]watch, len(w.watches))}
	for i, x := range w.watches {
		x.ChatKey = x.Chat.String()
		s.Watches[i] = x
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the GPU watches: %w", err)
	}
	if err := w.opts.State.Set(context.WithoutCancel(ctx), StateKey, string(data)); err != nil {
		return fmt.Errorf("save %s: %w", StateKey, err)
	}
	return nil
}

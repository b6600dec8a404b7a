// Package inbound is what the long-connection transports (WeCom, DingTalk,
// Feishu) share on their way in: the messengers push each message over a
// WebSocket and push it again when it is not acknowledged in time, and
// their ids are strings where trainbot's chats are numbers.
//
//   - IDs maps a messenger's string id (a chat, a user) to a stable number
//     and back, across restarts, so the pipeline, subscriptions and the
//     outbox keep working with chat.ChatKey.
//   - Seen drops a message id already handled; the newest ids are kept in
//     the store, so a restart does not answer a re-pushed message twice.
//   - Queue hands each message on at once (the reader acknowledges without
//     waiting for the answer) and handles one chat's messages in order,
//     chats in parallel (Telegram's updates go through it too).
//   - Loop runs a transport's connections one after another, with
//     reconnect.Loop's backoff (reset once a session proved healthy), until
//     its context ends or the service refuses it for good.
package inbound

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/reconnect"
)

// KV keeps small values across restarts (the store's key-value table).
type KV interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Set(ctx context.Context, key, value string) error
}

// Number is the stable positive number of a string id: the first 62 bits
// of its FNV-1a hash (positive, so it never looks like a Telegram group).
func Number(ref string) int64 {
	h := fnv.New64a()
	h.Write([]byte(ref))
	return int64(h.Sum64() >> 2)
}

// IDs maps a transport's string ids to numbers and back. Lookups of the
// numbers seen since the start are answered from memory; older ones from
// the KV, where each is written once.
type IDs struct {
	prefix string
	kv     KV

	mu    sync.Mutex
	known map[int64]string
}

// NewIDs returns the ids of transport name; kv may be nil (memory only).
func NewIDs(name string, kv KV) *IDs {
	return &IDs{prefix: name + ".id.", kv: kv, known: map[int64]string{}}
}

// Number returns ref's number and remembers ref for Ref.
func (s *IDs) Number(ctx context.Context, ref string) (int64, error) {
	n := Number(ref)
	s.mu.Lock()
	old, ok := s.known[n]
	if !ok && len(s.known) < maxKnown {
		s.known[n] = ref
	}
	s.mu.Unlock()
	if ok {
		if old != ref {
			return 0, fmt.Errorf("ids %q and %q have the same number %d", old, ref, n)
		}
		return n, nil
	}
	if s.kv == nil {
		return n, nil
	}
	key := s.prefix + fmt.Sprint(n)
	if v, found, err := s.kv.Get(ctx, key); err == nil && found {
		if v != ref {
			return 0, fmt.Errorf("ids %q and %q have the same number %d", v, ref, n)
		}
		return n, nil
	}
	if err := s.kv.Set(context.WithoutCancel(ctx), key, ref); err != nil {
		return n, fmt.Errorf("remember id %d: %w", n, err)
	}
	return n, nil
}

// Ref returns the string id of n, when it was seen (since the start, or
// before when there is a KV).
func (s *IDs) Ref(ctx context.Context, n int64) (string, bool) {
	s.mu.Lock()
	ref, ok := s.known[n]
	s.mu.Unlock()
	if ok || s.kv == nil {
		return ref, ok
	}
	v, found, err := s.kv.Get(ctx, s.prefix+fmt.Sprint(n))
	if err != nil || !found {
		return "", false
	}
	s.mu.Lock()
	if len(s.known) < maxKnown {
		s.known[n] = v
	}
	s.mu.Unlock()
	return v, true
}

// maxKnown bounds the ids held in memory.
const maxKnown = 100_000

// Seen remembers the newest message ids of a transport, in memory and in
// the KV (one value, written on each new id), so that a message pushed
// again — after a slow acknowledgement, a reconnect or a restart — is
// handled once.
type Seen struct {
	key string
	kv  KV
	max int

	mu    sync.Mutex
	order []string
	set   map[string]bool
}

// NewSeen returns the seen ids of transport name, read back from kv (nil:
// memory only); it keeps the newest max (default 512).
func NewSeen(ctx context.Context, name string, kv KV, max int) *Seen {
	if max <= 0 {
		max = 512
	}
	s := &Seen{key: name + ".seen", kv: kv, max: max, set: map[string]bool{}}
	if kv != nil {
		if v, ok, err := kv.Get(ctx, s.key); err == nil && ok && v != "" {
			for _, id := range strings.Split(v, "\n") {
				s.add(id)
			}
		}
	}
	return s
}

// First reports whether id is new, and remembers it. An empty id is
// always new (nothing to compare).
func (s *Seen) First(ctx context.Context, id string) bool {
	if id == "" {
		return true
	}
	s.mu.Lock()
	if s.set[id] {
		s.mu.Unlock()
		return false
	}
	s.add(strings.ReplaceAll(id, "\n", " "))
	v := strings.Join(s.order, "\n")
	s.mu.Unlock()
	if s.kv != nil {
		// Best effort: the memory still drops repeats until a restart.
		_ = s.kv.Set(context.WithoutCancel(ctx), s.key, v)
	}
	return true
}

func (s *Seen) add(id string) {
	if s.set[id] {
		return
	}
	s.set[id] = true
	s.order = append(s.order, id)
	if len(s.order) > s.max {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
}

// maxQueue bounds the messages waiting in one chat; more are dropped.
const maxQueue = 100

// Queue runs jobs one chat at a time, in order, and chats in parallel; its
// owner calls Wait before it returns.
type Queue struct {
	log *slog.Logger

	mu     sync.Mutex
	queues map[int64][]func()
	wg     sync.WaitGroup
}

// NewQueue returns an empty queue; log (nil: none) gets dropped jobs and
// panics.
func NewQueue(log *slog.Logger) *Queue {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{log: log, queues: map[int64][]func(){}}
}

// Add queues job for chat and returns at once.
func (q *Queue) Add(chat int64, job func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	jobs, busy := q.queues[chat]
	if len(jobs) >= maxQueue {
		q.log.Warn("too many messages waiting in one chat; dropped", "chat", chat)
		return
	}
	q.queues[chat] = append(jobs, job)
	if !busy {
		q.wg.Add(1)
		go q.work(chat)
	}
}

// Wait waits until every queued job is done.
func (q *Queue) Wait() { q.wg.Wait() }

func (q *Queue) work(chat int64) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		jobs := q.queues[chat]
		if len(jobs) == 0 {
			delete(q.queues, chat)
			q.mu.Unlock()
			return
		}
		job := jobs[0]
		q.queues[chat] = jobs[1:]
		q.mu.Unlock()
		q.run(job)
	}
}

func (q *Queue) run(job func()) {
	defer func() {
		if v := recover(); v != nil {
			q.log.Error("panic while handling a message", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	job()
}

// Loop is how a long-connection transport receives: sessions one after
// another until ctx ends, each a connection read until it fails, with
// reconnect.Loop's backoff between them.
type Loop struct {
	Log *slog.Logger
	// MinBackoff is the pause after a lost session; it doubles with each
	// loss in a row up to MaxBackoff (jittered by up to a fifth, shorter
	// only). A session that proved healthy (it called healthy: a frame
	// came, a ping was answered) starts over: the next loss waits
	// MinBackoff again. Every loss is logged as a warning.
	MinBackoff, MaxBackoff time.Duration
	// Stable, when set, counts a session that lasted that long as healthy
	// even though it never said so (for a session that cannot tell).
	Stable time.Duration
	// Grace is how long messages being handled may take to finish once
	// ctx ends.
	Grace time.Duration
	// Link, when set, is told of each lost session (the session says Up
	// when it is connected), for the transport's chat.Linked.
	Link *chat.LinkState
}

// errClosed is a session that ended without an error while ctx goes on.
var errClosed = errors.New("connection closed")

// Run runs session until ctx ends or it returns a permanent error
// (chat.IsPermanent: refused credentials, another instance took over),
// which Run returns. session gets hand, which queues a message for
// deliver (one chat at a time, in order) and returns at once, so the
// connection's reader can acknowledge without waiting for the answer, and
// healthy, which it calls once the connection has proved healthy. A
// press (chat.Message.Press) is answered with nothing once delivered,
// unless the handling answered it. A chat.RetryAfter error's wait is kept
// when it is longer than the backoff.
func (l Loop) Run(ctx context.Context, deliver func(context.Context, chat.Message), session func(ctx context.Context, hand func(chat.Message), healthy func()) error) error {
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	q := NewQueue(l.Log)
	defer func() {
		finished := make(chan struct{})
		go func() { q.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(l.Grace):
			l.Log.Warn("stopping the messages still being handled")
			hcancel()
			<-finished
		}
	}()
	hand := func(m chat.Message) {
		q.Add(m.Chat, func() {
			if m.Press != nil {
				defer m.Press.Answer(hctx, "") // unless the handling answered it
			}
			deliver(hctx, m)
		})
	}
	loop := reconnect.Loop{Log: l.Log, Link: l.Link, Stable: l.Stable,
		Backoff: reconnect.Backoff{Initial: l.MinBackoff, Max: l.MaxBackoff, Jitter: 0.2}}
	return loop.Run(ctx, func(ctx context.Context, healthy func()) error {
		err := session(ctx, hand, healthy)
		if err == nil && ctx.Err() == nil {
			err = errClosed // a lost connection, not the end
		}
		return err
	})
}

package command

import (
	"context"
	"log/slog"
	"sync"

	"github.com/trainbot/trainbot/bot/chat"
)

// Later answers a command a second time, after its reply: work whose
// outcome comes seconds later (存档's new checkpoint file) runs in a
// goroutine Later owns, so that the chat's next command is not held
// behind it, and its answer is posted to the chat the command came from.
// Close cancels what still waits and waits for it; an answer cut short
// by Close is not posted.
type Later struct {
	post   func(to chat.Message, r chat.Reply)
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

// NewLater returns a Later that posts with post (deliver's pipeline: to
// m's chat, as an answer to m in a group).
func NewLater(post func(to chat.Message, r chat.Reply), log *slog.Logger) *Later {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Later{post: post, log: log, ctx: ctx, cancel: cancel}
}

// Go runs work for message m and posts its reply, once the answer to m
// handled in ctx is posted (chat.Answered): the chat gets the two in
// order. False when Later is closed (the caller answers inline then).
func (l *Later) Go(ctx context.Context, m chat.Message, work func(ctx context.Context) chat.Reply) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	answered := chat.Answered(ctx)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				l.log.Error("a later answer panicked", "panic", p, "chat", m.Chat)
			}
		}()
		r := work(l.ctx)
		if answered != nil {
			select {
			case <-answered:
			case <-l.ctx.Done():
			}
		}
		if l.ctx.Err() != nil || r.Empty() {
			return
		}
		if m.Group && r.ReplyTo == 0 {
			r.ReplyTo = m.ID
		}
		l.post(m, r)
	}()
	return true
}

// Close cancels the work still waiting and waits for it.
func (l *Later) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	return nil
}

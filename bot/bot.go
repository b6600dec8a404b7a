// Package bot is trainbot's chat-independent core: the Message and Reply
// types every transport speaks, the Router that turns a message into a reply
// (authorise, parse, run the command), and the Notifier that pushes run
// events (started, alerts, ended) to the chats that want them. Alerts go
// through the Outbox, which stores them before sending and retries them
// until delivered, across restarts; the ProgressPublisher keeps one live
// progress message per run.
//
// Transports (bot/console, bot/telegram, …) implement Transport. The
// router reaches the trainer, the history and the charts through small
// interfaces declared here, so tests can replace any of them.
package bot

import (
	"context"
	"strconv"
	"time"
)

// User is who sent a message.
type User struct {
	ID   int64
	Name string
}

// Message is one thing a user sent: text, or the data of a pressed button.
type Message struct {
	Transport string // "console", "telegram", …
	Chat      int64
	User      User
	Text      string // the text, or the data of the pressed button
	Callback  bool   // Text came from a button press
	Local     bool   // from the local terminal: the user is the operator
	Group     bool   // a group chat
}

// ChatKey identifies a chat across transports.
func (m Message) ChatKey() ChatKey { return ChatKey{Transport: m.Transport, Chat: m.Chat} }

// ChatKey identifies a chat across transports.
type ChatKey struct {
	Transport string
	Chat      int64
}

func (k ChatKey) String() string { return k.Transport + ":" + strconv.FormatInt(k.Chat, 10) }

// Button is an inline button. Data is sent back as the text of a message
// when it is pressed; a transport without buttons shows Data as the word to
// type.
type Button struct {
	Label string
	Data  string
}

// Image is a chart.
type Image struct {
	Name    string // file name, e.g. "run-12-loss.png"
	PNG     []byte
	Caption string
}

// Kind says what a reply is, so a transport can treat alerts and live
// progress differently (retry until delivered, edit in place).
type Kind int

// Reply kinds.
const (
	KindReply    Kind = iota // an answer to a message
	KindAlert                // a run alert: must be delivered
	KindProgress             // a live progress update of a run
	KindNotice               // a run started or other news
)

// Reply is what the bot says.
type Reply struct {
	Text    string
	Images  []Image
	Buttons [][]Button // rows
	Kind    Kind
	RunID   int64 // the run this is about, 0 if none
	// Key de-duplicates pushes: two replies with the same non-empty Key for
	// the same chat are delivered once.
	Key string
	// Alert says what a KindAlert reply is about ("oom", "failed", "gpu", …;
	// see AlertKinds), so that push channels get only the kinds they want.
	Alert string
}

// Empty reports whether there is nothing to send.
func (r Reply) Empty() bool { return r.Text == "" && len(r.Images) == 0 }

// Handler answers messages.
type Handler interface {
	// Handle answers one message. It never returns an empty reply for a
	// command; it may for a message it ignores.
	Handle(ctx context.Context, m Message) Reply
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) Reply

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m Message) Reply { return f(ctx, m) }

// Transport connects the bot to a chat system.
type Transport interface {
	// Name is the transport's name in messages and subscriptions ("console").
	Name() string
	// Run receives messages and answers them with h until ctx ends or the
	// input ends; it returns nil at the end of input.
	Run(ctx context.Context, h Handler) error
	// Send delivers a reply to a chat outside of a conversation (alerts,
	// progress). It returns when the reply is delivered or has failed.
	Send(ctx context.Context, chat int64, r Reply) error
}

// Sleep waits for d or until ctx ends, whichever comes first; it returns
// ctx.Err() when ctx ended first. Transports pace and back off with it.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

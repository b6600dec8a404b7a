// Package chat is the vocabulary trainbot's chats speak, and the leaf every
// transport imports: the Message a user sent, the Reply the bot says, the
// command words, alert kinds and severities, and the two small interfaces
// a transport implements — a Receiver delivers incoming messages, a Sender
// makes one attempt to deliver a reply and says what happened (sent, try
// again after a while, or refused for good, with the reason).
//
// What to send to whom, when, how often to try and in which order is not
// decided here nor in the transports: bot/notify turns run events into
// envelopes and bot/deliver owns their delivery.
package chat

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// User is who sent a message.
type User struct {
	ID   int64
	Name string
	// Ref is the messenger's own id of the user where it is not a number
	// (a Feishu open_id "ou_…", a DingTalk staffId, a WeCom userid): the
	// id the owner puts in [auth], and the one a stranger is told. ID is
	// then a stable number derived from it, for the audit.
	Ref string
}

// Who is the id a user is told and the owner writes in [auth]: Ref when
// the messenger has one, else ID.
func (u User) Who() string {
	if u.Ref != "" {
		return u.Ref
	}
	return strconv.FormatInt(u.ID, 10)
}

// Message is one thing a user sent: text, or the data of a pressed button.
type Message struct {
	Transport string // "console", "telegram", …
	Chat      int64
	ID        int64 // the message's id in its chat, 0 when the transport has none
	User      User
	Text      string // the text, or the data of the pressed button
	Callback  bool   // Text came from a button press
	Local     bool   // from the local terminal: the user is the operator
	Group     bool   // a group chat
	// Edited says the message is an edit of one sent before (Telegram's
	// edited_message), not a new one: the command in it was read when it
	// was first sent.
	Edited bool
	// Channel says the message is a post in a channel: nobody in
	// particular sent it, and User names the channel (ID 0).
	Channel bool
	// Press, on a button press that the transport can answer on its own,
	// with a note only the presser sees (Telegram's answerCallbackQuery
	// toast, Feishu's card toast), is that answer; nil otherwise.
	Press Press
}

// Press is a button press waiting for its answer. The transport answers it
// with nothing once the message is handled, unless it was answered before.
type Press interface {
	// Answer shows text to the presser alone ("": nothing, the press is
	// only acknowledged). A press has one answer: the call that gives it
	// reports true; a later one, or one that comes too late for the
	// service, reports false (text was not shown).
	Answer(ctx context.Context, text string) bool
}

// ChatKey identifies the chat of a message.
func (m Message) ChatKey() ChatKey { return ChatKey{Transport: m.Transport, Chat: m.Chat} }

// ChatKey identifies a chat across transports; a push channel is
// ChatKey{Transport: "wecom:lab"} (its one chat is 0).
type ChatKey struct {
	Transport string
	Chat      int64
}

func (k ChatKey) String() string { return k.Transport + ":" + strconv.FormatInt(k.Chat, 10) }

// ParseChatKey reads "transport:id", as ChatKey.String writes it.
func ParseChatKey(s string) (ChatKey, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return ChatKey{}, false
	}
	id, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return ChatKey{}, false
	}
	return ChatKey{Transport: s[:i], Chat: id}, true
}

// Button is an inline button. Data is sent back as the text of a message
// when it is pressed; a transport without buttons shows Data as the word to
// type. A button with a URL opens that address instead (Telegram's URL
// button; the terminal and push channels show the address).
type Button struct {
	Label string
	Data  string
	URL   string
}

// Image is a chart.
type Image struct {
	Name    string // file name, e.g. "run-12-loss.png"
	PNG     []byte
	Caption string
	// Command draws the same chart on the host ("trainbot plot 12 -o
	// run-12-loss.png"): what a chat that could not get the image is told.
	Command string
}

// Kind says what a reply is, so that delivery and transports can treat
// alerts and live progress differently.
type Kind int

// Reply kinds.
const (
	KindReply    Kind = iota // an answer to a message
	KindAlert                // a run alert: must be delivered
	KindProgress             // a live progress update of a run: the newest replaces the older
	KindNotice               // a run started or other news
	// KindRefusal is the answer to someone who may not use the bot.
	// Delivery sends it as bot/deliver's refusal rule says (seldom, and
	// never ahead of or instead of the answers of those who may).
	KindRefusal
)

// Reply is what the bot says.
type Reply struct {
	Text    string
	Images  []Image
	Buttons [][]Button // rows
	Kind    Kind
	RunID   int64 // the run this is about, 0 if none
	// Key names the reply: delivery sends a reply with a given Key to a
	// chat once (and a KindProgress reply replaces the unsent one with the
	// same Key). Push channels show it (the webhook's "key").
	Key string
	// Alert says what a KindAlert reply is about ("oom", "failed", "gpu", …;
	// see AlertKinds), so that push channels get only the kinds they want.
	Alert string
	// ReplyTo is the message this answers (Message.ID), in a group; 0: none.
	ReplyTo int64
}

// Empty reports whether there is nothing to send.
func (r Reply) Empty() bool { return r.Text == "" && len(r.Images) == 0 }

// Handler answers messages (the command router).
type Handler interface {
	// Handle answers one message. It never returns an empty reply for a
	// command; it may for a message it ignores.
	Handle(ctx context.Context, m Message) Reply
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) Reply

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m Message) Reply { return f(ctx, m) }

// Sleep waits for d or until ctx ends, whichever comes first; it returns
// ctx.Err() when ctx ended first.
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

// Package wecom is trainbot's two-way WeCom (企业微信) transport: a
// 智能机器人 (AI bot) in API mode over its outbound long connection, so a
// training server behind NAT needs no public IP and no callback URL.
//
// There is no Go SDK; the client follows @wecom/aibot-node-sdk 1.0.7 on
// github.com/gorilla/websocket, with one writer at a time. Every frame is
// JSON {cmd, headers:{req_id}, body}; each request gets a receipt with the
// same req_id and an errcode. The client subscribes with aibot_subscribe
// {bot_id, secret}, pings every 30 s (two missed receipts: the link is
// dead), takes aibot_msg_callback and aibot_event_callback frames, and
// reconnects with a capped exponential backoff (1 s doubling to 30 s). A
// refused secret, and a disconnected_event (another instance took the bot
// over: one live connection per bot), stop it for good: two instances must
// not evict each other forever.
//
// As a chat.Receiver it drops a message id already handled (inbound.Seen,
// kept in the store) and hands each message on at once, one chat at a time
// in order. As a chat.Sender each Send is one attempt: the answer to a
// message is an aibot_respond_msg stream reply on the message's req_id,
// finished in one frame, with its charts inline (base64) on that frame;
// anything else is pushed with aibot_send_msg (markdown; a chart through
// the chunked media upload, then an image message); buttons are a
// template_card whose clicks come back as template_card_event with the
// button's key, which is the command text. It never waits for WeCom's pace
// (30 messages a minute per conversation): bot/deliver keeps it (Pace).
// The secret never appears in a log line or an error.
package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/i18n"
)

// Name is the transport's name.
const Name = "wecom"

// DefaultURL is WeCom's long-connection endpoint.
const DefaultURL = "wss://openws.work.weixin.qq.com"

// Options configure a Transport.
type Options struct {
	BotID string
	// Lang is the language of what the transport adds to a reply (the
	// note of a reply cut short, of a chart not sent): its chats'.
	Lang   i18n.Lang
	Secret string
	// URL is the WebSocket endpoint (DefaultURL).
	URL string
	// State keeps the ids seen across restarts; nil: memory only.
	State  inbound.KV
	Logger *slog.Logger
	// PingInterval is the heartbeat (default 30 s); two pings without a
	// receipt end the connection.
	PingInterval time.Duration
	// ReceiptTimeout bounds the wait for a request's receipt (default 5 s).
	ReceiptTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause before a reconnect
	// (defaults 1 s and 30 s); it doubles with each loss in a row, and a
	// session that got a frame after subscribing starts over at MinBackoff.
	MinBackoff, MaxBackoff time.Duration
	// ThrottlePause is the wait asked for after a rate-limit errcode
	// (default 1 min).
	ThrottlePause time.Duration
	// Pace per conversation (DefaultPace when nil), kept by bot/deliver.
	Pace []chat.Window
	// HandleGrace is how long messages being handled may take to finish
	// after Receive is asked to stop (default 10 s).
	HandleGrace time.Duration
}

// DefaultPace is WeCom's limit per conversation, replies and pushes
// together: 30 a minute and 1000 an hour.
var DefaultPace = []chat.Window{{N: 30, Per: time.Minute}, {N: 1000, Per: time.Hour}}

// Transport is the WeCom transport.
type Transport struct {
	opts   Options
	log    *slog.Logger
	dialer *websocket.Dialer
	ids    *inbound.IDs
	seq    atomic.Int64
	link   chat.LinkState

	mu      sync.Mutex
	cur     *conn
	pending map[int64][]pending // chat → callbacks not yet answered
	claimed map[string]pending  // reply key → the callback it answers
	seen    *inbound.Seen
}

// pending is a message whose answer goes out as a stream reply on its
// req_id.
type pending struct {
	reqID string
	msg   int64 // chat.Message.ID
	at    time.Time
}

// pendingMaxAge is how long a callback's req_id is used for the answer
// (response_url lasts 5 min; a stream ends 10 min after its first frame).
const pendingMaxAge = 4 * time.Minute

var (
	_ chat.Receiver = (*Transport)(nil)
	_ chat.Linked   = (*Transport)(nil)
	_ chat.Sender   = (*Transport)(nil)
	_ chat.Paced    = (*Transport)(nil)
)

// New returns a transport; it does not connect (Receive does).
func New(opts Options) (*Transport, error) {
	if strings.TrimSpace(opts.BotID) == "" {
		return nil, errors.New("wecom: no bot_id")
	}
	if opts.Secret == "" {
		return nil, errors.New("wecom: no secret")
	}
	if opts.URL == "" {
		opts.URL = DefaultURL
	}
	if !strings.HasPrefix(opts.URL, "wss://") && !strings.HasPrefix(opts.URL, "ws://") {
		return nil, fmt.Errorf("wecom: url %q: want wss://…", opts.URL)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 30 * time.Second
	}
	if opts.ReceiptTimeout <= 0 {
		opts.ReceiptTimeout = 5 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.ThrottlePause <= 0 {
		opts.ThrottlePause = time.Minute
	}
	if opts.Pace == nil {
		opts.Pace = DefaultPace
	}
	if opts.HandleGrace <= 0 {
		opts.HandleGrace = 10 * time.Second
	}
	d := *websocket.DefaultDialer // honours HTTPS_PROXY
	d.HandshakeTimeout = 15 * time.Second
	return &Transport{opts: opts, log: opts.Logger.With("transport", Name), dialer: &d,
		ids: inbound.NewIDs(Name, opts.State), pending: map[int64][]pending{}, claimed: map[string]pending{}}, nil
}

// Name returns "wecom".
func (t *Transport) Name() string { return Name }

// Pace is WeCom's limit per conversation.
func (t *Transport) Pace(int64) (perChat, perSender []chat.Window) { return t.opts.Pace, nil }

// Link says whether the connection to WeCom is up, since when, and the
// cap of the pauses between reconnects (MaxBackoff).
func (t *Transport) Link() chat.Link { return t.link.Link() }

// Receive connects and delivers messages until ctx ends, reconnecting
// with a capped backoff whenever the connection fails. It returns a
// permanent error when WeCom refuses the bot_id and secret, or when
// another connection took the bot over.
func (t *Transport) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	t.mu.Lock()
	if t.seen == nil {
		t.seen = inbound.NewSeen(ctx, Name, t.opts.State, 0)
	}
	t.mu.Unlock()
	return inbound.Loop{Log: t.log, MinBackoff: t.opts.MinBackoff, MaxBackoff: t.opts.MaxBackoff, Link: &t.link,
		Grace: t.opts.HandleGrace}.Run(ctx, deliver, t.session)
}

// session connects, subscribes, and reads until the connection ends. A
// frame read after the subscription (a ping's receipt, a message) proves
// the connection healthy: the reconnect after it waits MinBackoff again.
func (t *Transport) session(ctx context.Context, hand func(chat.Message), healthy func()) error {
	c, err := dial(ctx, t.dialer, t.opts.URL, t.log, &t.seq)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && (se.status == 401 || se.status == 403) {
			return chat.Permanent("WeCom refused the connection", fmt.Errorf("wecom: %w: check [wecom] bot_id and secret", err))
		}
		if errors.As(err, &se) && se.after() > 0 {
			return chat.RetryAfter(se.after(), "WeCom is throttling", err)
		}
		return err
	}
	defer c.close()

	// The subscribe receipt is read here, before the reader starts.
	sub := frame{Cmd: cmdSubscribe, Headers: headers{ReqID: c.reqID(cmdSubscribe)}}
	sub.Body, _ = json.Marshal(map[string]string{"bot_id": t.opts.BotID, "secret": t.opts.Secret})
	if err := c.write(sub); err != nil {
		return fmt.Errorf("wecom subscribe: %w", err)
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(t.opts.ReceiptTimeout + 5*time.Second))
	r, err := c.read()
	if err != nil {
		return fmt.Errorf("wecom subscribe: %w", err)
	}
	_ = c.ws.SetReadDeadline(time.Time{})
	if r.ErrCode == nil || r.Headers.ReqID != sub.Headers.ReqID {
		return fmt.Errorf("wecom subscribe: unexpected answer (cmd %q)", r.Cmd)
	}
	if *r.ErrCode != 0 {
		return chat.Permanent("WeCom refused the bot_id or secret", fmt.Errorf("wecom subscribe: errcode %d: %s: check [wecom] bot_id and secret (the long-connection secret, not the webhook token)", *r.ErrCode, r.ErrMsg))
	}
	t.link.Up()
	t.log.Info("connected", "bot_id", t.opts.BotID)
	t.mu.Lock()
	t.cur = c
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.cur == c {
			t.cur = nil
		}
		t.mu.Unlock()
	}()

	pctx, stopPing := context.WithCancel(ctx)
	pinged := make(chan struct{})
	go func() { defer close(pinged); t.ping(pctx, c) }()
	defer func() { stopPing(); <-pinged }()
	go func() {
		select {
		case <-ctx.Done():
			c.close() // ends the read below
		case <-c.done:
		}
	}()

	for {
		f, err := c.read()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			select {
			case <-c.done:
				return errors.New("wecom: no receipt for two pings: the link is dead")
			default:
			}
			return fmt.Errorf("wecom: read: %w", err)
		}
		healthy()
		switch f.Cmd {
		case "":
			if !c.receipt(f) {
				t.log.Debug("receipt for no request", "req_id", f.Headers.ReqID)
			}
		case cmdMsgCallback:
			t.onMessage(ctx, f, hand)
		case cmdEventCallback:
			if err := t.onEvent(ctx, f, hand); err != nil {
				return err
			}
		default:
			t.log.Debug("frame ignored", "cmd", f.Cmd)
		}
	}
}

// ping sends a heartbeat every PingInterval; after two in a row without a
// receipt it closes the connection.
func (t *Transport) ping(ctx context.Context, c *conn) {
	missed := 0
	tick := time.NewTicker(t.opts.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-tick.C:
		}
		_, err := c.request(ctx, frame{Cmd: cmdPing, Headers: headers{ReqID: c.reqID(cmdPing)}}, t.opts.PingInterval)
		switch {
		case err == nil:
			missed = 0
		case ctx.Err() != nil:
			return
		default:
			missed++
			t.log.Debug("ping without receipt", "missed", missed, "err", err)
			if missed >= 2 {
				c.close()
				return
			}
		}
	}
}

// callback is the body of aibot_msg_callback and aibot_event_callback.
type callback struct {
	MsgID    string `json:"msgid"`
	ChatID   string `json:"chatid"`
	ChatType string `json:"chattype"` // single, group
	From     struct {
		UserID string `json:"userid"`
	} `json:"from"`
	MsgType string `json:"msgtype"`
	Text    struct {
		Content string `json:"content"`
	} `json:"text"`
	Event struct {
		EventType string `json:"eventtype"`
		EventKey  string `json:"event_key"`
		TaskID    string `json:"task_id"`
		// Production traffic is reported to nest the click.
		TemplateCardEvent struct {
			EventKey string `json:"event_key"`
			TaskID   string `json:"task_id"`
		} `json:"template_card_event"`
	} `json:"event"`
}

// chatRef is where an answer goes: the group's chatid, or the user's
// userid in a 1:1 chat (aibot_send_msg takes either as chatid).
func (cb *callback) chatRef() (string, bool) {
	if cb.ChatType == "group" && cb.ChatID != "" {
		return cb.ChatID, true
	}
	return cb.From.UserID, false
}

// message turns a callback into a chat.Message (without its text).
func (t *Transport) message(ctx context.Context, cb *callback) (chat.Message, bool) {
	if cb.From.UserID == "" {
		return chat.Message{}, false
	}
	ref, group := cb.chatRef()
	id, err := t.ids.Number(ctx, ref)
	if err != nil {
		t.log.Error("chat id", "err", err)
		return chat.Message{}, false
	}
	return chat.Message{Transport: Name, Chat: id, ID: inbound.Number(cb.MsgID), Group: group,
		User: chat.User{ID: inbound.Number(cb.From.UserID), Ref: cb.From.UserID, Name: cb.From.UserID}}, true
}

func (t *Transport) onMessage(ctx context.Context, f frame, hand func(chat.Message)) {
	var cb callback
	if err := json.Unmarshal(f.Body, &cb); err != nil {
		t.log.Warn("unreadable message callback", "err", err)
		return
	}
	if !t.seen.First(ctx, cb.MsgID) {
		t.log.Debug("message pushed again; dropped", "msgid", cb.MsgID)
		return
	}
	m, ok := t.message(ctx, &cb)
	if !ok {
		return
	}
	if cb.MsgType != "text" {
		t.log.Debug("message without text ignored", "msgtype", cb.MsgType, "user", cb.From.UserID)
		return
	}
	m.Text = stripMention(cb.Text.Content)
	if m.Text == "" {
		return
	}
	t.mu.Lock()
	list := append(t.pending[m.Chat], pending{reqID: f.Headers.ReqID, msg: m.ID, at: time.Now()})
	if len(list) > 20 {
		list = list[len(list)-20:]
	}
	t.pending[m.Chat] = list
	t.mu.Unlock()
	hand(m)
}

// onEvent handles an event; a disconnected_event ends the transport.
func (t *Transport) onEvent(ctx context.Context, f frame, hand func(chat.Message)) error {
	var cb callback
	if err := json.Unmarshal(f.Body, &cb); err != nil {
		t.log.Warn("unreadable event callback", "err", err)
		return nil
	}
	switch cb.Event.EventType {
	case "disconnected_event":
		return chat.Permanent("another connection took the WeCom bot over",
			errors.New("wecom: another connection took this bot over (disconnected_event): only one trainbot may use a bot_id; this one stops listening and does not reconnect"))
	case "template_card_event":
		key := cb.Event.EventKey
		if key == "" {
			key = cb.Event.TemplateCardEvent.EventKey
		}
		if key == "" || !t.seen.First(ctx, "event:"+cb.MsgID) {
			return nil
		}
		m, ok := t.message(ctx, &cb)
		if !ok {
			return nil
		}
		m.Text, m.Callback, m.ID = key, true, 0
		hand(m)
	default:
		t.log.Debug("event ignored", "event", cb.Event.EventType)
	}
	return nil
}

// stripMention removes the leading "@bot" of a group message.
func stripMention(s string) string {
	s = strings.TrimSpace(s)
	for strings.HasPrefix(s, "@") {
		i := strings.IndexAny(s, " \u2005\u00a0\t\n")
		if i < 0 {
			return ""
		}
		s = strings.TrimSpace(s[i:])
	}
	return strings.TrimSpace(strings.TrimPrefix(s, "\u2005"))
}

// peekPending returns the unanswered callback an answer goes to: the one
// of message msg when given, else the oldest; ok false when there is none
// young enough.
func (t *Transport) peekPending(chat, msg int64) (pending, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.pending[chat]
	for len(list) > 0 && time.Since(list[0].at) > pendingMaxAge {
		list = list[1:]
	}
	t.pending[chat] = list
	if len(list) == 0 {
		delete(t.pending, chat)
		return pending{}, false
	}
	if msg == 0 {
		return list[0], true
	}
	for _, p := range list {
		if p.msg == msg {
			return p, true
		}
	}
	return pending{}, false
}

// donePending forgets an answered callback.
func (t *Transport) donePending(chat int64, reqID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.pending[chat]
	for i, p := range list {
		if p.reqID == reqID {
			t.pending[chat] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(t.pending[chat]) == 0 {
		delete(t.pending, chat)
	}
}

// current is the live connection, nil while there is none.
func (t *Transport) current() *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

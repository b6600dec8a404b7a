// Package dingtalk is trainbot's two-way DingTalk (钉钉) transport: an
// internal app's robot in Stream mode, an outbound WebSocket, so a
// training server behind NAT needs no public IP and no callback URL.
//
// The Stream client is our own, on github.com/gorilla/websocket with one
// writer, not github.com/open-dingtalk/dingtalk-stream-sdk-go: v0.9.1 writes
// without a lock (a data race under -race), the fix is only in a beta, its
// Close does not stop a client that reconnects, its logger is global, and
// it acknowledges a message only after the handler returns. The protocol
// is small: POST {api}/v1.0/gateway/connections/open with the app's
// credentials and subscriptions gives an endpoint and a one-time ticket;
// the server sends JSON frames {type: SYSTEM|EVENT|CALLBACK, headers:
// {topic, messageId}, data: "<JSON>"}, each acknowledged with {code:200,
// headers:{messageId}, data}. SYSTEM ping is echoed; SYSTEM disconnect
// means a reconnect with a new ticket. A robot message is acknowledged at
// once, then handed on (inbound.Queue); a message id already handled is
// dropped (inbound.Seen, kept in the store).
//
// As a chat.Sender each Send is one attempt. Text goes as markdown through
// the conversation's sessionWebhook while it is valid (its errcode is
// checked, which the SDK's replier does not), else through the robot
// OpenAPI (oToMessages/batchSend to a user, groupMessages/send to a group,
// with an access token); a chart is uploaded (oapi media/upload) and sent
// as sampleImageMsg; buttons are markdown links that make the user send
// the command (dtmd://dingtalkclient/sendMessage?content=…). DingTalk's pace
// (20 messages a minute per robot) is kept by bot/deliver (Pace); a
// throttling answer (errcode 130101, 410100, HTTP 429) is a retry-after.
// The client secret and access tokens never appear in a log line.
package dingtalk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/i18n"
)

// Name is the transport's name.
const Name = "dingtalk"

// Default endpoints.
const (
	DefaultAPIURL  = "https://api.dingtalk.com"
	DefaultOAPIURL = "https://oapi.dingtalk.com"
)

// topicBot is the topic of robot messages.
const topicBot = "/v1.0/im/bot/messages/get"

// Options configure a Transport.
type Options struct {
	ClientID string
	// Lang is the language of what the transport adds to a reply (the
	// note of a reply cut short, of a chart not sent): its chats'.
	Lang         i18n.Lang
	ClientSecret string
	// RobotCode is the robot's code for OpenAPI sends (default ClientID).
	RobotCode string
	// APIURL is the new OpenAPI and the stream gateway; OAPIURL the old
	// API, for media uploads.
	APIURL, OAPIURL string
	// State keeps the ids seen across restarts; nil: memory only.
	State  inbound.KV
	Logger *slog.Logger
	// HTTPClient makes the REST calls (default: 15 s timeout).
	HTTPClient *http.Client
	// PingInterval is how often a WebSocket ping goes out (default 60 s);
	// a link silent for twice that is dead.
	PingInterval time.Duration
	// MinBackoff and MaxBackoff bound the pause before a reconnect
	// (defaults 1 s and 60 s): it doubles with each loss in a row, and a
	// session that got a frame or a pong starts over at MinBackoff.
	MinBackoff, MaxBackoff time.Duration
	// ThrottlePause is the wait after a throttling answer (default 1 min).
	ThrottlePause time.Duration
	// Pace of the whole robot (DefaultPace when nil), kept by bot/deliver.
	Pace []chat.Window
	// HandleGrace is how long messages being handled may take to finish
	// after Receive is asked to stop (default 10 s).
	HandleGrace time.Duration
}

// DefaultPace is DingTalk's robot limit: 20 messages a minute.
var DefaultPace = []chat.Window{{N: 20, Per: time.Minute}}

// Transport is the DingTalk transport.
type Transport struct {
	opts Options
	log  *slog.Logger
	api  *api
	ids  *inbound.IDs
	link chat.LinkState

	mu       sync.Mutex
	seen     *inbound.Seen
	sessions map[int64]session // chat → its latest sessionWebhook
}

// session is a conversation's reply webhook.
type session struct {
	url     string
	expires time.Time
}

var (
	_ chat.Receiver = (*Transport)(nil)
	_ chat.Linked   = (*Transport)(nil)
	_ chat.Sender   = (*Transport)(nil)
	_ chat.Paced    = (*Transport)(nil)
)

// New returns a transport; it does not connect (Receive does).
func New(opts Options) (*Transport, error) {
	if strings.TrimSpace(opts.ClientID) == "" {
		return nil, errors.New("dingtalk: no client_id")
	}
	if opts.ClientSecret == "" {
		return nil, errors.New("dingtalk: no client_secret")
	}
	if opts.RobotCode == "" {
		opts.RobotCode = opts.ClientID
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.OAPIURL == "" {
		opts.OAPIURL = DefaultOAPIURL
	}
	opts.APIURL, opts.OAPIURL = strings.TrimRight(opts.APIURL, "/"), strings.TrimRight(opts.OAPIURL, "/")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = time.Minute
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
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
	return &Transport{opts: opts, log: opts.Logger.With("transport", Name), ids: inbound.NewIDs(Name, opts.State),
		api: &api{opts: &opts, client: opts.HTTPClient}, sessions: map[int64]session{}}, nil
}

// Name returns "dingtalk".
func (t *Transport) Name() string { return Name }

// Pace is the robot's limit, for all its chats together.
func (t *Transport) Pace(int64) (perChat, perSender []chat.Window) { return nil, t.opts.Pace }

// Link says whether the connection to DingTalk is up, since when, and the
// cap of the pauses between reconnects (MaxBackoff).
func (t *Transport) Link() chat.Link { return t.link.Link() }

// Receive connects and delivers messages until ctx ends, reconnecting
// with a capped backoff whenever the connection fails (MinBackoff after a
// session that proved healthy: DingTalk's routine drops). It returns a
// permanent error when DingTalk refuses the client id and secret.
func (t *Transport) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	t.mu.Lock()
	if t.seen == nil {
		t.seen = inbound.NewSeen(ctx, Name, t.opts.State, 0)
	}
	t.mu.Unlock()
	return inbound.Loop{Log: t.log, MinBackoff: t.opts.MinBackoff, MaxBackoff: t.opts.MaxBackoff, Link: &t.link,
		Grace: t.opts.HandleGrace}.Run(ctx, deliver, t.session)
}

// frame is a Stream frame from the server.
type frame struct {
	SpecVersion string            `json:"specVersion"`
	Type        string            `json:"type"`
	Headers     map[string]string `json:"headers"`
	Data        string            `json:"data"`
}

// ack is the client's answer to a frame.
type ack struct {
	Code    int               `json:"code"`
	Headers map[string]string `json:"headers"`
	Message string            `json:"message"`
	Data    string            `json:"data"`
}

// session opens a connection and reads it until it ends. A frame read
// (but SYSTEM disconnect) or a pong proves the connection healthy: the
// reconnect after it waits MinBackoff again, since DingTalk drops its
// connections routinely and does not push a missed robot message again.
func (t *Transport) session(ctx context.Context, hand func(chat.Message), healthy func()) error {
	endpoint, err := t.api.open(ctx)
	if err != nil {
		return err
	}
	d := *websocket.DefaultDialer
	d.HandshakeTimeout = 15 * time.Second
	ws, resp, err := d.DialContext(ctx, endpoint, nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("dingtalk: connect: the server answered HTTP %d", resp.StatusCode)
		}
		return fmt.Errorf("dingtalk: connect: %w", redactURL(err))
	}
	ws.SetReadLimit(4 << 20)
	var wmu sync.Mutex
	write := func(v any) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return ws.WriteJSON(v)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		wmu.Lock()
		_ = ws.SetWriteDeadline(time.Now().Add(time.Second))
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		wmu.Unlock()
		_ = ws.Close()
		wg.Wait()
	}()
	alive := func() { _ = ws.SetReadDeadline(time.Now().Add(2 * t.opts.PingInterval)) }
	alive()
	ws.SetPongHandler(func(string) error { alive(); healthy(); return nil })
	wg.Go(func() {
		tick := time.NewTicker(t.opts.PingInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				_ = ws.Close() // ends the read below
				return
			case <-tick.C:
				wmu.Lock()
				_ = ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
				wmu.Unlock()
			}
		}
	})
	t.link.Up()
	t.log.Info("connected", "client_id", t.opts.ClientID)
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dingtalk: read: %w", err)
		}
		alive()
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.log.Warn("unreadable frame", "err", err)
			continue
		}
		if f.Type == "SYSTEM" && f.Headers["topic"] == "disconnect" {
			return errors.New("dingtalk: the server asked to reconnect (SYSTEM disconnect)")
		}
		healthy()
		a := ack{Code: 200, Message: "OK", Headers: map[string]string{"messageId": f.Headers["messageId"], "contentType": "application/json"}}
		switch {
		case f.Type == "SYSTEM" && f.Headers["topic"] == "ping":
			a.Data = f.Data
		case f.Type == "SYSTEM":
			t.log.Debug("system frame ignored", "topic", f.Headers["topic"])
			continue
		case f.Type == "CALLBACK" && f.Headers["topic"] == topicBot:
			a.Data = `{"response":null}`
			// Acknowledged before it is handled: DingTalk need not wait.
			if err := write(a); err != nil {
				return fmt.Errorf("dingtalk: ack: %w", err)
			}
			t.onMessage(ctx, f, hand)
			continue
		default:
			a.Data = `{"status":"SUCCESS"}`
		}
		if err := write(a); err != nil {
			return fmt.Errorf("dingtalk: ack: %w", err)
		}
	}
}

// botMessage is a robot message callback (chatbot.BotCallbackDataModel).
type botMessage struct {
	MsgID            string `json:"msgId"`
	ConversationID   string `json:"conversationId"`
	ConversationType string `json:"conversationType"` // "1" single, "2" group
	SenderStaffID    string `json:"senderStaffId"`
	SenderNick       string `json:"senderNick"`
	SessionWebhook   string `json:"sessionWebhook"`
	SessionExpires   int64  `json:"sessionWebhookExpiredTime"` // ms
	MsgType          string `json:"msgtype"`
	Text             struct {
		Content string `json:"content"`
	} `json:"text"`
}

func (t *Transport) onMessage(ctx context.Context, f frame, hand func(chat.Message)) {
	var b botMessage
	if err := json.Unmarshal([]byte(f.Data), &b); err != nil {
		t.log.Warn("unreadable robot message", "err", err)
		return
	}
	id := b.MsgID
	if id == "" {
		id = f.Headers["messageId"]
	}
	if !t.seen.First(ctx, id) {
		t.log.Debug("message pushed again; dropped", "msgid", id)
		return
	}
	if b.SenderStaffID == "" {
		// External users have no staffId: they cannot be in [auth].
		t.log.Info("message from a user without a staffId (outside the organisation) ignored", "nick", b.SenderNick)
		return
	}
	group := b.ConversationType == "2"
	ref := "u:" + b.SenderStaffID
	if group {
		ref = "g:" + b.ConversationID
	}
	n, err := t.ids.Number(ctx, ref)
	if err != nil {
		t.log.Error("chat id", "err", err)
		return
	}
	if b.SessionWebhook != "" {
		t.mu.Lock()
		t.sessions[n] = session{url: b.SessionWebhook, expires: time.UnixMilli(b.SessionExpires)}
		t.mu.Unlock()
	}
	if b.MsgType != "text" {
		t.log.Debug("message without text ignored", "msgtype", b.MsgType)
		return
	}
	text := strings.TrimSpace(b.Text.Content)
	if text == "" {
		return
	}
	hand(chat.Message{Transport: Name, Chat: n, ID: inbound.Number(id), Group: group, Text: text,
		User: chat.User{ID: inbound.Number(b.SenderStaffID), Ref: b.SenderStaffID, Name: b.SenderNick}})
}

// webhook is the chat's session webhook while it has a minute left.
func (t *Transport) webhook(chat int64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[chat]
	if !ok || time.Until(s.expires) < time.Minute {
		return "", false
	}
	return s.url, true
}

// forgetWebhook drops a session webhook that failed.
func (t *Transport) forgetWebhook(chat int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, chat)
}

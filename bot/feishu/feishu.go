// Package feishu is trainbot's two-way Feishu/Lark (飞书) transport: an
// enterprise self-built app's bot over the long connection, so a training
// server behind NAT needs no public IP and no callback URL.
//
// It speaks the protocol as the official SDK (github.com/larksuite/
// oapi-sdk-go/v3 v3.4.22) implements it, without linking the SDK:
// protocol.go has the long connection's protobuf Frame (the "pbbp2" wire
// format, with protowire), the events (im.message.receive_v1 and the
// card.action.trigger callback) and what the protocol requires and which
// of the SDK's traps it avoids; rest.go the REST calls (tenant token,
// messages, images, card updates). The connection loop: POST {domain}/
// callback/ws/endpoint, dial, ping every PingInterval the server sets (in
// the endpoint's answer or a pong), ack each event at once (500 for a type
// it does not handle), hand the message on (inbound.Queue), drop an id
// already handled (inbound.Seen, kept in the store), reconnect with a
// capped backoff, and stop with ctx. A card
// click's ack carries its toast, which only the clicker sees: it waits,
// off the reader, for the click's message to be handled (at most
// clickWait, within Feishu's 3 s), so that a stranger's click is answered
// with the refusal there (chat.Press) instead of in the chat; a member's
// shows the command.
//
// As a chat.Sender each Send is one attempt: text as text messages (split
// under Feishu's 150 KB), a reply with buttons as an interactive card whose
// clicks come back as card.action.trigger with the command, charts
// uploaded (im/v1/images, image_type=message) and sent as images, a run's
// live progress as one card updated in place. It never waits for Feishu's
// pace (5 messages a second per chat): bot/deliver keeps it (Pace); a 429
// or a frequency-limit code is a retry-after. The app secret, the tenant
// token and the connection's ticket never appear in a log line.
package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/i18n"
)

// Name is the transport's name.
const Name = "feishu"

// Options configure a Transport.
type Options struct {
	AppID, AppSecret string
	// Lang is the language of what the transport adds to a reply (the
	// note of a reply cut short, of a chart not sent): its chats'.
	Lang i18n.Lang
	// Domain is "feishu" (default), "lark", or a base URL for both the
	// long connection's discovery and the REST API.
	Domain string
	// State keeps the ids seen and chats across restarts; nil: memory.
	State  inbound.KV
	Logger *slog.Logger
	// HTTPClient makes the REST calls (default: 20 s timeout).
	HTTPClient *http.Client
	// MinBackoff and MaxBackoff bound the pause before a reconnect
	// (defaults 1 s and 60 s).
	MinBackoff, MaxBackoff time.Duration
	// ThrottlePause is the wait after a frequency-limit answer without a
	// Retry-After (default 1 s).
	ThrottlePause time.Duration
	// ChatPace and AppPace are Feishu's limits (DefaultChatPace and
	// DefaultAppPace when nil), kept by bot/deliver.
	ChatPace, AppPace []chat.Window
	// HandleGrace is how long messages being handled may take to finish
	// after Receive is asked to stop (default 10 s).
	HandleGrace time.Duration
}

// Feishu's send limits: 5 a second per user and per group; 50 a second
// and 1000 a minute for the app.
var (
	DefaultChatPace = []chat.Window{{N: 5, Per: time.Second}}
	DefaultAppPace  = []chat.Window{{N: 50, Per: time.Second}, {N: 1000, Per: time.Minute}}
)

// The base URLs of Feishu and of Lark, its international edition.
const (
	FeishuBaseURL = "https://open.feishu.cn"
	LarkBaseURL   = "https://open.larksuite.com"
)

// BaseURL is the base URL of a domain setting.
func BaseURL(domain string) string {
	switch domain {
	case "", "feishu":
		return FeishuBaseURL
	case "lark":
		return LarkBaseURL
	}
	return strings.TrimRight(domain, "/")
}

// Transport is the Feishu transport.
type Transport struct {
	opts Options
	log  *slog.Logger
	base string
	rest *rest
	ids  *inbound.IDs
	link chat.LinkState

	mu       sync.Mutex
	seen     *inbound.Seen
	progress map[progressKey]string // the card of a run's progress in a chat
}

type progressKey struct{ chat, run int64 }

var (
	_ chat.Receiver        = (*Transport)(nil)
	_ chat.Linked          = (*Transport)(nil)
	_ chat.Sender          = (*Transport)(nil)
	_ chat.Paced           = (*Transport)(nil)
	_ chat.InPlaceProgress = (*Transport)(nil)
)

// New returns a transport; it does not connect (Receive does).
func New(opts Options) (*Transport, error) {
	if !strings.HasPrefix(opts.AppID, "cli_") {
		return nil, fmt.Errorf("feishu: app_id %q: want the App ID, which starts with cli_", opts.AppID)
	}
	if opts.AppSecret == "" {
		return nil, errors.New("feishu: no app_secret")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 20 * time.Second}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.ThrottlePause <= 0 {
		opts.ThrottlePause = time.Second
	}
	if opts.ChatPace == nil {
		opts.ChatPace = DefaultChatPace
	}
	if opts.AppPace == nil {
		opts.AppPace = DefaultAppPace
	}
	if opts.HandleGrace <= 0 {
		opts.HandleGrace = 10 * time.Second
	}
	base := BaseURL(opts.Domain)
	rest := &rest{base: base, appID: opts.AppID, appSecret: opts.AppSecret, hc: opts.HTTPClient, throttlePause: opts.ThrottlePause}
	return &Transport{opts: opts, log: opts.Logger.With("transport", Name), base: base, rest: rest,
		ids: inbound.NewIDs(Name, opts.State), progress: map[progressKey]string{}}, nil
}

// Name returns "feishu".
func (t *Transport) Name() string { return Name }

// Pace is Feishu's limits.
func (t *Transport) Pace(int64) (perChat, perSender []chat.Window) {
	return t.opts.ChatPace, t.opts.AppPace
}

// ProgressInPlace reports true: a run's progress is one card, updated.
func (t *Transport) ProgressInPlace() bool { return true }

// Link says whether the connection to Feishu is up, since when, and the
// cap of the pauses between reconnects (MaxBackoff).
func (t *Transport) Link() chat.Link { return t.link.Link() }

// Receive connects and delivers messages and card clicks until ctx ends,
// reconnecting with a capped backoff whenever the connection fails. It
// returns a permanent error when Feishu refuses the app.
func (t *Transport) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	t.mu.Lock()
	if t.seen == nil {
		t.seen = inbound.NewSeen(ctx, Name, t.opts.State, 0)
	}
	t.mu.Unlock()
	// A session proves healthy with its first readable frame (a pong, an
	// event): the backoff starts over after it.
	return inbound.Loop{Log: t.log, MinBackoff: t.opts.MinBackoff, MaxBackoff: t.opts.MaxBackoff, Link: &t.link,
		Grace: t.opts.HandleGrace}.Run(ctx, deliver, t.session)
}

// endpoint asks for the long connection's URL and the ping interval.
func (t *Transport) endpoint(ctx context.Context) (string, time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"AppID": t.opts.AppID, "AppSecret": t.opts.AppSecret})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+endpointPath, bytes.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("locale", "zh")
	resp, err := t.opts.HTTPClient.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("feishu endpoint: %w", redactURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		return "", 0, chat.Permanent("Feishu refused the app", fmt.Errorf("feishu endpoint: HTTP %d: check [feishu] app_id and app_secret", resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		err := fmt.Errorf("feishu endpoint: HTTP %d", resp.StatusCode)
		if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s > 0 {
			return "", 0, chat.RetryAfter(time.Duration(s)*time.Second, "Feishu is throttling", err)
		}
		return "", 0, err
	}
	var er endpointAnswer
	if err := json.Unmarshal(raw, &er); err != nil {
		return "", 0, fmt.Errorf("feishu endpoint: unreadable answer: %w", err)
	}
	switch er.Code {
	case endpointOK:
	case endpointBusy, endpointInternalError:
		return "", 0, fmt.Errorf("feishu endpoint: code %d: %s", er.Code, er.Msg)
	default:
		return "", 0, chat.Permanent("Feishu refused the app", fmt.Errorf("feishu endpoint: code %d: %s: check [feishu] app_id and app_secret, that the app is an enterprise self-built app, and that events use the long connection", er.Code, er.Msg))
	}
	if er.Data == nil || er.Data.URL == "" {
		return "", 0, errors.New("feishu endpoint: no URL in the answer")
	}
	ping := 2 * time.Minute
	if c := er.Data.ClientConfig; c != nil && c.PingInterval > 0 {
		ping = time.Duration(c.PingInterval) * time.Second
	}
	return er.Data.URL, ping, nil
}

// session opens a connection and reads it until it ends; messages go to
// hand.
func (t *Transport) session(ctx context.Context, hand func(chat.Message), healthy func()) error {
	u, ping, err := t.endpoint(ctx)
	if err != nil {
		return err
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return errors.New("feishu: the endpoint URL cannot be read")
	}
	service, _ := strconv.ParseInt(parsed.Query().Get(queryServiceID), 10, 32)
	dialer := *websocket.DefaultDialer
	dialer.HandshakeTimeout = 15 * time.Second
	ws, resp, err := dialer.DialContext(ctx, u, nil)
	if err != nil {
		if resp != nil {
			msg := fmt.Errorf("feishu: connect: HTTP %d, handshake status %s %s", resp.StatusCode,
				resp.Header.Get(headerHandshakeStatus), resp.Header.Get(headerHandshakeMsg))
			if st, _ := strconv.Atoi(resp.Header.Get(headerHandshakeStatus)); st == handshakeForbidden ||
				resp.Header.Get(headerHandshakeAuthErrCode) == strconv.Itoa(handshakeExceedLimit) {
				return chat.Permanent("Feishu refused the long connection", msg)
			}
			return msg
		}
		return fmt.Errorf("feishu: connect: %w", redactURL(err))
	}
	ws.SetReadLimit(8 << 20)
	var wmu sync.Mutex
	write := func(f *frame) error {
		data := f.marshal()
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return ws.WriteMessage(websocket.BinaryMessage, data)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		_ = ws.Close()
		wg.Wait()
	}()
	alive := func() { _ = ws.SetReadDeadline(time.Now().Add(2*ping + 10*time.Second)) }
	alive()
	repinged := make(chan time.Duration, 1) // a new interval from a pong, for the pinger
	every := ping
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				_ = ws.Close()
				return
			case d := <-repinged:
				tick.Reset(d)
			case <-tick.C:
				if err := write(pingFrame(int32(service))); err != nil {
					t.log.Debug("ping failed", "err", err)
				}
			}
		}
	})
	t.link.Up()
	t.log.Info("connected", "app_id", t.opts.AppID)
	parts := map[string]*split{}
	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("feishu: read: %w", err)
		}
		alive()
		if mt != websocket.BinaryMessage {
			continue
		}
		f, err := unmarshalFrame(data)
		if err != nil {
			t.log.Warn("unreadable frame", "err", err)
			continue
		}
		healthy()
		if f.Method != methodData {
			// A pong may carry a new ClientConfig; other control frames
			// mean nothing to a client.
			if d := pongInterval(&f); d > 0 && d != ping {
				ping = d
				alive()
				select {
				case <-repinged: // not taken yet: replaced
				default:
				}
				repinged <- d
				t.log.Debug("ping interval set by the server", "interval", d)
			}
			continue
		}
		if f.header(headerType) != typeEvent {
			continue // the old "card" frames are not acknowledged, as the SDK does
		}
		payload := f.Payload
		if sum := f.headerInt(headerSum); sum > 1 {
			if payload = combine(parts, f.header(headerMessageID), sum, f.headerInt(headerSeq), payload); payload == nil {
				continue
			}
		}
		began := time.Now()
		ack := func(rsp any, err error) error {
			res := ackPayload{StatusCode: http.StatusOK}
			if err != nil {
				t.log.Warn("event not handled", "err", err)
				res = ackPayload{StatusCode: http.StatusInternalServerError}
			} else if rsp != nil {
				res.Data, _ = json.Marshal(rsp)
			}
			f.Headers = append(f.Headers, header{headerBizRt, strconv.FormatInt(time.Since(began).Milliseconds(), 10)})
			f.Payload, _ = json.Marshal(res)
			return write(&f)
		}
		clicked, err := t.handle(ctx, payload, hand) // it only queues: it returns at once
		if c := clicked; c != nil {
			// The toast waits for the click's message to be handled; the
			// reader goes on.
			wg.Go(func() {
				if err := ack(c.response(done)); err != nil {
					t.log.Debug("click not acked", "err", err)
				}
			})
			continue
		}
		if err := ack(nil, err); err != nil {
			return fmt.Errorf("feishu: ack: %w", err)
		}
	}
}

// pongInterval is the ping interval a pong's ClientConfig sets (0: none).
func pongInterval(f *frame) time.Duration {
	if f.Method != methodControl || f.header(headerType) != typePong || len(f.Payload) == 0 {
		return 0
	}
	var c clientConfig
	if json.Unmarshal(f.Payload, &c) != nil || c.PingInterval <= 0 {
		return 0
	}
	return time.Duration(c.PingInterval) * time.Second
}

// split is a payload that came in parts.
type split struct {
	parts [][]byte
	at    time.Time
}

// combine keeps the parts of a split payload (for 5 s) and returns it
// whole once all have come.
func combine(m map[string]*split, id string, sum, seq int, part []byte) []byte {
	for k, s := range m {
		if time.Since(s.at) > 5*time.Second {
			delete(m, k)
		}
	}
	if seq < 0 || seq >= sum || sum > 1000 {
		return nil
	}
	s := m[id]
	if s == nil || len(s.parts) != sum {
		s = &split{parts: make([][]byte, sum), at: time.Now()}
		m[id] = s
	}
	s.parts[seq] = part
	var whole []byte
	for _, p := range s.parts {
		if p == nil {
			return nil
		}
		whole = append(whole, p...)
	}
	delete(m, id)
	return whole
}

// handle turns an event's payload into a message for hand, as the SDK's
// dispatcher routes it: im.message.receive_v1 and card.action.trigger;
// any other type is an error (its ack says 500). A card click handed on
// is returned too, for its ack.
func (t *Transport) handle(ctx context.Context, payload []byte, hand func(chat.Message)) (*click, error) {
	var e envelope
	if err := json.Unmarshal(payload, &e); err != nil {
		return nil, fmt.Errorf("event json unmarshal: %w", err)
	}
	if e.Encrypt != "" {
		return nil, errors.New("the event is encrypted: clear the app's Encrypt Key (the long connection needs none)")
	}
	switch typ := e.eventType(); typ {
	case "im.message.receive_v1":
		var m messageEvent
		if err := json.Unmarshal(e.Event, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		t.onMessage(ctx, &m, hand)
		return nil, nil
	case "card.action.trigger":
		var c clickEvent
		if err := json.Unmarshal(e.Event, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		eventID := ""
		if e.Header != nil {
			eventID = e.Header.EventID
		}
		return t.onClick(ctx, &c, eventID, hand), nil
	default:
		return nil, fmt.Errorf("event type %q: no handler", typ)
	}
}

func (t *Transport) onMessage(ctx context.Context, e *messageEvent, hand func(chat.Message)) {
	msg := e.Message
	id := msg.MessageID
	if id == "" {
		return
	}
	if !t.seen.First(ctx, id) {
		t.log.Debug("message pushed again; dropped", "message_id", id)
		return
	}
	openID, chatID := e.Sender.SenderID.OpenID, msg.ChatID
	if openID == "" || chatID == "" {
		return
	}
	if msg.MessageType != "text" {
		t.log.Debug("message without text ignored", "type", msg.MessageType)
		return
	}
	var content struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(msg.Content), &content); err != nil {
		return
	}
	text := stripMentions(content.Text)
	if text == "" {
		return
	}
	n, err := t.ids.Number(ctx, chatID)
	if err != nil {
		t.log.Error("chat id", "err", err)
		return
	}
	hand(chat.Message{Transport: Name, Chat: n, ID: inbound.Number(id), Group: msg.ChatType != "p2p", Text: text,
		User: chat.User{ID: inbound.Number(openID), Ref: openID, Name: openID}})
}

// onClick turns a card button's click into the message of its command,
// and returns the click, whose toast is its ack's answer (nil: none).
func (t *Transport) onClick(ctx context.Context, e *clickEvent, eventID string, hand func(chat.Message)) *click {
	cmd, _ := e.Action.Value["cmd"].(string)
	chatID, openID := e.Context.OpenChatID, e.Operator.OpenID
	if cmd == "" || chatID == "" || openID == "" {
		return nil
	}
	if eventID != "" && !t.seen.First(ctx, "card:"+eventID) {
		return nil
	}
	n, err := t.ids.Number(ctx, chatID)
	if err != nil {
		t.log.Error("chat id", "err", err)
		return nil
	}
	c := &click{cmd: cmd, answered: make(chan struct{})}
	hand(chat.Message{Transport: Name, Chat: n, Text: cmd, Callback: true, Press: c,
		User: chat.User{ID: inbound.Number(openID), Ref: openID, Name: openID}})
	return c
}

// clickWait is how long a click's ack waits for its message to be handled
// (Feishu pushes a click again after 3 s without an ack).
const clickWait = 2 * time.Second

// click is a card click waiting for its toast (chat.Press).
type click struct {
	cmd      string
	answered chan struct{} // closed by the answer

	mu   sync.Mutex
	done bool // answered, or too late
	text string
}

var _ chat.Press = (*click)(nil)

// Answer sets the click's toast ("": the command), if the ack has not gone
// without it.
func (c *click) Answer(_ context.Context, text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	c.done, c.text = true, text
	close(c.answered)
	return true
}

// response is the ack's answer: a toast with the click's answer, or with
// its command when none came within clickWait (or the connection ended).
func (c *click) response(done <-chan struct{}) (*clickAnswer, error) {
	timer := time.NewTimer(clickWait)
	defer timer.Stop()
	select {
	case <-c.answered:
	case <-timer.C:
	case <-done:
	}
	c.mu.Lock()
	c.done = true
	text := c.text
	c.mu.Unlock()
	if text == "" {
		text = c.cmd
	}
	return &clickAnswer{Toast: &toast{Type: "info", Content: text}}, nil
}

// stripMentions removes "@_user_1" placeholders of mentions.
func stripMentions(s string) string {
	f := strings.Fields(s)
	out := f[:0]
	for _, w := range f {
		if !strings.HasPrefix(w, "@_user_") && w != "@_all" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// redactURL keeps a URL (with a ticket in it) out of an error.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

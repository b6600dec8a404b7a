// Package push delivers trainbot's alerts and reports to push-only channels:
// a WeCom (企业微信) group robot, a Feishu (飞书) custom bot, a DingTalk (钉钉)
// custom robot, or any HTTP endpoint that takes JSON (a generic webhook).
// Each Channel is a chat.Sender whose Send speaks the channel's documented
// webhook API:
//
//   - WeCom: markdown text (4096 bytes a message), charts as image messages
//     (base64 and the MD5 of the raw bytes, at most 2 MB: re-encoded as JPEG
//     or scaled down when larger); 20 messages a minute.
//   - Feishu: text or post (rich text) messages, with timestamp and sign in
//     the body when the bot has a signing secret; a body stays under 20 KB;
//     100 messages a minute and 5 a second. Custom bots cannot upload
//     images, so the text says which charts were left out.
//   - DingTalk: markdown messages (20000 bytes), with timestamp and sign in
//     the query when the robot has a signing secret; 20 a minute; no images.
//   - Webhook: one JSON object per reply, charts as base64 PNGs, and an
//     X-Trainbot-Signature HMAC header when a secret is set.
//
// Send makes one attempt and never waits: the channel's rate limit is
// told to bot/deliver (Pace), which keeps it and owns the retries. These
// services answer HTTP 200 with an error code inside; Send reads it and
// returns a chat.SendError that says whether trying again can help (a
// network error, a 5xx, a rate limit: after how long) or not (a bad key, a
// failed signature), wrapping an *Error. Every answer is read with a
// 64 KiB limit. The webhook URL, its key and the secret never appear in an
// error or a log line.
package push

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
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Channel kinds.
const (
	WeCom    = "wecom"
	Feishu   = "feishu"
	DingTalk = "dingtalk"
	Webhook  = "webhook"
)

// Kinds lists the channel kinds.
var Kinds = []string{WeCom, Feishu, DingTalk, Webhook}

// DefaultPerMinute is each kind's documented rate limit, in messages a
// minute (the generic webhook's is ours).
var DefaultPerMinute = map[string]int{WeCom: 20, Feishu: 100, DingTalk: 20, Webhook: 60}

// MaxPerMinute is the most Options.PerMinute may ask: a robot's limit can
// only be lowered; a webhook's is ours to raise.
var MaxPerMinute = map[string]int{WeCom: 20, Feishu: 100, DingTalk: 20, Webhook: 600}

// keyURL is where a robot's key alone becomes its webhook URL.
var keyURL = map[string]string{
	WeCom:    "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=",
	DingTalk: "https://oapi.dingtalk.com/robot/send?access_token=",
	Feishu:   "https://open.feishu.cn/open-apis/bot/v2/hook/",
}

// KeyURL makes a kind's webhook URL from a robot's key (WeCom's key,
// DingTalk's access_token, Feishu's hook token); false for a webhook,
// which has no key.
func KeyURL(kind, key string) (string, bool) {
	base, ok := keyURL[kind]
	return base + key, ok
}

// Signs reports whether a kind takes a signing secret: WeCom group robots
// do not sign messages.
func Signs(kind string) bool { return kind != WeCom }

// KindHint says which kind was probably meant, for an unknown one:
// "wechat" → `WeCom is "wecom"`; "" when it has no guess.
func KindHint(kind string) string {
	switch strings.ToLower(kind) {
	case "wechat", "weixin", "wxwork", "qywx", "企业微信":
		return `WeCom is "wecom"`
	case "lark", "飞书":
		return `Lark is "feishu"`
	case "dingding", "钉钉":
		return `DingTalk is "dingtalk"`
	}
	return ""
}

// Options configure a Channel.
type Options struct {
	Kind   string // WeCom, Feishu, DingTalk or Webhook
	Name   string // the channel's name in the config, e.g. "lab"
	URL    string // the webhook URL, key included (a secret)
	Secret string // the signing secret; "" when the bot does not sign
	// PerMinute lowers the kind's rate limit, or sets a webhook's (0:
	// DefaultPerMinute).
	PerMinute int
	// Timeout bounds one HTTP request (default 10 s).
	Timeout time.Duration
	// Lang is the language of what the channel adds to a reply: its
	// buttons as lines, a note for charts it cannot show.
	Lang   i18n.Lang
	Logger *slog.Logger
	// Client replaces the HTTP client (its Timeout is kept when set).
	Client *http.Client
	// Now is the clock of signatures (default time.Now).
	Now func() time.Time
}

// Channel is one configured push channel; it implements chat.Sender.
type Channel struct {
	name    string // "wecom:lab"
	kind    string
	d       dialect
	client  *http.Client
	pace    []chat.Window
	log     *slog.Logger
	now     func() time.Time
	secrets []string
}

var (
	_ chat.Sender = (*Channel)(nil)
	_ chat.Paced  = (*Channel)(nil)
)

// New returns a channel. Its errors never contain the URL or the secret.
func New(o Options) (*Channel, error) {
	if !slices.Contains(Kinds, o.Kind) {
		return nil, fmt.Errorf("push: unknown kind %q (want %s)", o.Kind, strings.Join(Kinds, ", "))
	}
	name := o.Kind
	if o.Name != "" {
		name += ":" + o.Name
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("push %s: the webhook URL is not an http(s) URL", name)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Timeout: o.Timeout}
	} else {
		c := *client
		client = &c
	}
	// A redirect would carry the signed body elsewhere: take it as an answer.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Channel{name: name, kind: o.Kind, client: client, log: o.Logger.With("channel", name), now: o.Now}
	c.secrets = secretsOf(u, o.URL, o.Secret)
	per := DefaultPerMinute[o.Kind]
	if o.PerMinute > 0 && (o.PerMinute < per || o.Kind == Webhook) {
		per = o.PerMinute // a webhook's limit is ours to set; the robots' only to lower
	}
	windows := []chat.Window{{N: per, Per: time.Minute}}
	switch o.Kind {
	case WeCom:
		c.d = &wecom{url: o.URL, lang: o.Lang}
	case Feishu:
		c.d = &feishu{url: o.URL, secret: o.Secret, lang: o.Lang}
		windows = append(windows, chat.Window{N: 5, Per: time.Second})
	case DingTalk:
		c.d = &dingtalk{url: o.URL, secret: o.Secret, lang: o.Lang}
	case Webhook:
		c.d = &webhook{url: o.URL, secret: o.Secret}
	}
	c.pace = windows
	return c, nil
}

// secretsOf lists what must never be printed: the URL, the secret, every
// query value (key=, access_token=) and the last path segment (Feishu's
// hook token).
func secretsOf(u *url.URL, raw, secret string) []string {
	out := []string{raw, u.String(), u.RawQuery, secret}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	out = append(out, path.Base(u.Path))
	var keep []string
	for _, s := range out {
		if len(s) >= 4 && !slices.Contains(keep, s) && s != "send" && s != "hook" {
			keep = append(keep, s)
		}
	}
	// Longest first, so that the URL goes before the key inside it.
	slices.SortFunc(keep, func(a, b string) int { return len(b) - len(a) })
	return keep
}

// redact removes the channel's secrets from s.
func (c *Channel) redact(s string) string {
	for _, sec := range c.secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
		if q := url.QueryEscape(sec); q != sec {
			s = strings.ReplaceAll(s, q, "[redacted]")
		}
	}
	return s
}

// Name is "kind:name", e.g. "wecom:lab".
func (c *Channel) Name() string { return c.name }

// Kind is the channel's kind.
func (c *Channel) Kind() string { return c.kind }

// Pace is the channel's rate limit (its one destination is chat 0).
func (c *Channel) Pace(int64) (perChat, perSender []chat.Window) { return c.pace, nil }

// Send makes one attempt to deliver a reply as one or more messages of the
// channel (text split at its size limit, then the charts it can show),
// from the skip-th on: the messages before went out in an earlier attempt.
func (c *Channel) Send(ctx context.Context, _ int64, r chat.Reply, skip int) (int, error) {
	msgs, err := c.d.messages(r)
	if err != nil {
		return skip, sendError(c.fail(&Error{Op: "format", Msg: err.Error()}))
	}
	for i := skip; i < len(msgs); i++ {
		if err := c.post(ctx, msgs[i]); err != nil {
			return i, sendError(err)
		}
	}
	c.log.Debug("pushed", "run", r.RunID, "messages", len(msgs)-skip)
	return len(msgs), nil
}

// sendError is what a failed push means to bot/deliver.
func sendError(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if !e.Temporary {
		return chat.Permanent(e.Error(), e)
	}
	return chat.RetryAfter(e.After, e.Error(), e)
}

// post sends one message and reads the channel's answer.
func (c *Channel) post(ctx context.Context, msg any) error {
	req, err := c.d.request(ctx, msg, c.now())
	if err != nil {
		return c.fail(&Error{Op: "build request", Msg: err.Error()})
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL
		}
		return c.fail(&Error{Op: "post", Msg: err.Error(), Temporary: true})
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil {
		return c.fail(&Error{Op: "read reply", Status: resp.StatusCode, Msg: err.Error(), Temporary: true})
	}
	if e := c.d.result(resp.StatusCode, resp.Header, body); e != nil {
		return c.fail(e)
	}
	return nil
}

func (c *Channel) fail(e *Error) error {
	e.Channel = c.name
	e.Msg = c.redact(e.Msg)
	return e
}

// Error is a failed push. It never holds the webhook URL, key or secret.
type Error struct {
	Channel   string        // "wecom:lab"
	Op        string        // what failed: "post", "reply", …
	Status    int           // HTTP status, 0 when there was no answer
	Code      int           // the channel's error code, 0 when none
	Msg       string        // the channel's or the network's message
	Temporary bool          // trying again may help
	After     time.Duration // wait at least this long before trying again
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Channel + ": " + e.Op)
	if e.Status != 0 && e.Status != http.StatusOK {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, ": error code %d", e.Code)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	if !e.Temporary {
		b.WriteString(" (permanent: check the channel's settings)")
	}
	return b.String()
}

// dialect is one channel kind's webhook API.
type dialect interface {
	// messages turns a reply into the bodies to post, in order.
	messages(r chat.Reply) ([]any, error)
	// request builds the (signed) POST of one message.
	request(ctx context.Context, msg any, now time.Time) (*http.Request, error)
	// result reads the answer: nil when the message was taken.
	result(status int, h http.Header, body []byte) *Error
}

// encodeJSON marshals without HTML escaping (Chinese and "<font>" as is).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func jsonRequest(ctx context.Context, u string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("bad webhook URL")
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "trainbot")
	return req, nil
}

// httpError maps an HTTP status that carries no readable error code: 429,
// 408 and 5xx are temporary, other non-2xx statuses permanent; nil for 2xx.
func httpError(status int, h http.Header, body []byte) *Error {
	if status >= 200 && status < 300 {
		return nil
	}
	e := &Error{Op: "reply", Status: status, Msg: snippet(body)}
	switch {
	case status == http.StatusTooManyRequests:
		e.Temporary, e.After = true, retryAfterHeader(h, time.Minute)
	case status == http.StatusRequestTimeout || status >= 500:
		e.Temporary = true
	}
	return e
}

func retryAfterHeader(h http.Header, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Hour)
	}
	return def
}

// snippet is the start of an answer, for an error message.
func snippet(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "?"))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// Package push delivers trainbot's alerts and reports to push-only channels:
// a WeCom (企业微信) group robot, a Feishu (飞书) custom bot, a DingTalk (钉钉)
// custom robot, any HTTP endpoint that takes JSON (a generic webhook),
// Slack and Discord webhooks, email over SMTP, ntfy and Bark on a phone,
// or one's own WeChat through ServerChan (Server酱) or PushPlus (推送加).
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
//   - Slack: one Block Kit message (a header, mrkdwn sections of 3000
//     characters, link buttons, a context line for command buttons and
//     charts) with the whole text as the notification's fallback; an
//     incoming webhook cannot upload files, so a chart is a link to the
//     run's page, or a note; about one message a second (bursts allowed):
//     60 a minute.
//   - Discord: one embed coloured by severity (title, description of 4096
//     characters, the run's page as its link), charts attached as PNGs in
//     a multipart/form-data request (the first as the embed's image, each
//     at most 8 MiB); no mentions; 30 messages a minute per channel and 2
//     a second (a webhook's bucket is 5 per 2 s).
//   - Email: one mail per reply over SMTP (implicit TLS, STARTTLS that the
//     server must offer, or none without a password; AUTH PLAIN), text
//     and HTML with the charts inline (charts past 10 MiB left out with a
//     note); a 4xx reply is retried after a minute, a 5xx one or a TLS
//     failure is permanent; 10 mails a minute (providers limit per day).
//   - ntfy: a JSON publish to the server root (title, message of 4096
//     bytes, priority and tags by severity, URL buttons as view actions),
//     charts as attachments (PUT to the topic, 2 MB); an optional access
//     token; 12 a minute (ntfy.sh: a burst of 60, then one per 5 s). A
//     server that refuses attachments fails the reply permanently.
//   - Bark: POST /push with the device key, an iOS interruption level by
//     severity (critical rings through silent mode), the body cut under
//     APNs' 4 KB; no images; 60 a minute (ours).
//   - ServerChan: a JSON title (32 bytes) and markdown desp (32 KB, one
//     message a reply: the free tier sends 5 a day) to the SendKey's
//     endpoint, https://sctapi.ftqq.com/SCT….send (Turbo) or
//     https://UID.push.ft07.com/send/sctpUIDt….send (Server酱³); with an
//     API base, to BASE/KEY.send or BASE/send/KEY.send. 5 a minute
//     (ours: the service documents none); no images.
//   - PushPlus: POST https://www.pushplus.plus/send with the token, a
//     title (100 characters) and the content (20,000) in the channel's
//     template: markdown (default), html, txt or json (the webhook's
//     object); 5 a minute and 200 a day for a verified user; no images.
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
	"cmp"
	"context"
	"crypto/tls"
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
	Slack    = "slack"
	Discord  = "discord"
	// ServerChan is Server酱 (Turbo, and Server酱³ by its sctp… keys).
	ServerChan = "serverchan"
	// PushPlus is PushPlus (推送加).
	PushPlus = "pushplus"
	Email    = "email"
	Ntfy     = "ntfy"
	Bark     = "bark"
)

// Spec is what one channel kind is: its rate limit, where its messages
// go, what it takes. Specs is the one list of them.
type Spec struct {
	Kind string
	// PerMinute is the service's documented rate limit, in messages a
	// minute (a generic webhook's is ours); MaxPerMinute the most
	// Options.PerMinute may ask: a service's limit can only be lowered,
	// where it is ours it may be raised.
	PerMinute, MaxPerMinute int
	// PerSecond is a second window of the service's, 0 when none.
	PerSecond int
	// KeyBase is where a robot's key alone becomes its webhook URL (key
	// or url is given); "" when the kind has no such key.
	KeyBase string
	// API is the service's API base for a kind whose key (or topic)
	// names the destination: url is optional and replaces it (a
	// self-hosted server, a test server).
	API string
	// Key is what the service calls its key (SendKey, token, device key,
	// access token), when the kind takes one with an API base; KeyRequired
	// says it must be given.
	Key         string
	KeyRequired bool
	// Signs: the kind takes a signing secret.
	Signs bool
	// Chinese: the kind is read in Chinese first (its language default is
	// "zh", else "zh+en").
	Chinese bool
	// Mail: the kind sends over SMTP (smtp, from, to; no url or key).
	Mail bool
	// Takes are the kind's own keys beyond the common ones ("topic",
	// "template"); a kind refuses another kind's.
	Takes []string
	// Hints are other names users give the kind ("lark", "钉钉").
	Hints []string
	// What describes the kind in messages: "WeCom group robots".
	What string
	new  func(o Options) (dialect, error)
}

// Specs lists the channel kinds, in the order they are documented.
var Specs = []Spec{
	{Kind: WeCom, What: "WeCom group robots", PerMinute: 20, MaxPerMinute: 20, KeyBase: "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=",
		Chinese: true, Hints: []string{"wechat", "weixin", "wxwork", "qywx", "企业微信"},
		new: func(o Options) (dialect, error) { return &wecom{url: o.URL, lang: o.Lang}, nil }},
	{Kind: Feishu, What: "Feishu custom bots", PerMinute: 100, MaxPerMinute: 100, PerSecond: 5, KeyBase: "https://open.feishu.cn/open-apis/bot/v2/hook/",
		Signs: true, Chinese: true, Hints: []string{"lark", "飞书"},
		new: func(o Options) (dialect, error) { return &feishu{url: o.URL, secret: o.Secret, lang: o.Lang}, nil }},
	{Kind: DingTalk, What: "DingTalk custom robots", PerMinute: 20, MaxPerMinute: 20, KeyBase: "https://oapi.dingtalk.com/robot/send?access_token=",
		Signs: true, Chinese: true, Hints: []string{"dingding", "钉钉"},
		new: func(o Options) (dialect, error) { return &dingtalk{url: o.URL, secret: o.Secret, lang: o.Lang}, nil }},
	{Kind: Webhook, What: "webhooks", PerMinute: 60, MaxPerMinute: 600, Signs: true,
		new: func(o Options) (dialect, error) { return &webhook{url: o.URL, secret: o.Secret}, nil }},
	// Slack: about one message a second per webhook, short bursts allowed
	// (https://api.slack.com/apis/rate-limits#incoming-webhooks).
	{Kind: Slack, What: "Slack webhooks", PerMinute: 60, MaxPerMinute: 60,
		new: func(o Options) (dialect, error) { return &slack{url: o.URL, lang: o.Lang}, nil }},
	// Discord: 30 messages a minute per channel, and a webhook's bucket of
	// 5 per 2 s, kept by 2 a second.
	{Kind: Discord, What: "Discord webhooks", PerMinute: 30, MaxPerMinute: 30, PerSecond: 2,
		new: newDiscord},
	// Mail providers limit per day (Gmail about 500 recipients, QQ mail
	// and 163 their own): 10 a minute is ours, to stay well under them.
	{Kind: Email, What: "email channels", PerMinute: 10, MaxPerMinute: 60, Mail: true, Chinese: false,
		Hints: []string{"mail", "smtp", "邮件", "邮箱"}, new: newEmail},
	{Kind: Ntfy, What: "ntfy topics", PerMinute: 12, MaxPerMinute: 60, API: "https://ntfy.sh", Key: "access token", Takes: []string{"topic"},
		new: newNtfy},
	{Kind: Bark, What: "Bark devices", PerMinute: 60, MaxPerMinute: 60, API: "https://api.day.app", Key: "device key", KeyRequired: true,
		new: func(o Options) (dialect, error) { return &bark{base: o.URL, key: o.Key, lang: o.Lang}, nil }},
	{Kind: ServerChan, What: "ServerChan keys", PerMinute: 5, MaxPerMinute: 60, API: serverchanAPI, Key: "SendKey", KeyRequired: true,
		Chinese: true, Hints: []string{"server酱", "serverchan3", "sct", "ftqq", "方糖"}, new: newServerChan},
	{Kind: PushPlus, What: "PushPlus tokens", PerMinute: 5, MaxPerMinute: 30, API: pushplusAPI, Key: "token", KeyRequired: true,
		Takes: []string{"template"}, Chinese: true, Hints: []string{"推送加", "push+", "pushplus+"}, new: newPushPlus},
}

// Kinds lists the channel kinds (of Specs).
var Kinds = func() []string {
	var out []string
	for _, s := range Specs {
		out = append(out, s.Kind)
	}
	return out
}()

// SpecOf is a kind's Spec.
func SpecOf(kind string) (Spec, bool) {
	for _, s := range Specs {
		if s.Kind == kind {
			return s, true
		}
	}
	return Spec{}, false
}

// KeyURL makes a kind's webhook URL from a robot's key (WeCom's key,
// DingTalk's access_token, Feishu's hook token); false for a kind that
// takes no such key.
func KeyURL(kind, key string) (string, bool) {
	s, _ := SpecOf(kind)
	return s.KeyBase + key, s.KeyBase != ""
}

// KindHint says which kind was probably meant, for an unknown one:
// "wechat" → `WeCom is "wecom"`; "" when it has no guess.
func KindHint(kind string) string {
	k := strings.ToLower(kind)
	for _, s := range Specs {
		if slices.Contains(s.Hints, k) {
			return fmt.Sprintf("%s is %q", s.hintName(), s.Kind)
		}
	}
	return ""
}

// hintName is the service's name in a hint: "WeCom" of "WeCom group
// robots".
func (s Spec) hintName() string {
	if name, _, ok := strings.Cut(s.What, " "); ok {
		return name
	}
	return s.What
}

// Options configure a Channel.
type Options struct {
	Kind string // one of Kinds
	Name string // the channel's name in the config, e.g. "lab"
	// URL is the webhook URL, key included (a secret); for a kind with an
	// API base (Spec.API), that base, "" for the service's own.
	URL string
	// Key is the service's key for a kind with an API base (a SendKey, a
	// token, a device key, ntfy's access token); a secret.
	Key    string
	Secret string // the signing secret; "" when the bot does not sign
	// Topic is an ntfy channel's topic; Template a PushPlus channel's
	// template (default "markdown").
	Topic, Template string
	// Mail configures an email channel.
	Mail Mail
	// PerMinute lowers the kind's rate limit, or raises it where the
	// limit is ours, up to Spec.MaxPerMinute (0: Spec.PerMinute).
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

// Mail configures an email channel.
type Mail struct {
	SMTP string   // the server, "host:port"
	From string   // the sender address
	To   []string // the recipients
	// Username and Password authenticate (AUTH PLAIN); "" sends without.
	Username, Password string
	// TLS is MailSTARTTLS (default), MailTLS (implicit, port 465) or
	// MailNoTLS (plain text: refused with a password).
	TLS string
	// TLSConfig replaces the TLS settings (a server's own CA); its
	// ServerName defaults to SMTP's host.
	TLSConfig *tls.Config
}

// PushPlusTemplates are the PushPlus templates (its "template" field) a
// reply can be written in. PushPlus also documents cloudMonitor, jenkins,
// route and pay: each renders the JSON of one plug-in (Aliyun monitoring,
// Jenkins, a router, a payment), which a reply is not.
var PushPlusTemplates = []string{"markdown", "html", "txt", "json"}

// Email TLS modes.
const (
	MailSTARTTLS = "starttls"
	MailTLS      = "tls"
	MailNoTLS    = "none"
)

// MailTLSModes lists the email TLS modes.
var MailTLSModes = []string{MailSTARTTLS, MailTLS, MailNoTLS}

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
	spec, ok := SpecOf(o.Kind)
	if !ok {
		return nil, fmt.Errorf("push: unknown kind %q (want %s)", o.Kind, strings.Join(Kinds, ", "))
	}
	name := o.Kind
	if o.Name != "" {
		name += ":" + o.Name
	}
	if o.URL == "" && spec.API != "" {
		o.URL = spec.API
	}
	var u *url.URL
	if !spec.Mail {
		var err error
		u, err = url.Parse(o.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("push %s: the webhook URL is not an http(s) URL", name)
		}
		o.URL = strings.TrimRight(o.URL, "/")
	}
	if spec.KeyRequired && o.Key == "" {
		return nil, fmt.Errorf("push %s: no %s", name, spec.Key)
	}
	if o.Secret != "" && !spec.Signs {
		return nil, fmt.Errorf("push %s: %s do not sign messages", name, spec.What)
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
	o.Client = client
	d, err := spec.new(o)
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", name, err)
	}
	c := &Channel{name: name, kind: o.Kind, d: d, client: client, log: o.Logger.With("channel", name), now: o.Now}
	c.secrets = secretsOf(u, o.URL, o.Secret, o.Key, o.Topic, o.Mail.Password)
	per := spec.PerMinute
	if o.PerMinute > 0 && o.PerMinute <= spec.MaxPerMinute {
		per = o.PerMinute
	}
	c.pace = []chat.Window{{N: per, Per: time.Minute}}
	if spec.PerSecond > 0 {
		c.pace = append(c.pace, chat.Window{N: spec.PerSecond, Per: time.Second})
	}
	return c, nil
}

// secretsOf lists what must never be printed: the URL, the secrets (a
// signing secret, a key, a topic, a password), every query value (key=,
// access_token=), the last path segment (Feishu's hook token, Slack's
// and Discord's webhook token) and every path segment of 20 characters
// or more (a token before a suffix: Discord's …/TOKEN/slack).
func secretsOf(u *url.URL, raw string, secrets ...string) []string {
	out := append([]string{raw}, secrets...)
	if u != nil {
		out = append(out, u.String(), u.RawQuery, path.Base(u.Path))
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if len(seg) >= 20 {
				out = append(out, seg)
			}
		}
	}
	var keep []string
	for _, s := range out {
		if len(s) >= 4 && !slices.Contains(keep, s) && !slices.Contains(notSecret, s) {
			keep = append(keep, s)
		}
	}
	// Longest first, so that the URL goes before the key inside it.
	slices.SortFunc(keep, func(a, b string) int { return len(b) - len(a) })
	return keep
}

// notSecret are last path segments that are no token: WeCom's …/send,
// a generic …/hook, Discord's Slack- and GitHub-compatible suffixes.
var notSecret = []string{"send", "hook", "slack", "github"}

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
	if m, ok := c.d.(mailer); ok {
		if e := m.deliver(ctx, msg, c.now()); e != nil {
			return c.fail(e)
		}
		return nil
	}
	d := c.d.(poster)
	req, err := d.request(ctx, msg, c.now())
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
	// Before the dialect reads it: an answer that quotes the request (the
	// URL, its token) is cut to a snippet, which could keep only the start
	// of a token and so escape fail's redaction.
	body = []byte(c.redact(string(body)))
	if e := d.result(resp.StatusCode, resp.Header, body); e != nil {
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

// dialect is one channel kind's API: a poster (HTTP) or a mailer.
type dialect interface {
	// messages turns a reply into the messages to send, in order.
	messages(r chat.Reply) ([]any, error)
}

// poster is a dialect of an HTTP API.
type poster interface {
	dialect
	// request builds the (signed) request of one message.
	request(ctx context.Context, msg any, now time.Time) (*http.Request, error)
	// result reads the answer: nil when the message was taken.
	result(status int, h http.Header, body []byte) *Error
}

// mailer is a dialect that delivers a message itself (email over SMTP).
type mailer interface {
	dialect
	deliver(ctx context.Context, msg any, now time.Time) *Error
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

// postJSON is a JSON POST of msg to u: the request of the services that
// take one JSON object a message, unsigned.
func postJSON(ctx context.Context, u string, msg any) (*http.Request, error) {
	body, err := encodeJSON(msg)
	if err != nil {
		return nil, err
	}
	return jsonRequest(ctx, u, body)
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

// codeResult reads {"code":N,"message"|"msg":"…"} (ServerChan, PushPlus):
// ok is the code of success, and retry says whether another code may be
// tried again, after how long. A 408, 429 or 5xx status is temporary and
// another non-2xx one permanent, whatever the code inside.
func codeResult(status int, h http.Header, body []byte, ok int, retry func(code int, msg string) (bool, time.Duration)) *Error {
	var res struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
		Msg     string `json:"msg"`
	}
	readable := json.Unmarshal(body, &res) == nil && res.Code != nil
	if e := httpError(status, h, body); e != nil {
		if readable {
			e.Code, e.Msg = *res.Code, cmp.Or(res.Message, res.Msg, e.Msg)
		}
		return e
	}
	if !readable {
		return &Error{Op: "reply", Status: status, Msg: "unreadable answer: " + snippet(body), Temporary: true}
	}
	if *res.Code == ok {
		return nil
	}
	e := &Error{Op: "reply", Status: status, Code: *res.Code, Msg: cmp.Or(res.Message, res.Msg)}
	e.Temporary, e.After = retry(*res.Code, e.Msg)
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

package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/trainbot/trainbot/bot/chat"
)

// api calls the Bot API through the library with a context per call and
// errors that never contain the token.
//
// The library builds its requests without a context and puts the token in
// every URL, so a failed request's error ("Post \"https://…/bot<TOKEN>/…\"")
// carries the token. Each call runs on a copy of the BotAPI whose client
// attaches the call's context and scrubs the token from errors.
type api struct {
	bot   *tgbotapi.BotAPI // never used directly: copied per call
	http  *http.Client
	token string
}

func newAPI(token, endpoint string, client *http.Client) *api {
	b := &tgbotapi.BotAPI{Token: token, Client: client, Buffer: 100}
	b.SetAPIEndpoint(strings.TrimRight(endpoint, "/") + "/bot%s/%s")
	return &api{bot: b, http: client, token: token}
}

// ctxDoer is the per-call HTTP client.
type ctxDoer struct {
	ctx   context.Context
	c     *http.Client
	token string
}

func (d ctxDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req.WithContext(d.ctx))
	if err != nil {
		return nil, redact(err, d.token)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: maxAnswer}
	return resp, nil
}

// maxAnswer bounds what is read of one Bot API answer. The largest
// legitimate one is a getUpdates of 100 updates, each a message of at most
// 4096 characters with its entities and the message it replies to: a few
// MB at the very most. 16 MiB leaves room and keeps a broken or hostile
// server from filling the memory (a 208 MB getMe took trainbot to 903 MiB).
const maxAnswer = 16 << 20

// errAnswerTooLarge ends the reading of an answer over maxAnswer.
var errAnswerTooLarge = fmt.Errorf("the answer is larger than %d MiB", maxAnswer>>20)

// limitedBody reads at most left bytes of an answer, and fails after.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

func (a *api) with(ctx context.Context) *tgbotapi.BotAPI {
	b := *a.bot
	b.Client = ctxDoer{ctx: ctx, c: a.http, token: a.token}
	return &b
}

// request calls a method; its result is in the response.
func (a *api) request(ctx context.Context, method string, c tgbotapi.Chattable) (json.RawMessage, error) {
	resp, err := a.with(ctx).Request(c)
	if err != nil {
		return nil, a.wrap(method, err)
	}
	return resp.Result, nil
}

// getMe asks who the bot is; it checks the token.
func (a *api) getMe(ctx context.Context) (tgbotapi.User, error) {
	resp, err := a.with(ctx).MakeRequest("getMe", nil)
	if err != nil {
		return tgbotapi.User{}, a.wrap("getMe", err)
	}
	var u tgbotapi.User
	if err := json.Unmarshal(resp.Result, &u); err != nil {
		return tgbotapi.User{}, a.wrap("getMe", err)
	}
	return u, nil
}

// Error is a failed Bot API call: an error answer, or a request that did
// not get one. It never contains the token.
type Error struct {
	Method string
	// Code is the answer's error code (400, 403, 429, 500, …); 0 when the
	// request got no answer. Uploads' answers lack the code in the library:
	// it is then read from the description ("Bad Request: …").
	Code        int
	Description string
	// Retry is the wait a 429 answer asked for.
	Retry time.Duration
	// MigrateTo is set when a group became a supergroup with a new id.
	MigrateTo int64
	err       error // without the token
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("telegram " + e.Method + ": ")
	switch {
	case e.Description != "" && e.Code != 0 && !strings.HasPrefix(e.Description, fmt.Sprint(e.Code)):
		fmt.Fprintf(&b, "%d %s", e.Code, e.Description)
	case e.Description != "":
		b.WriteString(e.Description)
	case e.err != nil:
		b.WriteString(e.err.Error())
	default:
		fmt.Fprintf(&b, "error %d", e.Code)
	}
	if e.Retry > 0 && !strings.Contains(e.Description, "retry after") {
		fmt.Fprintf(&b, " (retry after %s)", e.Retry)
	}
	if e.MigrateTo != 0 {
		fmt.Fprintf(&b, " (the group is now chat %d: update the chat id)", e.MigrateTo)
	}
	return b.String()
}

// Unwrap returns the underlying error (a network error, a context error).
func (e *Error) Unwrap() error { return e.err }

// Reason says what happened for people: "Telegram answered 500 to
// sendMediaGroup", "Telegram could not be reached (sendPhoto)".
func (e *Error) Reason() string {
	if e.Code == 0 {
		return "Telegram could not be reached (" + e.Method + ")"
	}
	return fmt.Sprintf("Telegram answered %d to %s", e.Code, e.Method)
}

// sendError is what a failed call means to bot/deliver: Telegram refused
// the message itself (400: chat not found, message too long; 403: the bot
// was blocked or removed) — permanent; a 429 — try again after its
// retry_after; anything else — try again later. A refused token (401) is
// not permanent for a message: it goes out once the token is fixed and
// trainbot restarted.
func sendError(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Code == 400 || e.Code == 403 {
		return chat.Permanent(e.Reason(), e)
	}
	return chat.RetryAfter(e.Retry, e.Reason(), e)
}

// codes maps the start of an error description to its code, for answers
// whose code the library drops (uploads).
var codes = []struct {
	prefix string
	code   int
}{
	{"Bad Request", 400}, {"Unauthorized", 401}, {"Forbidden", 403}, {"Not Found", 404},
	{"Conflict", 409}, {"Too Many Requests", 429}, {"Internal Server Error", 500},
	{"Bad Gateway", 502}, {"Gateway Timeout", 504},
}

func (a *api) wrap(method string, err error) error {
	e := &Error{Method: method}
	var te *tgbotapi.Error
	if errors.As(err, &te) {
		e.Code = te.Code
		e.Description = scrub(te.Message, a.token)
		e.Retry = time.Duration(te.RetryAfter) * time.Second
		e.MigrateTo = te.MigrateToChatID
		if e.Code == 0 {
			e.Code = 500 // an answer without a known code: treat as a server error
			for _, c := range codes {
				if strings.HasPrefix(e.Description, c.prefix) {
					e.Code = c.code
				}
			}
		}
		if e.Retry > 0 {
			e.Code = 429
		}
		return e
	}
	e.err = redact(err, a.token)
	return e
}

// retryAfter is the wait a 429 answer asked for, 0 if none.
func retryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.Retry
	}
	return 0
}

// apiCode is the Bot API error code of err, 0 if none.
func apiCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func description(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Description
	}
	return ""
}

// redacted is an error whose text had the token removed.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// redact returns err without the token in its text, keeping what
// errors.Is needs (context errors, timeouts). A *url.Error is rebuilt with
// the token cut from its URL.
func redact(err error, token string) error {
	if err == nil || token == "" {
		return err
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = &url.Error{Op: ue.Op, URL: scrub(ue.URL, token), Err: ue.Err}
		if ue.Err != nil && strings.Contains(ue.Err.Error(), token) {
			inner = &url.Error{Op: ue.Op, URL: scrub(ue.URL, token), Err: errors.New(scrub(ue.Err.Error(), token))}
		}
	}
	return &redacted{msg: scrub(err.Error(), token), err: inner}
}

// scrub replaces the token, and its URL-escaped form, in s.
func scrub(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<token>")
	if esc := url.PathEscape(token); esc != token {
		s = strings.ReplaceAll(s, esc, "<token>")
	}
	return s
}

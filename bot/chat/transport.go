package chat

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Receiver delivers what users send.
type Receiver interface {
	// Name is the transport's name in chat keys and subscriptions
	// ("telegram").
	Name() string
	// Receive calls deliver for each incoming message — one at a time per
	// chat, in order — until ctx ends or the input ends. It returns nil at
	// the end of input or of ctx, and an error when it cannot go on; a
	// PermanentError (IsPermanent) says that starting it again cannot help
	// until the config changes (a refused token).
	Receive(ctx context.Context, deliver func(context.Context, Message)) error
}

// Sender delivers replies.
type Sender interface {
	// Name is the transport's name ("telegram", "wecom:lab").
	Name() string
	// Send makes one attempt to deliver r to chat: the messages r becomes
	// (its text split at the service's limit, its charts), from the
	// skip-th on, since an earlier attempt delivered those. It returns how
	// many of them are delivered in all, the skipped ones included, and an
	// error when not all are: a *SendError says whether and when to try
	// again; any other error is taken as temporary. Send never tries again
	// on its own and never waits for a rate limit: bot/deliver does both.
	Send(ctx context.Context, chat int64, r Reply, skip int) (int, error)
}

// ChartUploader is implemented by senders whose charts go out as uploads
// of their own after the text (Telegram's photos and albums, WeCom's image
// messages). Delivery then sends a reply's text in order with the chat's
// other replies and its charts on a side path, so that a slow or refused
// upload holds back no later reply.
type ChartUploader interface {
	// UploadsCharts reports whether the sender's charts are uploads of
	// their own.
	UploadsCharts() bool
}

// InPlaceProgress is implemented by senders that show the KindProgress
// replies of one run in one chat as a single message edited in place.
type InPlaceProgress interface {
	// ProgressInPlace reports whether a progress reply replaces the
	// previous one of the same run instead of adding a message.
	ProgressInPlace() bool
}

// Window is a rate limit: at most N messages in any span of Per.
type Window struct {
	N   int
	Per time.Duration
}

// Paced is implemented by senders whose service limits how often they may
// send. Delivery keeps the limits; the sender never waits.
type Paced interface {
	// Pace returns the limits of one chat, and of all chats of the sender
	// together.
	Pace(chat int64) (perChat, perSender []Window)
}

// SendError is a failed attempt, as a sender judges it.
type SendError struct {
	// Reason says for people what went wrong: "Telegram answered 500 to
	// sendMediaGroup".
	Reason string
	// Permanent says that trying again cannot help (a chat that does not
	// exist, a bad webhook key, a message the service refuses).
	Permanent bool
	// After is the least wait before the next attempt the service asked
	// for (a 429's retry_after); 0: none asked.
	After time.Duration
	Err   error
}

// Error is the underlying error's text (it has the details for the log),
// or the reason when there is none.
func (e *SendError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *SendError) Unwrap() error { return e.Err }

// Permanent returns err as a refusal that trying again cannot help.
func Permanent(reason string, err error) error {
	return &SendError{Reason: reason, Permanent: true, Err: err}
}

// RetryAfter returns err as a temporary failure after which the service
// asked to wait at least d.
func RetryAfter(d time.Duration, reason string, err error) error {
	return &SendError{Reason: reason, After: d, Err: err}
}

// Classify says what an error of Send or Receive means: permanent, or
// temporary with the least wait asked for. A nil error is neither.
func Classify(err error) (permanent bool, after time.Duration) {
	var se *SendError
	if errors.As(err, &se) {
		return se.Permanent, se.After
	}
	return false, 0
}

// IsPermanent reports whether err says that trying again cannot help.
func IsPermanent(err error) bool {
	p, _ := Classify(err)
	return p
}

// ReasonOf is what err says for people: a SendError's Reason, else the
// error's text.
func ReasonOf(err error) string {
	var se *SendError
	if errors.As(err, &se) && se.Reason != "" {
		return se.Reason
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// Link is what a receiver knows of its connection to its service, for
// /healthz: a transport that reconnects inside Receive (Telegram's poll
// loop, inbound.Loop) does not return when it loses its connection, so
// only this tells that it has not been connected for a while.
type Link struct {
	// Connected says that the last attempt to reach the service got
	// through (Telegram answered getMe or getUpdates; the long connection
	// is up).
	Connected bool
	// Since is when it connected, or when it lost its connection (when
	// Receive began, for one never connected); zero before Receive.
	Since time.Time
	// Err is the last failure while not connected.
	Err error
	// Backoff is the longest pause between two attempts to connect (the
	// cap of its backoff): not connected for longer than that is no
	// passing blip.
	Backoff time.Duration
}

// Linked is implemented by receivers that report their connection.
type Linked interface {
	// Link returns the connection's state now.
	Link() Link
}

// LinkState keeps a receiver's Link; it is safe for concurrent use. The
// zero value is before Receive.
type LinkState struct {
	mu sync.Mutex
	l  Link
}

// Begin is called when Receive begins: not connected from now, unless
// connected already; backoff is the cap of its pauses.
func (s *LinkState) Begin(backoff time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Backoff = backoff
	if !s.l.Connected {
		s.l.Since, s.l.Err = time.Now(), nil
	}
}

// Up says that the service was reached.
func (s *LinkState) Up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.l.Connected {
		s.l.Connected, s.l.Since, s.l.Err = true, time.Now(), nil
	}
}

// Down says that an attempt failed, or the connection was lost, with err.
func (s *LinkState) Down(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l.Connected || s.l.Since.IsZero() {
		s.l.Connected, s.l.Since = false, time.Now()
	}
	s.l.Err = err
}

// Link returns the state now.
func (s *LinkState) Link() Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l
}

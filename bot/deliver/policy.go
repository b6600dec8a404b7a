package deliver

import (
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/reconnect"
)

// Policy is trainbot's only retry policy: no transport, no notifier and no
// outbox tries again on its own. Each attempt is one call of the sender's
// Send, which makes one HTTP request per message of the reply not yet
// delivered (a reply of one message: one request).
//
// After the n-th failed attempt of an envelope the lane waits
// MinBackoff·2ⁿ⁻¹, at most MaxBackoff, or longer when the service asked
// (a 429's retry_after). A durable envelope is tried until it is delivered
// or refused for good; with the defaults that is at most 19 attempts in
// its first hour and 12 an hour after that (TestPolicyAttemptsPerHour).
// An ephemeral one (live progress) gets EphemeralTries attempts, unless a
// newer one replaces it first; a reply's charts get ChartTries, ChartPause
// apart, and then become one text that says why.
type Policy struct {
	MinBackoff, MaxBackoff time.Duration
	EphemeralTries         int
	ChartTries             int
	ChartPause             time.Duration
}

// DefaultPolicy is the policy of trainbot.
var DefaultPolicy = Policy{
	MinBackoff:     2 * time.Second,
	MaxBackoff:     5 * time.Minute,
	EphemeralTries: 3,
	ChartTries:     2,
	ChartPause:     3 * time.Second,
}

// Verdict is what to do after a failed attempt.
type Verdict struct {
	GiveUp    bool
	Permanent bool          // given up because the sender said trying again cannot help
	Wait      time.Duration // before the next attempt, when not given up
}

// Decide judges the failures-th failed attempt of an envelope.
func (p Policy) Decide(failures int, durable, charts bool, err error) Verdict {
	permanent, after := chat.Classify(err)
	switch {
	case permanent:
		return Verdict{GiveUp: true, Permanent: true}
	case charts && failures >= p.ChartTries:
		return Verdict{GiveUp: true}
	case charts:
		return Verdict{Wait: max(p.ChartPause, after)}
	case !durable && failures >= p.EphemeralTries:
		return Verdict{GiveUp: true}
	}
	return Verdict{Wait: max(p.Backoff(failures), after)}
}

// Backoff is the pause after the failures-th failed attempt in a row:
// reconnect.Backoff's delay, the same count as the transports' reconnects,
// without jitter (an envelope's lane is alone in waiting for it).
func (p Policy) Backoff(failures int) time.Duration {
	return reconnect.Backoff{Initial: p.MinBackoff, Max: p.MaxBackoff}.Delay(failures)
}

package reconnect_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/reconnect"
)

func TestDelayDoublesToItsCap(t *testing.T) {
	cases := []struct {
		name string
		b    reconnect.Backoff
		want []time.Duration // Delay(1), Delay(2), …
	}{
		{"defaults", reconnect.Backoff{}, []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}},
		{"dingtalk's", reconnect.Backoff{Initial: time.Second, Max: time.Minute}, []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}},
		{"factor 3", reconnect.Backoff{Initial: time.Second, Max: 100 * time.Second, Factor: 3}, []time.Duration{1, 3, 9, 27, 81, 100}},
		{"factor 1 is constant", reconnect.Backoff{Initial: 2 * time.Second, Factor: 1}, []time.Duration{2, 2, 2}},
		{"a cap below the start wins", reconnect.Backoff{Initial: 10 * time.Second, Max: 3 * time.Second}, []time.Duration{3, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, w := range tc.want {
				if got := tc.b.Delay(i + 1); got != w*time.Second {
					t.Errorf("Delay(%d) = %s, want %s", i+1, got, w*time.Second)
				}
			}
		})
	}
	b := reconnect.Backoff{}
	if got := b.Delay(0); got != time.Second {
		t.Errorf("Delay(0) = %s, want the first pause, 1s", got)
	}
	if got := b.Delay(1 << 40); got != 5*time.Minute {
		t.Errorf("Delay(2^40) = %s, want the cap", got)
	}
}

func TestNextCountsJittersAndResets(t *testing.T) {
	r := 0.5
	b := reconnect.Backoff{Initial: time.Second, Max: 8 * time.Second, Jitter: 0.2, Rand: func() float64 { return r }}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{900 * time.Millisecond, 1800 * time.Millisecond, 3600 * time.Millisecond, 7200 * time.Millisecond, 7200 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("Next × 5 = %v, want %v", got, want)
	}
	if b.Failures() != 5 {
		t.Errorf("Failures = %d, want 5", b.Failures())
	}
	b.Reset()
	r = 0 // the top of the range: the delay itself
	if got := b.Next(); got != time.Second || b.Failures() != 1 {
		t.Errorf("after Reset: Next = %s with %d failures, want 1s with 1", got, b.Failures())
	}
	r = 0.999999
	b.Jitter = 5 // taken as 0.9: never 0
	if got := b.Next(); got < 199*time.Millisecond || got > 2*time.Second {
		t.Errorf("Next with too much jitter = %s, want within [0.2s, 2s]", got)
	}
}

// fakeClock's Sleep records the pause and moves the time on at once.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	cancel context.CancelFunc // called on the last sleep
	sleeps int                // sleeps before cancel
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	if len(c.slept) >= c.sleeps {
		c.cancel()
	}
	return ctx.Err()
}

// session is one scripted connection: it lasts up, calls healthy or not,
// and ends with err.
type session struct {
	up      time.Duration
	healthy bool
	err     error
}

// runScript runs the sessions, each once, and returns the pauses between
// them, the log and Run's error.
func runScript(t *testing.T, l reconnect.Loop, script []session) ([]time.Duration, string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := &fakeClock{now: time.Unix(1e9, 0), cancel: cancel, sleeps: len(script)}
	var logs bytes.Buffer
	l.Log = slog.New(slog.NewTextHandler(&logs, nil))
	l.Now, l.Sleep = clock.Now, clock.Sleep
	l.Backoff.Rand = func() float64 { return 0 }
	calls := 0
	err := l.Run(ctx, func(ctx context.Context, healthy func()) error {
		if calls >= len(script) {
			t.Fatalf("session %d: past the script", calls+1)
		}
		s := script[calls]
		calls++
		clock.now = clock.now.Add(s.up)
		if s.healthy {
			healthy()
		}
		return s.err
	})
	return clock.slept, logs.String(), err
}

var errDropped = errors.New("dingtalk: the server asked to reconnect (SYSTEM disconnect)")

// TestRoutineDropsWaitTheFirstPause is DingTalk's routine drop: a session
// that got frames and had its pings answered for 70 s is lost; the next
// one comes after Initial, every time, and each loss is logged.
func TestRoutineDropsWaitTheFirstPause(t *testing.T) {
	l := reconnect.Loop{Backoff: reconnect.Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.2}}
	var script []session
	for range 5 {
		script = append(script, session{up: 70 * time.Second, healthy: true, err: errDropped})
	}
	slept, logs, err := runScript(t, l, script)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second}; !slices.Equal(slept, want) {
		t.Errorf("pauses %v, want %v", slept, want)
	}
	if n := strings.Count(logs, "connection lost; reconnecting"); n != 5 {
		t.Errorf("%d losses logged, want 5:\n%s", n, logs)
	}
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "healthy=true") || !strings.Contains(logs, "up=1m10s") || !strings.Contains(logs, "SYSTEM disconnect") {
		t.Errorf("log lines lack their key/values:\n%s", logs)
	}
}

func TestLoopBacksOffUntilHealthy(t *testing.T) {
	refused := errors.New("connect: connection refused")
	cases := []struct {
		name   string
		stable time.Duration
		script []session
		want   []time.Duration // seconds
	}{
		{"failed connects double", 0, []session{{err: refused}, {err: refused}, {err: refused}, {err: refused}},
			[]time.Duration{1, 2, 4, 8}},
		{"a healthy session starts over", 0, []session{{err: refused}, {err: refused}, {up: time.Second, healthy: true, err: errDropped}, {err: refused}},
			[]time.Duration{1, 2, 1, 2}},
		{"long but never healthy sessions double", 0, []session{{up: time.Hour, err: errDropped}, {up: time.Hour, err: errDropped}},
			[]time.Duration{1, 2}},
		{"Stable counts as healthy", time.Minute, []session{{err: refused}, {up: time.Minute, err: errDropped}, {up: time.Second, err: errDropped}},
			[]time.Duration{1, 1, 2}},
		{"a longer retry-after is kept", 0, []session{{err: chat.RetryAfter(90*time.Second, "throttled", refused)}, {err: chat.RetryAfter(time.Millisecond, "throttled", refused)}},
			[]time.Duration{90, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := reconnect.Loop{Backoff: reconnect.Backoff{Initial: time.Second, Max: time.Minute}, Stable: tc.stable}
			slept, logs, err := runScript(t, l, tc.script)
			if err != nil {
				t.Fatal(err)
			}
			var want []time.Duration
			for _, w := range tc.want {
				want = append(want, w*time.Second)
			}
			if !slices.Equal(slept, want) {
				t.Errorf("pauses %v, want %v", slept, want)
			}
			if n := strings.Count(logs, "level=WARN"); n != len(tc.script) {
				t.Errorf("%d warnings for %d losses:\n%s", n, len(tc.script), logs)
			}
		})
	}
}

func TestLoopEnds(t *testing.T) {
	refused := errors.New("connect: connection refused")
	gone := chat.Permanent("refused the token", errors.New("401"))
	var link chat.LinkState
	var losses []reconnect.Loss
	l := reconnect.Loop{Link: &link, Backoff: reconnect.Backoff{Max: 7 * time.Second}, OnLoss: func(x reconnect.Loss) { losses = append(losses, x) }}
	slept, _, err := runScript(t, l, []session{{err: refused}, {err: gone}})
	if !errors.Is(err, gone) {
		t.Fatalf("Run = %v, want the permanent error", err)
	}
	if len(slept) != 1 || len(losses) != 1 || losses[0].Failures != 1 || losses[0].Wait != time.Second || !errors.Is(losses[0].Err, refused) {
		t.Errorf("pauses %v, losses %+v: want one, of 1s, for the temporary error", slept, losses)
	}
	if got := link.Link(); got.Connected || !errors.Is(got.Err, gone) || got.Backoff != 7*time.Second {
		t.Errorf("link %+v: want down with the permanent error, backoff 7s", got)
	}

	slept, logs, err := runScript(t, reconnect.Loop{}, []session{{err: nil}})
	if err != nil || len(slept) != 0 || logs != "" {
		t.Errorf("a session that ended: Run = %v after pauses %v, log %q; want nil at once, no log", err, slept, logs)
	}
}

func TestLoopStopsWithItsContext(t *testing.T) {
	t.Run("during a session", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		var logs bytes.Buffer
		err := reconnect.Loop{Log: slog.New(slog.NewTextHandler(&logs, nil))}.Run(ctx, func(context.Context, func()) error {
			calls++
			cancel()
			return errors.New("read: use of closed network connection")
		})
		if err != nil || calls != 1 || logs.Len() != 0 {
			t.Errorf("Run = %v after %d sessions, log %q; want nil after one, no log", err, calls, logs.String())
		}
	})
	t.Run("during a pause", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		l := reconnect.Loop{Backoff: reconnect.Backoff{Initial: time.Hour}, OnLoss: func(reconnect.Loss) { cancel() }} // the real clock
		done := make(chan error, 1)
		go func() {
			done <- l.Run(ctx, func(context.Context, func()) error { calls++; return errors.New("read: reset") })
		}()
		select {
		case err := <-done:
			if err != nil || calls != 1 {
				t.Errorf("Run = %v after %d sessions, want nil after one", err, calls)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the hour's pause was not cut short by the context")
		}
	})
}

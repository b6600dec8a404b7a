package dingtalk_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chattest"
)

// disconnect is DingTalk's routine SYSTEM disconnect: reconnect, please.
func (f *fake) disconnect(id string) bool {
	return f.push(map[string]any{"specVersion": "1.0", "type": "SYSTEM",
		"headers": map[string]string{"topic": "disconnect", "messageId": id}, "data": `{"reason":"routine"}`})
}

// pauseRE reads the pause of each loss from the log.
var pauseRE = regexp.MustCompile(`msg="(connection lost; reconnecting|still cannot connect; retrying)"[^\n]*? in=(\S+)`)

// pauses returns the pauses the log tells, in order.
func pauses(t *testing.T, logs string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, m := range pauseRE.FindAllStringSubmatch(logs, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("pause %q: %v", m[2], err)
		}
		out = append(out, d)
	}
	return out
}

// TestRoutineDropsReconnectAfterTheFirstPause: DingTalk drops its long
// connection as a matter of course and does not push a robot message
// missed meanwhile again. A session that proved healthy (its ping was
// answered) and then was asked to reconnect comes back after the first
// pause, every time, and every loss is logged; sessions lost without a
// frame still back off.
func TestRoutineDropsReconnectAfterTheFirstPause(t *testing.T) {
	f := newFake(t)
	s := newStack(t, f, chattest.Options{Access: access})
	const drops = 5
	var gaps []time.Duration
	for i := range drops {
		ping := fmt.Sprintf("p%d", i)
		if !f.Ping(ping) || !chattest.Await(func() bool { return f.Acks(ping) == 1 }) {
			t.Fatalf("drop %d: the ping was not answered; log:\n%s", i+1, s.Logs.String())
		}
		opened := f.Opened()
		asked := time.Now()
		if !f.disconnect(fmt.Sprintf("d%d", i)) {
			t.Fatalf("drop %d: no connection to ask", i+1)
		}
		if !chattest.Await(func() bool { return f.Opened() > opened && f.connected() }) {
			t.Fatalf("drop %d: no reconnect; log:\n%s", i+1, s.Logs.String())
		}
		gaps = append(gaps, time.Since(asked).Round(time.Millisecond))
	}
	logs := s.Logs.String()
	got := pauses(t, logs)
	t.Logf("pauses after %d routine drops: %v (reconnected after %v)", drops, got, gaps)
	minBackoff := options(f, nil, nil).MinBackoff
	if len(got) != drops {
		t.Fatalf("%d pauses logged for %d drops:\n%s", len(got), drops, logs)
	}
	for i, d := range got {
		if d > minBackoff {
			t.Errorf("drop %d: paused %s, want at most the first pause, %s", i+1, d, minBackoff)
		}
	}
	if n := strings.Count(logs, "connection lost; reconnecting"); n != drops {
		t.Errorf("%d losses told as such, want %d:\n%s", n, drops, logs)
	}

	// Two drops of sessions that never got a frame: the pause grows.
	for i := range 2 {
		opened := f.Opened()
		f.Drop()
		if !chattest.Await(func() bool { return f.Opened() > opened && f.connected() }) {
			t.Fatalf("silent drop %d: no reconnect; log:\n%s", i+1, s.Logs.String())
		}
	}
	got = pauses(t, s.Logs.String())
	if len(got) != drops+2 || got[drops] < minBackoff*2*8/10 || got[drops+1] < minBackoff*4*8/10 {
		t.Errorf("pauses %v: want the last two to grow (about %s and %s)", got, 2*minBackoff, 4*minBackoff)
	}
}

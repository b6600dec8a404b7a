package deliver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// QuietHours is a daily span of local time during which a destination gets
// only alerts of MinSeverity or above: progress and notices are dropped,
// other alerts are held until the span ends. Answers to commands always
// go. The zero value is never quiet.
type QuietHours struct {
	Start, End  int // minutes after midnight; Start == End means no span
	MinSeverity chat.Severity
	Location    *time.Location // nil: time.Local
}

// ParseQuietHours reads a span such as "23:00-08:00" (it may cross
// midnight); min is the lowest severity that still goes out during it.
func ParseQuietHours(span string, min chat.Severity) (QuietHours, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(span), "-")
	if !ok {
		return QuietHours{}, fmt.Errorf("want a span of local time such as \"23:00-08:00\", got %q", span)
	}
	start, err := clockMinutes(a)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %v", span, err)
	}
	end, err := clockMinutes(b)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %v", span, err)
	}
	if start == end {
		return QuietHours{}, fmt.Errorf("%q: the span starts and ends at the same time", span)
	}
	return QuietHours{Start: start, End: end, MinSeverity: min}, nil
}

func clockMinutes(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) || len(m) != 2 {
		return 0, fmt.Errorf("%q is not a time of day like 23:00", strings.TrimSpace(s))
	}
	return (hh*60 + mm) % (24 * 60), nil
}

// IsZero reports whether q is never quiet.
func (q QuietHours) IsZero() bool { return q.Start == q.End }

func (q QuietHours) String() string {
	if q.IsZero() {
		return ""
	}
	return fmt.Sprintf("%02d:%02d-%02d:%02d", q.Start/60, q.Start%60, q.End/60, q.End%60)
}

// Decision is what to do with a push now.
type Decision int

// Decisions.
const (
	Send Decision = iota // send it now
	Hold                 // send it when the quiet hours end
	Drop                 // do not send it (progress during quiet hours)
)

// Decide says whether r may go out at now. For Hold, until is when the
// quiet hours end.
func (q QuietHours) Decide(now time.Time, r chat.Reply) (d Decision, until time.Time) {
	if q.IsZero() {
		return Send, time.Time{}
	}
	loc := q.Location
	if loc == nil {
		loc = time.Local
	}
	t := now.In(loc)
	cur := t.Hour()*60 + t.Minute()
	inside := false
	if q.Start < q.End {
		inside = cur >= q.Start && cur < q.End
	} else {
		inside = cur >= q.Start || cur < q.End
	}
	if !inside {
		return Send, time.Time{}
	}
	if r.Kind == chat.KindReply {
		return Send, time.Time{} // the answer to what someone just typed
	}
	sev := chat.SeverityOf(r)
	switch {
	case sev == chat.SeverityProgress:
		return Drop, time.Time{}
	case sev >= q.MinSeverity:
		return Send, time.Time{}
	}
	end := time.Date(t.Year(), t.Month(), t.Day(), q.End/60, q.End%60, 0, 0, loc)
	if !end.After(t) {
		end = time.Date(t.Year(), t.Month(), t.Day()+1, q.End/60, q.End%60, 0, 0, loc)
	}
	return Hold, end
}

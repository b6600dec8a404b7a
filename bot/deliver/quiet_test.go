package deliver

import (
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

func TestQuietHoursDecide(t *testing.T) {
	loc := time.FixedZone("CST", 8*3600)
	at := func(h, m int) time.Time { return time.Date(2030, 3, 9, h, m, 0, 0, loc) }
	night, err := ParseQuietHours("23:00-08:00", chat.SeverityWarning)
	if err != nil {
		t.Fatal(err)
	}
	night.Location = loc
	lunch, _ := ParseQuietHours("12:00-13:30", chat.SeverityCritical)
	lunch.Location = loc
	progress := chat.Reply{Kind: chat.KindProgress}
	notice := chat.Reply{Kind: chat.KindNotice}
	finished := chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertFinished}
	stalled := chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertStalled}
	oom := chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertOOM}
	unknown := chat.Reply{Kind: chat.KindAlert}
	cases := []struct {
		name  string
		q     QuietHours
		now   time.Time
		r     chat.Reply
		want  Decision
		until time.Time
	}{
		{"never quiet", QuietHours{}, at(3, 0), progress, Send, time.Time{}},
		{"day: progress goes", night, at(14, 0), progress, Send, time.Time{}},
		{"day: finished goes", night, at(22, 59), finished, Send, time.Time{}},
		{"night: progress dropped", night, at(23, 0), progress, Drop, time.Time{}},
		{"night: started notice dropped", night, at(2, 0), notice, Drop, time.Time{}},
		{"night before midnight: finished held to the morning", night, at(23, 30), finished, Hold, time.Date(2030, 3, 10, 8, 0, 0, 0, loc)},
		{"night after midnight: finished held to 08:00", night, at(7, 59), finished, Hold, at(8, 0)},
		{"night: stalled (warning) goes", night, at(3, 0), stalled, Send, time.Time{}},
		{"night: oom goes", night, at(3, 0), oom, Send, time.Time{}},
		{"night: an alert of no known kind is critical", night, at(3, 0), unknown, Send, time.Time{}},
		{"end is exclusive", night, at(8, 0), progress, Send, time.Time{}},
		{"lunch: stalled held", lunch, at(12, 10), stalled, Hold, at(13, 30)},
		{"lunch: oom goes", lunch, at(13, 29), oom, Send, time.Time{}},
		{"lunch over", lunch, at(13, 30), stalled, Send, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, until := c.q.Decide(c.now, c.r)
			if d != c.want || !until.Equal(c.until) {
				t.Errorf("got %v until %s, want %v until %s", d, until, c.want, c.until)
			}
		})
	}
}

func TestParseQuietHours(t *testing.T) {
	q, err := ParseQuietHours(" 22:30 - 7:05 ", chat.SeverityInfo)
	if err != nil || q.Start != 22*60+30 || q.End != 7*60+5 || q.String() != "22:30-07:05" {
		t.Errorf("got %+v %v", q, err)
	}
	if q, err := ParseQuietHours("00:00-24:00", chat.SeverityInfo); err == nil {
		t.Errorf("00:00-24:00 accepted as %+v: it starts and ends at midnight", q)
	}
	for _, bad := range []string{"", "23:00", "23-08", "25:00-08:00", "23:00-08:60", "23:00-23:00", "ab:cd-08:00", "23:0-08:00"} {
		if _, err := ParseQuietHours(bad, chat.SeverityInfo); err == nil {
			t.Errorf("ParseQuietHours(%q) accepted it", bad)
		}
	}
	for s, want := range map[string]chat.Severity{"info": chat.SeverityInfo, "Warning": chat.SeverityWarning, "critical": chat.SeverityCritical} {
		if got, err := chat.ParseSeverity(s); err != nil || got != want {
			t.Errorf("chat.ParseSeverity(%q) = %v %v", s, got, err)
		}
	}
	if _, err := chat.ParseSeverity("progress"); err == nil {
		t.Error("progress is not a severity one can ask for")
	}
}

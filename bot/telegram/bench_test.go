package telegram_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

// BenchmarkCommandReply measures command-to-reply latency through the fake
// Bot API: a user's 状态 is pushed to the fake, the bot's long poll gets it,
// the router answers (auth, audit row, history read) and the reply arrives
// at the fake. Each command comes from another user's private chat, so the
// per-chat pace does not queue them; the pace is Telegram's default. The
// answer goes through the delivery pipeline (stored in the outbox first).
// The baseline, measured in the same run, is one Send of a reply (one
// sendMessage round trip, no poll, no router, no outbox).
//
//	go test -run XXX -bench CommandReply -benchtime 1000x ./bot/telegram
func BenchmarkCommandReply(b *testing.B) {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	viewers := make([]int64, b.N)
	for i := range viewers {
		viewers[i] = int64(100_000 + i)
	}
	s := newStack(b, fake, b.TempDir(), stackOptions{access: command.Access{Viewers: viewers}, opts: func(o *telegram.Options) {
		o.PrivatePace, o.GroupPace, o.GlobalPace = telegram.DefaultPrivatePace, telegram.DefaultGroupPace, []chat.Window{{N: 1000, Per: time.Millisecond}}
	}})
	if !fake.Await(wait, func() bool { return len(fake.Commands()) > 0 }) {
		b.Fatal("the bot did not connect")
	}
	ctx := context.Background()
	base := make([]time.Duration, 0, b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i, user := range viewers {
		t0 := time.Now()
		if _, err := s.tr.Send(ctx, -int64(i+1), chat.Reply{Text: "baseline"}, 0); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))

		t0 = time.Now()
		fake.UserSays(user, "状态")
		var sent time.Time
		if !fake.Await(wait, func() bool {
			msgs := fake.Messages(user)
			if len(msgs) > 0 {
				sent = msgs[0].Sent
				return true
			}
			return false
		}) {
			b.Fatalf("command %d: no reply", i)
		}
		lat = append(lat, sent.Sub(t0))
	}
	b.StopTimer()
	p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
	b50, b99 := quantile(base, 0.5), quantile(base, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(b50), "baseline-p50-ms")
	b.ReportMetric(ms(b99), "baseline-p99-ms")
	b.ReportMetric(float64(p50)/float64(b50), "p50/baseline")
	if n := len(fake.Requests("sendMessage")); n != 2*b.N {
		b.Errorf("%d sendMessage calls for %d commands and %d baseline sends", n, b.N, b.N)
	}
}

// BenchmarkProgressHour counts what a one-hour run with a 10 s progress
// interval sends, with time scaled down 360 times: a real demo run of 10 s
// with a 27.8 ms progress interval (pacing scaled out as well) whose
// metrics change at every interval. The baseline is one message per
// progress update: 360.
//
//	go test -run XXX -bench ProgressHour -benchtime 1x ./bot/telegram
func BenchmarkProgressHour(b *testing.B) {
	const scale = 360
	interval := 10 * time.Second / scale
	for range b.N {
		fake := telegramtest.NewServer(token)
		s := newStack(b, fake, b.TempDir(), stackOptions{access: command.Access{Operators: []int64{operator}},
			// 3600 steps of 2.78 ms, a metric line every 10 steps: the
			// progress changes at every interval, as in a real hour-long run.
			job: demoJob(3600, 2778*time.Microsecond), interval: interval})
		fake.UserSays(operator, "开始")
		if !fake.Await(5*time.Minute, func() bool {
			for _, m := range fake.Messages(operator) {
				if !m.Silent && strings.Contains(m.Text, "finished after") {
					return true
				}
			}
			return false
		}) {
			b.Fatal("the run did not finish")
		}
		var run time.Duration
		if r, err := s.st.Run(context.Background(), 1); err == nil {
			run = r.Duration(time.Now())
		}
		s.close(b)
		fake.Close()
		msgs := fake.Messages(operator)
		edits := len(fake.Requests("editMessageText"))
		b.ReportMetric(float64(len(msgs)), "messages/run")
		b.ReportMetric(float64(edits), "edits/run")
		b.ReportMetric(float64(run*scale)/float64(time.Minute), "scaled-run-min")
		b.ReportMetric(360/float64(len(msgs)), "baseline360/messages")
		var kinds []string
		for _, m := range msgs {
			first, _, _ := strings.Cut(telegramtest.Plain(m.Text), "\n")
			kinds = append(kinds, first)
		}
		b.Logf("messages: %q", kinds)
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

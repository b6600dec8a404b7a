package receivers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// scriptedTransport's Receive returns the next of its results (nil: end of
// input; errPanic: panics); past the end it runs until ctx ends.
type scriptedTransport struct {
	name    string
	mu      sync.Mutex
	results []error
	runs    int
}

var (
	_        chat.Receiver = (*scriptedTransport)(nil)
	errPanic               = errors.New("panic please")
)

func (s *scriptedTransport) Name() string { return s.name }

func (s *scriptedTransport) Receive(ctx context.Context, _ func(context.Context, chat.Message)) error {
	s.mu.Lock()
	s.runs++
	if len(s.results) == 0 {
		s.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	err := s.results[0]
	s.results = s.results[1:]
	s.mu.Unlock()
	if err == errPanic {
		panic("transport bug")
	}
	return err
}

func (s *scriptedTransport) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

// lastingErr is a permanent error, as Telegram's refused token.
var lastingErr = chat.Permanent("Telegram refused the token", errors.New("token refused (telegram getUpdates: 401 Unauthorized)"))

type report struct {
	text, except string
	kind         chat.Kind
	alert        string
}

// reports collects what Run reported.
type reports struct {
	mu  sync.Mutex
	got []report
}

func (r *reports) add(words func(i18n.Lang) chat.Reply, except string) {
	reply := words(i18n.ZhEn)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, report{reply.Text, except, reply.Kind, reply.Alert})
}

func (r *reports) list() []report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]report(nil), r.got...)
}

// await polls cond until it holds or a deadline passes.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTransportsRestartReportAndGoOn(t *testing.T) {
	boom := errors.New("read input: input/output error")
	cases := []struct {
		name        string
		results     []error
		stable      time.Duration
		wantRuns    int // Run calls once the script is played
		wantReports int
		wantEnded   bool
		wantInLog   string
	}{
		{name: "temporary failures are started again and reported once", results: []error{boom, boom, boom},
			stable: time.Hour, wantRuns: 4, wantReports: 1, wantInLog: "starting it again"},
		{name: "a run that lasted Stable starts a new episode, reported again", results: []error{boom, boom},
			stable: time.Nanosecond, wantRuns: 3, wantReports: 2, wantInLog: "starting it again"},
		{name: "a panic is a failure", results: []error{errPanic},
			stable: time.Hour, wantRuns: 2, wantReports: 1, wantInLog: "transport panicked"},
		{name: "a lasting error is not tried again", results: []error{boom, lastingErr},
			stable: time.Hour, wantRuns: 2, wantReports: 2, wantInLog: "no chat transport left and no push channel"},
		{name: "end of input ends nothing", results: []error{nil},
			stable: time.Hour, wantRuns: 1, wantEnded: true, wantInLog: "no chat transport left and no push channel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			rep := &reports{}
			tr := &scriptedTransport{name: "flaky", results: tc.results}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ts := Run(ctx, []chat.Receiver{tr}, nil, Options{
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Report: rep.add,
				MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Stable: tc.stable})
			await(t, "the script to be played", func() bool { return tr.started() >= tc.wantRuns })
			if tc.wantEnded {
				select {
				case name := <-ts.Ended():
					if name != "flaky" {
						t.Errorf("ended %q, want flaky", name)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Ended got nothing")
				}
			}
			await(t, "the log", func() bool { return strings.Contains(logs.String(), tc.wantInLog) })
			cancel()
			wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer wcancel()
			if n := ts.Wait(wctx); n != 0 {
				t.Fatalf("%d transports still running after ctx ended", n)
			}
			if got := tr.started(); got != tc.wantRuns {
				t.Errorf("Run called %d times, want %d", got, tc.wantRuns)
			}
			got := rep.list()
			if len(got) != tc.wantReports {
				t.Fatalf("got %d reports %+v, want %d", len(got), got, tc.wantReports)
			}
			for _, r := range got {
				if r.except != "flaky" || r.kind != chat.KindAlert || r.alert != chat.AlertTrainbot || !strings.HasPrefix(r.text, "⚠️ flaky stopped: ") {
					t.Errorf("report %+v: want an alert of kind trainbot for the others, naming flaky", r)
				}
			}
		})
	}
}

func TestTransportsLastingErrorLeavesTheOthersRunning(t *testing.T) {
	var logs syncBuffer
	rep := &reports{}
	tg := &scriptedTransport{name: "telegram", results: []error{lastingErr}}
	con := &scriptedTransport{name: "console"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := Run(ctx, []chat.Receiver{tg, con}, nil, Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Report: rep.add, Channels: 1, MinBackoff: time.Millisecond})
	await(t, "the report", func() bool { return len(rep.list()) == 1 })
	r := rep.list()[0]
	if r.except != "telegram" || !strings.Contains(r.text, "token refused") || !strings.Contains(r.text, "fix the config and restart trainbot") {
		t.Errorf("got report %+v", r)
	}
	if !strings.Contains(logs.String(), "transport stopped for good") || strings.Contains(logs.String(), "no chat transport left") {
		t.Errorf("log:\n%s", logs.String())
	}
	await(t, "the console to run", func() bool { return con.started() == 1 })
	if err := ts.Up(ctx); err == nil || !strings.Contains(err.Error(), "telegram stopped for good: ") || strings.Contains(err.Error(), "console") {
		t.Errorf("Up = %v, want telegram down for good, and only it", err)
	}
	cancel()
	if n := ts.Wait(context.Background()); n != 0 {
		t.Fatalf("%d still running", n)
	}
	if tg.started() != 1 {
		t.Errorf("telegram started %d times, want 1", tg.started())
	}
}

// TestTransportsUpForHealthz: /healthz's check says a transport is down
// from its failure until it has run again for UpAfter.
func TestTransportsUpForHealthz(t *testing.T) {
	tr := &scriptedTransport{name: "telegram", results: []error{errors.New("getUpdates: connection refused")}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := Run(ctx, []chat.Receiver{tr}, nil, Options{MinBackoff: 200 * time.Millisecond, UpAfter: 300 * time.Millisecond})
	await(t, "the failure", func() bool { return ts.Up(ctx) != nil })
	if err := ts.Up(ctx); !strings.Contains(err.Error(), "telegram failed, starting again: getUpdates: connection refused") {
		t.Errorf("Up = %v", err)
	}
	await(t, "the transport to be up again", func() bool { return ts.Up(ctx) == nil })
	if tr.started() != 2 {
		t.Errorf("started %d times, want 2", tr.started())
	}
	cancel()
	ts.Wait(context.Background())
}

// syncBuffer is a log that the goroutines under test write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package schedule

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := []string{
		"0 9 * * *", "*/15 * * * *", "30 2 * * 1-5", "@daily", "@midnight", "@hourly", "@every 6h", "@every 1s",
		"CRON_TZ=Asia/Shanghai 0 9 * * *", "TZ=UTC 0 0 1 * *", "CRON_TZ=Asia/Shanghai\t0 9 * * *", "  0 9 * * *  ",
		"CRON_TZ=Europe/Berlin @daily",
	}
	for _, s := range good {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	bad := map[string]string{
		"":                               "empty",
		"CRON_TZ=":                       "names no time zone",
		"TZ=":                            "names no time zone",
		"CRON_TZ= 0 9 * * *":             "names no time zone",
		"CRON_TZ=Asia/Shanghai":          "nothing after the time zone",
		"CRON_TZ=Mars/Olympus 0 9 * * *": "unknown time zone",
		"61 * * * *":                     "above maximum",
		"0 25 * * *":                     "above maximum",
		"* * * *":                        "expected exactly 5 fields",
		"0 0 9 * * *":                    "expected exactly 5 fields",
		"@sometimes":                     "unrecognized descriptor",
		"@every 100ms":                   "at least 1s",
		"@every -5m":                     "at least 1s",
		"*/0 * * * *":                    "step",
		"CRON_TZ=UTC @every 1h":          "does not take a time zone",
	}
	for spec, want := range bad {
		_, err := Parse(spec)
		if err == nil {
			t.Errorf("Parse(%q) accepted it", spec)
			continue
		}
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an ErrSpec saying %q", spec, err, want)
		}
	}
}

func TestParseTimeZone(t *testing.T) {
	s, err := Parse("CRON_TZ=Asia/Shanghai 0 9 * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := s.Next(from), time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next 09:00 Shanghai after %s is %s, want %s", from, got.UTC(), want)
	}
}

// every is a schedule with a sub-second period, for tests.
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// syncLog is a log buffer safe for concurrent writers.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPanickingJobDoesNotStopLaterTicks(t *testing.T) {
	var logs syncLog
	s := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ticks := make(chan int, 100)
	n := 0
	s.AddSchedule("flaky", every(10*time.Millisecond), func(ctx context.Context) {
		n++ // SkipIfStillRunning: never two at once
		if n <= 2 {
			panic("boom")
		}
		select {
		case ticks <- n:
		default:
		}
	})
	s.Start()
	deadline := time.After(10 * time.Second)
	for got := 0; got < 3; {
		select {
		case <-ticks:
			got++
		case <-deadline:
			t.Fatalf("only %d ticks after the panics", got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	text := logs.String()
	for _, want := range []string{"scheduled job panicked", "schedule=flaky", "panic=boom", "cron: panic", "stack="} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
}

func TestSlowJobIsSkippedAndCloseWaitsForIt(t *testing.T) {
	s := New(Options{})
	started := make(chan struct{}, 100)
	release := make(chan struct{})
	var mu sync.Mutex
	running, maxRunning, ended := 0, 0, 0
	s.AddSchedule("slow", every(5*time.Millisecond), func(ctx context.Context) {
		mu.Lock()
		running++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		started <- struct{}{}
		<-release
		mu.Lock()
		running--
		ended++
		mu.Unlock()
	})
	s.Start()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job never started")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the job ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if running != 0 || ended == 0 {
		t.Errorf("Close returned with %d job(s) still running (%d ended)", running, ended)
	}
	if maxRunning != 1 {
		t.Errorf("%d runs of the job at once, want 1 (SkipIfStillRunning)", maxRunning)
	}
}

func TestCloseCancelsJobsWhenItsContextEnds(t *testing.T) {
	s := New(Options{})
	started := make(chan struct{}, 1)
	s.AddSchedule("stuck", every(5*time.Millisecond), func(ctx context.Context) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
	s.Start()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job never started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestAddRejectsBadSpecAndListsEntries(t *testing.T) {
	s := New(Options{Location: time.UTC})
	if err := s.Add("bad", "CRON_TZ=", func(context.Context) {}); err == nil || !strings.Contains(err.Error(), "schedule bad") {
		t.Errorf("Add(CRON_TZ=) = %v", err)
	}
	if err := s.Add("nightly", "0 2 * * *", func(context.Context) {}); err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Close(context.Background())
	es := s.Entries()
	if len(es) != 1 || es[0].Name != "nightly" || es[0].Next.IsZero() || es[0].Next.UTC().Hour() != 2 {
		t.Errorf("entries %+v, want nightly at 02:00 UTC", es)
	}
}

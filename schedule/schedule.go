// Package schedule runs work on cron schedules with github.com/robfig/cron/v3,
// with the traps of v3.0.1 handled:
//
//   - Parse checks a spec before cron's parser sees it: "CRON_TZ=" (or "TZ=")
//     with no zone, or with nothing after the zone, makes that parser panic.
//   - Jobs run under cron.WithChain(cron.SkipIfStillRunning(l), cron.Recover(l)),
//     Recover innermost, so a panicking job is logged and releases its slot,
//     and a job still running when its next tick comes is skipped, not stacked.
//   - Close stops the ticks and waits for running jobs (cron's Stop only
//     returns a context); when the caller's context ends first, the jobs'
//     context is cancelled and Close still waits for them to return.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // CRON_TZ=Asia/Shanghai works on hosts without a zoneinfo database
	"unicode"

	"github.com/robfig/cron/v3"
)

// ErrSpec is wrapped by every error of Parse.
var ErrSpec = errors.New("bad schedule spec")

// SpecError says what is wrong with a spec.
type SpecError struct {
	Spec   string
	Reason string
}

func (e *SpecError) Error() string { return fmt.Sprintf("%v %q: %s", ErrSpec, e.Spec, e.Reason) }

// Unwrap makes errors.Is(err, ErrSpec) true.
func (e *SpecError) Unwrap() error { return ErrSpec }

func specError(spec, format string, args ...any) error {
	return &SpecError{Spec: spec, Reason: fmt.Sprintf(format, args...)}
}

// Parse checks a standard 5-field spec ("30 2 * * 1-5"), a descriptor
// ("@daily", "@every 6h"), either one after "CRON_TZ=Zone " or "TZ=Zone ",
// and returns its schedule. It never panics.
func Parse(spec string) (s cron.Schedule, err error) {
	norm, err := normalize(spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // a parser panic we did not foresee
			s, err = nil, specError(spec, "%v", r)
		}
	}()
	s, err = cron.ParseStandard(norm)
	if err != nil {
		return nil, specError(spec, "%v", err)
	}
	return s, nil
}

// normalize checks what cron's parser would panic on and returns the spec
// with single spaces where it splits.
func normalize(spec string) (string, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return "", specError(spec, "empty; want 5 fields (minute hour day-of-month month day-of-week), e.g. \"0 9 * * *\", or a descriptor such as @daily")
	}
	prefix := ""
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(s, p) {
			prefix = p
		}
	}
	if prefix == "" {
		if strings.HasPrefix(s, "@every") {
			if d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(s, "@every"))); err == nil && d < time.Second {
				return "", specError(spec, "@every needs at least 1s")
			}
		}
		return s, nil
	}
	rest := s[len(prefix):]
	i := strings.IndexFunc(rest, unicode.IsSpace)
	if i < 0 {
		i = len(rest)
	}
	zone, fields := rest[:i], strings.TrimSpace(rest[i:])
	if zone == "" {
		return "", specError(spec, "%s names no time zone; write e.g. %sAsia/Shanghai 0 9 * * *", prefix, prefix)
	}
	if fields == "" {
		return "", specError(spec, "nothing after the time zone; write e.g. %s%s 0 9 * * *", prefix, zone)
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return "", specError(spec, "unknown time zone %q", zone)
	}
	if strings.HasPrefix(fields, "@every") {
		return "", specError(spec, "@every does not take a time zone")
	}
	return prefix + zone + " " + fields, nil
}

// Options configure a Scheduler.
type Options struct {
	Logger *slog.Logger
	// Location is where specs without CRON_TZ= are read (default time.Local).
	Location *time.Location
}

// Scheduler runs named jobs on schedules.
type Scheduler struct {
	c      *cron.Cron
	log    *slog.Logger
	ctx    context.Context // given to jobs
	cancel context.CancelFunc

	mu      sync.Mutex
	names   map[cron.EntryID]string
	started bool
	closed  bool
}

// New returns a scheduler; Add jobs, then Start.
func New(o Options) *Scheduler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	l := Logger(o.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		c: cron.New(
			cron.WithLocation(o.Location),
			cron.WithLogger(l),
			cron.WithChain(cron.SkipIfStillRunning(l), cron.Recover(l)),
		),
		log: o.Logger, ctx: ctx, cancel: cancel, names: map[cron.EntryID]string{},
	}
}

// Add schedules job under name; the spec is checked by Parse.
func (s *Scheduler) Add(name, spec string, job func(ctx context.Context)) error {
	sch, err := Parse(spec)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", name, err)
	}
	s.AddSchedule(name, sch, job)
	return nil
}

// AddSchedule schedules job under name on any cron.Schedule.
func (s *Scheduler) AddSchedule(name string, sch cron.Schedule, job func(ctx context.Context)) {
	log := s.log.With("schedule", name)
	id := s.c.Schedule(sch, cron.FuncJob(func() {
		log.Debug("scheduled job starts")
		defer func() {
			if r := recover(); r != nil {
				// Name the job, then let the chain's Recover log the stack.
				log.Error("scheduled job panicked", "panic", fmt.Sprint(r))
				panic(r)
			}
		}()
		job(s.ctx)
		log.Debug("scheduled job ended")
	}))
	s.mu.Lock()
	s.names[id] = name
	s.mu.Unlock()
}

// Entry is a scheduled job and when it runs next.
type Entry struct {
	Name string
	Next time.Time // zero before Start
	Prev time.Time // zero before the first run
}

// Entries lists the jobs.
func (s *Scheduler) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for _, e := range s.c.Entries() {
		out = append(out, Entry{Name: s.names[e.ID], Next: e.Next, Prev: e.Prev})
	}
	return out
}

// Start begins ticking.
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	s.c.Start()
}

// Close stops the ticks and waits for running jobs. When ctx ends first,
// the jobs' context is cancelled and Close waits for them to return, then
// returns ctx's error.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	done := s.c.Stop()
	select {
	case <-done.Done():
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	<-done.Done()
	return ctx.Err()
}

// Logger adapts a *slog.Logger to cron's Logger: cron's routine messages
// (wake, run, schedule) become debug records, its errors (a recovered
// panic) error records.
func Logger(l *slog.Logger) cron.Logger { return cronLogger{l} }

type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	c.l.Debug("cron: "+msg, kv...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append([]any{"err", err}, kv...)...)
}

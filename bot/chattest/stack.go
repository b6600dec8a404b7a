// Package chattest runs trainbot as `trainbot serve` wires it — the real
// store, supervisor, router, notifier and delivery pipeline — behind one
// transport, for the end-to-end tests of the transports against fakes of
// their services. The training is trainbot's built-in demo, run as a child
// process: the test binary, re-executed (Main).
package chattest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/demo"
	"github.com/trainbot/trainbot/trainer/shim"
)

// Wait bounds every wait of the tests (a loaded machine is slow).
const Wait = 60 * time.Second

const (
	childEnv      = "TRAINBOT_CHATTEST_CHILD"
	childStepsEnv = "TRAINBOT_CHATTEST_STEPS"
	childPaceEnv  = "TRAINBOT_CHATTEST_PACE"
)

// Main is a transport test package's TestMain: the test binary is also
// the run's supervisor ("trainbot shim") and the demo training.
func Main(m *testing.M) {
	shim.MainIfAsked()
	if os.Getenv(childEnv) == "demo" {
		os.Exit(demoChild())
	}
	os.Exit(m.Run())
}

func demoChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := demo.DefaultConfig()
	cfg.Steps, cfg.Pace = 200_000, 2*time.Millisecond
	if n, err := strconv.Atoi(os.Getenv(childStepsEnv)); err == nil {
		cfg.Steps = n
	}
	if d, err := time.ParseDuration(os.Getenv(childPaceEnv)); err == nil {
		cfg.Pace = d
	}
	res, err := demo.Train(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if res.Interrupted {
		return 130
	}
	return 0
}

// DemoJob is the job "demo": the built-in demo, steps long, one step per
// pace.
func DemoJob(steps int, pace time.Duration) *trainer.Job {
	return &trainer.Job{
		Name: "demo", Command: []string{os.Args[0]},
		Env:       map[string]string{childEnv: "demo", childStepsEnv: strconv.Itoa(steps), childPaceEnv: pace.String()},
		StopGrace: 5 * time.Second, KillGrace: 2 * time.Second,
	}
}

// Transport is a two-way transport.
type Transport interface {
	chat.Receiver
	chat.Sender
}

// LogBuffer collects log output from several goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger writes debug-level text logs to the buffer.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Options configure a Stack.
type Options struct {
	Access command.Access
	Job    *trainer.Job
	// ConfirmStop makes 停止 ask for confirmation with buttons.
	ConfirmStop bool
	// Dir is the data directory (a new temporary one when empty): a second
	// stack on the same Dir is trainbot restarted.
	Dir string
	// Secrets must never appear in the log.
	Secrets []string
}

// Stack is trainbot serving one transport.
type Stack struct {
	Store    *store.Store
	Sup      *trainer.Supervisor
	Pipeline *deliver.Pipeline
	Logs     *LogBuffer
	done     chan struct{}
	err      error // what Receive returned, once done is closed
	notifier *notify.Notifier
	cancel   context.CancelFunc
	secrets  []string
	closed   bool
	dir      string
	job      *trainer.Job
}

// NewStack opens the store, starts the supervisor, the pipeline, the
// notifier and the transport made by newTransport (given the store as its
// KV and the logger), and receives with the router until the test ends.
func NewStack(t testing.TB, o Options, newTransport func(kv inbound.KV, log *slog.Logger) Transport) *Stack {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s := &Stack{Logs: &LogBuffer{}, secrets: o.Secrets, dir: o.Dir, job: o.Job}
	logger := s.Logs.Logger()
	var err error
	if s.Store, err = store.Open(o.Dir, store.Options{Logger: logger}); err != nil {
		t.Fatal(err)
	}
	var jobs []*trainer.Job
	if o.Job != nil {
		jobs = append(jobs, o.Job)
	}
	if s.Sup, err = trainer.New(context.Background(), trainer.Options{Jobs: jobs, Recorder: s.Store, DataDir: o.Dir, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(s.Store, logger)
	s.Pipeline = deliver.New(deliver.Options{Senders: []chat.Sender{tr}, Store: s.Store, Logger: logger,
		Policy: deliver.Policy{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, EphemeralTries: 3, ChartTries: 2, ChartPause: 50 * time.Millisecond}})
	s.Pipeline.Start()
	s.notifier = notify.New(notify.Options{Post: s.Pipeline.Post, Subscriptions: s.Store, Logger: logger})
	s.Sup.Subscribe(s.notifier.OnEvent)
	s.notifier.Start()
	if err := s.Sup.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	router := &command.Router{Trainer: s.Sup, History: s.Store, Logger: logger, Access: o.Access,
		ConfirmStop: map[string]bool{tr.Name(): o.ConfirmStop}}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.err = tr.Receive(ctx, s.Pipeline.Answer(router))
	}()
	t.Cleanup(func() { s.shutdown(t, true) })
	return s
}

// Done is closed when Receive has returned.
func (s *Stack) Done() <-chan struct{} { return s.done }

// ReceiveErr is what Receive returned, once Done is closed.
func (s *Stack) ReceiveErr() error {
	<-s.done
	return s.err
}

// Close shuts down in runBot's order, leaving runs running as serve does
// (the supervisor detaches: the next stack on the same Dir re-attaches),
// and checks the log for secrets. Runs still left at the end of the test
// are stopped then. The stack's own cleanup, when the test did not call
// Close, stops the runs instead: a test leaves no process behind.
func (s *Stack) Close(t testing.TB) {
	t.Helper()
	left := len(s.Sup.Active())
	if !s.shutdown(t, false) || left == 0 {
		return
	}
	t.Cleanup(func() { stopLeftRuns(t, s.dir, s.job) })
}

// shutdown stops the stack, detaching from the runs or stopping them;
// false when it was already shut down.
func (s *Stack) shutdown(t testing.TB, stopRuns bool) bool {
	t.Helper()
	if s.closed {
		return false
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.cancel()
	select {
	case <-s.done:
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			t.Logf("Receive returned: %v", s.err)
		}
	case <-time.After(Wait):
		t.Error("Receive did not return")
	}
	leave := s.Sup.Detach
	if stopRuns {
		leave = s.Sup.Close
	}
	if err := leave(ctx); err != nil {
		t.Errorf("supervisor: %v", err)
	}
	s.notifier.Close(ctx)
	s.Pipeline.Close(ctx)
	if err := s.Store.Close(); err != nil {
		t.Errorf("store: %v", err)
	}
	for _, secret := range s.secrets {
		if secret != "" && bytes.Contains([]byte(s.Logs.String()), []byte(secret)) {
			t.Errorf("a secret is in the log")
		}
	}
	return true
}

// stopLeftRuns stops the runs a closed stack left running on dir that no
// later stack stopped: a supervisor re-attaches to them and stops them.
func stopLeftRuns(t testing.TB, dir string, job *trainer.Job) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Errorf("stop the runs left running: %v", err)
		return
	}
	defer st.Close()
	var jobs []*trainer.Job
	if job != nil {
		jobs = append(jobs, job)
	}
	sup, err := trainer.New(context.Background(), trainer.Options{Jobs: jobs, Recorder: st, DataDir: dir})
	if err != nil {
		t.Errorf("stop the runs left running: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sup.Resume(ctx); err != nil {
		t.Errorf("stop the runs left running: %v", err)
	}
	if err := sup.Close(ctx); err != nil {
		t.Errorf("stop the runs left running: %v", err)
	}
}

// Await polls cond until it holds or Wait passes; false then.
func Await(cond func() bool) bool {
	deadline := time.Now().Add(Wait)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// Latency sends n messages one after another (say(i)) and waits for the
// answer to each (answered(i)); it returns the median and 99th-percentile
// times from message to answer, measured to within Await's 5 ms polls.
func Latency(t testing.TB, n int, say func(i int), answered func(i int) bool) (p50, p99 time.Duration) {
	t.Helper()
	took := make([]time.Duration, 0, n)
	for i := range n {
		began := time.Now()
		say(i)
		if !Await(func() bool { return answered(i) }) {
			t.Fatalf("message %d: no answer", i)
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	return took[n/2], took[n*99/100]
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// This file is what adding a transport takes: its package (here the
// exampleSection and exampleTransport below, which a real one would have
// in bot/example) and one registration (the append to transports, which a
// real one would have as a line in bot/messengers). Nothing else in
// trainbot names it, yet its section is read and checked with keys and
// lines, its secret is kept from the runs, its [auth] lists let its users
// in, `trainbot check` prints its setup, and `trainbot serve` opens it,
// answers its messages and reports the run to it.

var exampleKind = transport.Kind{Name: "example", Section: func() transport.Section { return &exampleSection{Greeting: "hi"} }}

// exampleSection is [example].
type exampleSection struct {
	Token    string `toml:"token"`
	Greeting string `toml:"greeting"`
	Lang     string `toml:"language"`
}

func (s *exampleSection) Check(ck *config.Checker) {
	if s.Greeting == "" {
		ck.Errorf("greeting", "want a word to greet with")
	}
}
func (s *exampleSection) Secrets() []string { return []string{"token"} }
func (s *exampleSection) MemberIDs() string { return "an example handle" }
func (s *exampleSection) On() bool          { return s.Token != "" }
func (s *exampleSection) Language() string  { return s.Lang }
func (s *exampleSection) Setup() string     { return "the example console: turn the bot on" }
func (s *exampleSection) Open(transport.Deps) (transport.Transport, error) {
	t := &exampleTransport{in: make(chan chat.Message, 8)}
	exampleOpened <- t
	return t, nil
}

// exampleOpened hands the test the transport serve opened.
var exampleOpened = make(chan *exampleTransport, 1)

// exampleTransport is a messenger in memory: the test says what users
// send, and reads what the bot replied.
type exampleTransport struct {
	in      chan chat.Message
	mu      sync.Mutex
	replies map[int64][]string
}

func (t *exampleTransport) Name() string { return "example" }

func (t *exampleTransport) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-t.in:
			deliver(ctx, m)
		}
	}
}

func (t *exampleTransport) Send(_ context.Context, chatID int64, r chat.Reply, skip int) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.replies == nil {
		t.replies = map[int64][]string{}
	}
	t.replies[chatID] = append(t.replies[chatID], r.Text)
	return 1 + len(r.Images), nil
}

// says is a message from user (a handle) in their own chat.
func (t *exampleTransport) says(chatID int64, user, text string) {
	t.in <- chat.Message{Transport: "example", Chat: chatID, User: chat.User{ID: chatID, Ref: user}, Text: text}
}

// await waits up to a minute for a reply to chat with want, after the
// first from of them, and returns how many replies the chat has.
func (t *exampleTransport) await(tb testing.TB, chatID int64, from int, want string, stderr *syncBuffer) int {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		t.mu.Lock()
		got := t.replies[chatID]
		t.mu.Unlock()
		for i := from; i < len(got); i++ {
			if strings.Contains(got[i], want) {
				return i + 1
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tb.Fatalf("chat %d: no reply with %q after reply %d; replies %q\nstderr:\n%s", chatID, want, from, t.replies[chatID], stderr.String())
	return 0
}

func TestATransportIsOnePackageAndOneRegistration(t *testing.T) {
	transports = append(messengers.All(), exampleKind) // the one registration
	t.Cleanup(func() { transports = messengers.All() })

	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir = %q\n", filepath.Join(dir, "data"))+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Its keys are checked like every other section's.
	write("[example]\ntoken = \"t\"\ngreting = \"yo\"\n[auth]\nexample_operatorz = [\"ana\"]\n")
	code, _, stderr := trainbot(t, "", "check", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, `trainbot.toml:4: example.greting: unknown key (did you mean "greeting"?)`) ||
		!strings.Contains(stderr, `trainbot.toml:6: auth.example_operatorz: unknown key (did you mean "example_operators"?)`) {
		t.Errorf("check of a misspelt [example]: %d\n%s", code, stderr)
	}
	write("[example]\ngreeting = \"\"\n[auth]\nexample_operators = [\"a b\"]\n")
	code, _, stderr = trainbot(t, "", "check", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, "trainbot.toml:3: example.greeting: want a word to greet with") ||
		!strings.Contains(stderr, `auth.example_operators: "a b" is not a user id (the bot tells a stranger their id: an example handle)`) {
		t.Errorf("check of a wrong [example]: %d\n%s", code, stderr)
	}

	// The token from the environment turns it on, and no run sees it.
	t.Setenv("TRAINBOT_EXAMPLE_TOKEN", "s3cret-token")
	write(`[example]
language = "en"
[auth]
example_operators = ["ana"]
[[jobs]]
name = "tiny"
command = ["sh", "-c", "for i in 1 2 3; do echo \"step=$i loss=0.$i\"; sleep 0.1; done; echo \"token=${TRAINBOT_EXAMPLE_TOKEN:-unset}\""]
`)
	ce, cout, cerr := testEnv(t, nil)
	ce.environ = append(ce.environ, "TRAINBOT_EXAMPLE_TOKEN=s3cret-token")
	code = run(context.Background(), []string{"check", "--config", cfg}, ce)
	out, stderr := cout.String(), cerr.String()
	if code != 0 || !strings.Contains(out, "[example] is on; the app needs, in the console: the example console: turn the bot on") {
		t.Errorf("check: %d\n%s\n%s", code, out, stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ex, done, serr := serveExample(t, ctx, cfg, os.Environ())
	ex.says(7, "bo", "开始")
	ex.await(t, 7, 0, "Your user id is bo", serr) // a stranger is told who they are, in English
	ex.says(5, "ana", "开始")
	n := ex.await(t, 5, 0, "run #1 started", serr)
	ex.await(t, 5, n, "finished", serr)
	log, err := os.ReadFile(filepath.Join(dir, "data", "runs", "1", "output.log"))
	if err != nil || !strings.Contains(string(log), "token=unset") {
		t.Errorf("the run's output (the token must not reach it): %v\n%s", err, log)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// serveExample runs `trainbot serve --config cfg` until ctx ends, with
// the example transport registered, and returns the transport it opened;
// done gets serve's exit status.
func serveExample(t *testing.T, ctx context.Context, cfg string, environ []string) (*exampleTransport, chan int, *syncBuffer) {
	t.Helper()
	sout, serr := &syncBuffer{}, &syncBuffer{}
	e := env{stdin: strings.NewReader(""), stdout: sout, stderr: serr, exe: os.Args[0], environ: environ}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	select {
	case ex := <-exampleOpened:
		return ex, done, serr
	case c := <-done:
		t.Fatalf("serve ended with %d before opening the example transport:\n%s", c, serr.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not open the example transport:\n%s", serr.String())
	}
	return nil, nil, nil
}

// reply is the i-th reply to chat, "" when there is none.
func (t *exampleTransport) reply(chatID int64, i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.replies[chatID]) {
		return ""
	}
	return t.replies[chatID][i]
}

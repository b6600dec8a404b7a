package command_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/trainer"
)

// fakeKnobs answers 存档 and 调参 as told.
type fakeKnobs struct {
	checkpoint func(runID int64, by string) (*trainer.CheckpointAsk, error)
	setLive    func(runID int64, values map[string]string) (*trainer.LiveChange, error)
}

var _ command.Knobs = (*fakeKnobs)(nil)

func (f *fakeKnobs) Checkpoint(_ context.Context, runID int64, by string) (*trainer.CheckpointAsk, error) {
	return f.checkpoint(runID, by)
}

func (f *fakeKnobs) SetLive(_ context.Context, runID int64, values map[string]string, _ string) (*trainer.LiveChange, error) {
	return f.setLive(runID, values)
}

// 存档 and 调参 are for operators, and every refusal says why: no signal
// configured (and how to configure it), a run on another host, no run.
func TestKnobRefusalsSayWhy(t *testing.T) {
	e := newEnv(t)
	if got := e.say(viewer, "存档").Text; !strings.Contains(got, "Viewers can look") {
		t.Errorf("a viewer's 存档: got %q", got)
	}
	if got := e.say(operator, "存档").Text; !strings.Contains(got, "No run is active") {
		t.Errorf("存档 without a run: got %q", got)
	}
	var kerr error
	e.r.Knobs = &fakeKnobs{
		checkpoint: func(int64, string) (*trainer.CheckpointAsk, error) { return nil, kerr },
		setLive:    func(int64, map[string]string) (*trainer.LiveChange, error) { return nil, kerr },
	}
	for _, tc := range []struct {
		say  string
		err  error
		want []string
	}{
		{"存档", &trainer.KnobError{Run: 3, Job: "train", Knob: trainer.KnobCheckpoint, Why: trainer.KnobNoSignal}, []string{"Job train has no checkpoint signal", "[jobs.signals]", `checkpoint = "SIGUSR1"`}},
		{"/checkpoint 3", &trainer.KnobError{Run: 3, Job: "train", Knob: trainer.KnobCheckpoint, Why: trainer.KnobOnHost, Host: "gpu2"}, []string{"Run #3 runs on host gpu2", "Nothing was sent"}},
		{"调参 lr=0.1", &trainer.KnobError{Run: 3, Job: "train", Knob: trainer.KnobControl, Why: trainer.KnobNoLive}, []string{"declares no live values", "[jobs.live]"}},
		{"调参 lr=0.1", &trainer.KnobError{Run: 3, Job: "train", Knob: trainer.KnobControl, Why: trainer.KnobOnHost, Host: "gpu2"}, []string{"host gpu2", "调参 does not reach"}},
	} {
		kerr = tc.err
		got := e.say(operator, tc.say).Text
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s with %v: got %q, want %q in it", tc.say, tc.err, got, w)
			}
		}
	}
	if got := e.say(operator, "调参 lr").Text; !strings.Contains(got, "lr") || !strings.Contains(got, "takes name=value") {
		t.Errorf("调参 lr: got %q, want the usage", got)
	}
}

// inOrder records the texts a chat is sent, in order.
type inOrder struct {
	mu  sync.Mutex
	got []string
}

func (s *inOrder) Name() string { return "telegram" }
func (s *inOrder) Send(_ context.Context, _ int64, r chat.Reply, skip int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r.Text)
	return 1, nil
}
func (s *inOrder) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// The second answer of 存档 never comes before the first, even when the
// file is there at once and the first answer is slow to be posted (it
// came first in CI under load, and the user read "new checkpoint
// ckpt-1.pt" before "I will say which file appears").
func TestCheckpointSecondAnswerFollowsTheFirst(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	e.r.Knobs = &fakeKnobs{checkpoint: func(int64, string) (*trainer.CheckpointAsk, error) {
		// The file is there before the first answer is out.
		if err := os.WriteFile(filepath.Join(dir, "ckpt-1.pt"), []byte("w"), 0o644); err != nil {
			t.Fatal(err)
		}
		return &trainer.CheckpointAsk{Run: &trainer.Run{ID: 7, Job: "train"}, Signal: syscall.SIGUSR1, Pattern: filepath.Join(dir, "*.pt")}, nil
	}}
	s := &inOrder{}
	p := deliver.New(deliver.Options{Senders: []chat.Sender{s}})
	p.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	later := command.NewLater(func(m chat.Message, r chat.Reply) {
		p.Post(deliver.Envelope{To: m.ChatKey(), Reply: r, Durable: true})
	}, nil)
	t.Cleanup(func() { later.Close() })
	e.r.Later = later
	// The router's answer reaches the pipeline 200 ms after the second
	// answer is ready.
	slow := chat.HandlerFunc(func(ctx context.Context, m chat.Message) chat.Reply {
		r := e.r.Handle(ctx, m)
		time.Sleep(200 * time.Millisecond)
		return r
	})
	p.Answer(slow)(context.Background(), chat.Message{Transport: "telegram", Chat: operator, User: chat.User{ID: operator, Name: "u"}, Text: "存档"})
	deadline := time.Now().Add(10 * time.Second)
	for len(s.texts()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := s.texts()
	if len(got) != 2 || !strings.Contains(got[0], "I will say which file") || !strings.Contains(got[1], "new checkpoint ckpt-1.pt") {
		t.Fatalf("the chat got, in order: %q", got)
	}
}

// With Later, 存档 answers at once and names the file (or its absence) in
// a second message; Close cuts a wait short and posts nothing.
func TestCheckpointAnswersLater(t *testing.T) {
	e := newEnv(t)
	e.r.Knobs = &fakeKnobs{checkpoint: func(int64, string) (*trainer.CheckpointAsk, error) {
		return &trainer.CheckpointAsk{Run: &trainer.Run{ID: 7, Job: "train"}, Signal: syscall.SIGUSR1, Pattern: filepath.Join(t.TempDir(), "*.pt")}, nil
	}}
	posted := make(chan chat.Reply, 4)
	later := command.NewLater(func(_ chat.Message, r chat.Reply) { posted <- r }, nil)
	e.r.Later, e.r.CheckpointWait = later, 100*time.Millisecond
	if got := e.say(operator, "存档").Text; !strings.Contains(got, "SIGUSR1 sent. I will say which file") {
		t.Fatalf("the reply: got %q", got)
	}
	select {
	case r := <-posted:
		if !strings.Contains(r.Text, "no new file matching") || r.RunID != 7 {
			t.Fatalf("the second message: got %q (run %d)", r.Text, r.RunID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second message")
	}
	e.r.CheckpointWait = time.Hour
	e.say(operator, "存档")
	done := make(chan struct{})
	go func() { later.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not cut the wait short")
	}
	select {
	case r := <-posted:
		t.Fatalf("an answer cut short by Close was posted: %q", r.Text)
	default:
	}
	e.r.CheckpointWait = 100 * time.Millisecond
	if got := e.say(operator, "存档").Text; !strings.Contains(got, "no new file matching") {
		t.Errorf("after Close the reply waits itself: got %q", got)
	}
}

package command_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
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

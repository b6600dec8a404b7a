package main

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestLifecycleClosesWhatWasOpenedInReverse(t *testing.T) {
	var logs bytes.Buffer
	life := &lifecycle{log: slog.New(slog.NewTextHandler(&logs, nil))}
	var closed []string
	step := func(name string, err error) {
		life.opened(name, func() error { closed = append(closed, name); return err })
	}
	// An error half-way: what was opened so far is closed, nothing else,
	// and a close that fails does not stop the others.
	open := func(fail bool) error {
		step("store", nil)
		step("pipeline", errors.New("2 alerts left in the outbox"))
		if fail {
			return errors.New("resume runs: boom")
		}
		step("notifier", nil)
		return nil
	}
	if err := open(true); err == nil {
		t.Fatal("want the error")
	}
	life.closeAll()
	if !slices.Equal(closed, []string{"pipeline", "store"}) {
		t.Errorf("closed %v, want pipeline then store", closed)
	}
	if !strings.Contains(logs.String(), "shutdown: pipeline") || !strings.Contains(logs.String(), "2 alerts left") {
		t.Errorf("the failed close is not logged:\n%s", logs.String())
	}
	closed = nil
	life.closeAll() // twice: nothing more
	if len(closed) != 0 {
		t.Errorf("closed %v again", closed)
	}
	if err := open(false); err != nil {
		t.Fatal(err)
	}
	life.closeAll()
	if !slices.Equal(closed, []string{"notifier", "pipeline", "store"}) {
		t.Errorf("closed %v", closed)
	}
}

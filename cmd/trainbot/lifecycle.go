package main

import (
	"log/slog"
)

// lifecycle is what runBot opened, in order: closeAll closes exactly that,
// in reverse order, on every path out of runBot — an error half-way closes
// what was opened so far, and nothing that was not. Each step's close
// carries its own deadline.
type lifecycle struct {
	log   *slog.Logger
	steps []lifeStep
}

type lifeStep struct {
	name  string
	close func() error
}

// opened records that name is open and how to close it.
func (l *lifecycle) opened(name string, close func() error) {
	l.steps = append(l.steps, lifeStep{name: name, close: close})
}

// closeAll closes every step, the last opened first, and forgets them.
func (l *lifecycle) closeAll() {
	for i := len(l.steps) - 1; i >= 0; i-- {
		s := l.steps[i]
		if err := s.close(); err != nil && l.log != nil {
			l.log.Warn("shutdown: "+s.name, "err", err)
		}
	}
	l.steps = nil
}

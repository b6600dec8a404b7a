package main

import (
	"context"
	"fmt"
	"time"

	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/termsafe"
)

// queueJSON is one entry of `trainbot queue --json`.
type queueJSON struct {
	ID       int64             `json:"id"`
	Job      string            `json:"job"`
	Params   map[string]string `json:"params"` // as typed: checked again when the run starts
	Note     string            `json:"note"`
	By       string            `json:"requested_by"`
	Chat     string            `json:"chat"` // the chat told when it starts ("telegram:42")
	QueuedAt time.Time         `json:"queued_at"`
	Position int               `json:"position"` // among the entries of its job's lock; 1 is next
}

// cmdQueue prints the start requests waiting for their job's lock.
func cmdQueue(ctx context.Context, args []string, e env) int {
	fs := newFlags("queue", "[--json]", e)
	var cf configFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	st, cfg, jobs, code := openHistoryJobs(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	q, err := st.Queued(ctx)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if *asJSON {
		out := []queueJSON{}
		positions := map[string]int{}
		lockOf := map[string]string{}
		for _, j := range jobs {
			lockOf[j.Name] = j.Lock
		}
		for _, x := range q {
			lock := lockOf[x.Job]
			if lock == "" {
				lock = x.Job
			}
			positions[lock]++
			out = append(out, queueJSON{ID: x.ID, Job: x.Job, Params: x.Params, Note: x.Note, By: x.By, Chat: x.Origin,
				QueuedAt: x.At.UTC(), Position: positions[lock]})
		}
		return printJSON(e, out)
	}
	if len(q) == 0 {
		fmt.Fprintln(e.stdout, "The queue is empty.")
		return exitOK
	}
	fmt.Fprintln(e.stdout, termsafe.String(command.QueueText(i18n.ZhEn, q, jobs, time.Now().In(cfg.Location()))))
	return exitOK
}

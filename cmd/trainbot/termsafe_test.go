package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/historytest"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// What others wrote reaches the terminal as text, never as control
// sequences: a note, a run's stderr, a stranger's name and message, a
// metric's name, in runs, runs show, audit, queue and points; --json
// keeps every byte of them.
func TestTerminalOutputEscapesControls(t *testing.T) {
	const esc = "\x1b]0;pwned\x07\x1b[2J" // set the window title, clear the screen
	const shown = `\x1b]0;pwned\x07\x1b[2J`
	data := t.TempDir()
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := historytest.AddRun(t, st, nil, time.Minute, 10)
	r.Outcome, r.Detail, r.StartedBy = trainer.OutcomeFailed, "exit status 1; last stderr:\n"+esc, "eve\x1b[1A"
	if err := st.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := st.SetNote(ctx, r.ID, "note "+esc); err != nil {
		t.Fatal(err)
	}
	historytest.AddLoss(st, r, "loss\u009b31m", 3, 1, historytest.Decay)
	if _, err := st.Audit(ctx, history.AuditEntry{Transport: "telegram", Chat: 1, User: 66, UserName: "eve\nfake row", Text: "/stop " + esc, Reason: "not allowed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddQueued(ctx, trainer.QueueEntry{Job: "demo", Note: esc, By: "eve", Origin: "telegram:1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"runs"}, []string{"📝 note " + shown}},
		{[]string{"runs", "show", "1"}, []string{"📝 note " + shown, "last stderr:\n" + shown, `by eve\x1b[1A`}},
		{[]string{"audit"}, []string{`eve\nfake row (66)`, "/stop " + shown}},
		{[]string{"queue"}, []string{shown}},
		{[]string{"points", "1"}, []string{`loss\u009b31m`}},
	} {
		code, out, stderr := trainbot(t, "", append(c.args, "--data", data)...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.args, code, stderr)
			continue
		}
		if i := strings.IndexAny(out, "\x1b\x07\u009b"); i >= 0 {
			t.Errorf("%s prints a control character at %d:\n%q", c.args, i, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	if code, out, _ := trainbot(t, "", "audit", "--data", data); code == 0 && strings.Count(out, "\n") != 1 {
		t.Errorf("audit: one entry printed on %d lines:\n%s", strings.Count(out, "\n"), out)
	}

	code, out, _ := trainbot(t, "", "runs", "--json", "--data", data)
	var runs []runJSON
	if err := json.Unmarshal([]byte(out), &runs); err != nil || code != 0 || len(runs) != 1 || runs[0].Note != "note "+esc || runs[0].StartedBy != "eve\x1b[1A" {
		t.Errorf("runs --json: %d %v, want the note and started_by as written:\n%s", code, err, out)
	}
	code, out, _ = trainbot(t, "", "audit", "--json", "--data", data)
	var audit []auditJSON
	if err := json.Unmarshal([]byte(out), &audit); err != nil || code != 0 || len(audit) != 1 || audit[0].Text != "/stop "+esc {
		t.Errorf("audit --json: %d %v, want the text as written:\n%s", code, err, out)
	}
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/termsafe"
)

// auditJSON is one entry of `trainbot audit --json`.
type auditJSON struct {
	ID        int64     `json:"id"`
	Time      time.Time `json:"time"`
	Messenger string    `json:"messenger"`
	ChatID    int64     `json:"chat_id"`
	UserID    int64     `json:"user_id"`
	UserName  string    `json:"user_name"`
	Text      string    `json:"text"`
	Command   string    `json:"command"` // canonical name; "" when not a command
	Allowed   bool      `json:"allowed"`
	Reason    string    `json:"reason"` // why it was refused
	RunID     *int64    `json:"run_id"` // the run it touched; null: none
}

// cmdAudit prints the audit: every command sent to the chats, who sent it
// and whether it was allowed, newest first.
func cmdAudit(ctx context.Context, args []string, e env) int {
	fs := newFlags("audit", "[--json] [--limit N] [--user ID]", e)
	var cf configFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "at most this many entries, newest first")
	userFlag := fs.String("user", "", "only this user's commands (a user id)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	if *limit < 1 {
		return usageError(fs, e, "--limit %d: want 1 or more", *limit)
	}
	f := history.AuditFilter{Limit: *limit}
	if *userFlag != "" {
		id, err := strconv.ParseInt(*userFlag, 10, 64)
		if err != nil {
			return usageError(fs, e, "--user %q: want a user id (a number, as the bot tells a stranger)", *userFlag)
		}
		f.User = &id
	}
	st, cfg, code := openHistory(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	entries, err := st.AuditLog(ctx, f)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if *asJSON {
		out := make([]auditJSON, 0, len(entries))
		for _, a := range entries {
			j := auditJSON{ID: a.ID, Time: a.T, Messenger: a.Transport, ChatID: a.Chat, UserID: a.User, UserName: a.UserName,
				Text: a.Text, Command: a.Command, Allowed: a.Allowed, Reason: a.Reason}
			if a.Run != 0 {
				j.RunID = &a.Run
			}
			out = append(out, j)
		}
		return printJSON(e, out)
	}
	if len(entries) == 0 {
		fmt.Fprintf(e.stdout, "no commands recorded in %s\n", cfg.DataDir)
		return exitOK
	}
	for _, a := range entries {
		fmt.Fprintln(e.stdout, termsafe.Field(render.AuditLine(i18n.ZhEn, a))) // one line each, whatever a stranger wrote
	}
	return exitOK
}

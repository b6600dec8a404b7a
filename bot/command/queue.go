package command

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// userKey names who sent m, for the queue's owner check: "telegram:42".
func userKey(m chat.Message) string {
	return m.Transport + ":" + strconv.FormatInt(m.User.ID, 10)
}

// enqueue answers 排队 [job] [k=v…] [备注 text].
func (r *Router) enqueue(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	jobName, params, note, problems := r.startArgs(l, p)
	if len(problems) > 0 {
		return chat.Reply{Text: l.T(i18n.NotQueued, strings.Join(problems, l.T(i18n.ParamSep))) + readAs(l, p)}
	}
	e, pos, err := r.Trainer.Enqueue(ctx, trainer.StartRequest{Job: jobName, Params: params, By: who(m), Origin: m.ChatKey().String(), Note: note}, userKey(m))
	switch {
	case errors.Is(err, trainer.ErrBadParam):
		return chat.Reply{Text: l.T(i18n.NotQueuedP, paramErrors(l, err)) + readAs(l, p)}
	case err != nil:
		return chat.Reply{Text: l.T(i18n.NotQueuedErr, err.Error())}
	}
	text := l.T(i18n.Queued, e.ID, e.Job)
	if len(e.Params) > 0 {
		text += " " + render.ParamsText(e.Params)
	}
	text += l.T(i18n.QueuedTail, pos, e.ID)
	return chat.Reply{Text: text}
}

// queueList answers 队列 (/queue without arguments).
func (r *Router) queueList(ctx context.Context, l i18n.Lang) chat.Reply {
	q, err := r.Trainer.Queued(ctx)
	if err != nil {
		return chat.Reply{Text: l.T(i18n.QueueFailed, err.Error())}
	}
	if len(q) == 0 {
		return chat.Reply{Text: l.T(i18n.QueueEmpty)}
	}
	return chat.Reply{Text: l.T(i18n.QueueHead) + QueueText(l, q, r.Trainer.Jobs(), r.now())}
}

// QueueText lists queue entries with their position among their job
// lock's entries, who asked and how long ago.
func QueueText(l i18n.Lang, q []trainer.QueueEntry, jobs []*trainer.Job, now time.Time) string {
	lockOf := map[string]string{}
	for _, j := range jobs {
		lockOf[j.Name] = j.Lock
	}
	pos := map[string]int{}
	var b strings.Builder
	for _, e := range q {
		lock, ok := lockOf[e.Job]
		if !ok {
			lock = e.Job
		}
		pos[lock]++
		fmt.Fprintf(&b, "#%d · %s", e.ID, e.Job)
		if len(e.Params) > 0 {
			b.WriteString(" " + render.ParamsText(e.Params))
		}
		b.WriteString(l.T(i18n.QueueLine, pos[lock], e.By, l.Duration(now.Sub(e.At))))
		if e.Note != "" {
			b.WriteString(" · 📝 " + e.Note)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// cancelQueued answers 取消 N.
func (r *Router) cancelQueued(ctx context.Context, m chat.Message, l i18n.Lang, args []string) chat.Reply {
	if len(args) != 1 {
		return chat.Reply{Text: l.T(i18n.CancelUsage)}
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return chat.Reply{Text: l.T(i18n.CancelBadID, args[0])}
	}
	e, err := r.Trainer.CancelQueued(ctx, id, userKey(m), r.cur().Access.Role(m) >= RoleOperator)
	switch {
	case errors.Is(err, trainer.ErrNotQueued):
		return chat.Reply{Text: l.T(i18n.CancelNone, id)}
	case errors.Is(err, trainer.ErrNotYourTurn):
		return chat.Reply{Text: l.T(i18n.CancelNotYours, id, e.By)}
	case err != nil:
		return chat.Reply{Text: l.T(i18n.CancelFailed, err.Error())}
	}
	return chat.Reply{Text: l.T(i18n.CancelDone, id, e.Job)}
}

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
	"github.com/trainbot/trainbot/trainer"
)

// userKey names who sent m, for the queue's owner check: "telegram:42".
func userKey(m chat.Message) string {
	return m.Transport + ":" + strconv.FormatInt(m.User.ID, 10)
}

// enqueue answers 排队 [job] [k=v…] [备注 text].
func (r *Router) enqueue(ctx context.Context, m chat.Message, args []string) chat.Reply {
	jobName, params, note, problem := r.startArgs(args)
	if problem != "" {
		return chat.Reply{Text: strings.Replace(problem, "Not started", "Not queued", 1)}
	}
	e, pos, err := r.Trainer.Enqueue(ctx, trainer.StartRequest{Job: jobName, Params: params, By: who(m), Origin: m.ChatKey().String(), Note: note}, userKey(m))
	switch {
	case errors.Is(err, trainer.ErrBadParam):
		return chat.Reply{Text: "Not queued: " + joinErrors(err) + "\nSend 任务 (/jobs) for the parameters."}
	case err != nil:
		return chat.Reply{Text: "Not queued: " + err.Error() + "."}
	}
	text := fmt.Sprintf("🕒 queued #%d: %s", e.ID, e.Job)
	if len(e.Params) > 0 {
		text += " " + render.ParamsText(e.Params)
	}
	text += fmt.Sprintf(" — position %d; it starts when the job's lock is free, and this chat is told. 取消 %d (/cancel %d) removes it.", pos, e.ID, e.ID)
	return chat.Reply{Text: text}
}

// queueList answers 队列 (/queue without arguments).
func (r *Router) queueList(ctx context.Context) chat.Reply {
	q, err := r.Trainer.Queued(ctx)
	if err != nil {
		return chat.Reply{Text: "Could not read the queue: " + err.Error()}
	}
	if len(q) == 0 {
		return chat.Reply{Text: "The queue is empty. When a job is busy, 开始 offers [排队 Queue]; 排队 [job] [k=v…] queues a start."}
	}
	return chat.Reply{Text: "Queue (oldest first):\n" + QueueText(q, r.Trainer.Jobs(), r.now())}
}

// QueueText lists queue entries with their position among their job
// lock's entries, who asked and how long ago.
func QueueText(q []trainer.QueueEntry, jobs []*trainer.Job, now time.Time) string {
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
		fmt.Fprintf(&b, " · position %d · by %s · %s ago", pos[lock], e.By, render.FormatDuration(now.Sub(e.At)))
		if e.Note != "" {
			b.WriteString(" · 📝 " + e.Note)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// cancelQueued answers 取消 N.
func (r *Router) cancelQueued(ctx context.Context, m chat.Message, args []string) chat.Reply {
	if len(args) != 1 {
		return chat.Reply{Text: "取消 takes a queue entry: 取消 N (队列 lists them)."}
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return chat.Reply{Text: fmt.Sprintf("%q is not a queue entry number: 取消 N (队列 lists them).", args[0])}
	}
	e, err := r.Trainer.CancelQueued(ctx, id, userKey(m), r.cur().Access.Role(m) >= RoleOperator)
	switch {
	case errors.Is(err, trainer.ErrNotQueued):
		return chat.Reply{Text: fmt.Sprintf("There is no queue entry #%d (it may have started already). 队列 lists the queue.", id)}
	case errors.Is(err, trainer.ErrNotYourTurn):
		return chat.Reply{Text: fmt.Sprintf("Queue entry #%d is %s's: only they or an operator may cancel it.", id, e.By)}
	case err != nil:
		return chat.Reply{Text: "Could not cancel: " + err.Error()}
	}
	return chat.Reply{Text: fmt.Sprintf("🗑 queue entry #%d (%s) removed.", id, e.Job)}
}

package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/trainer"
)

// ScheduledStart starts a job for a schedule. It returns a reply to push
// only when the run was not started (a run is active, a parameter is
// refused): a started run announces itself, and one whose command fails
// ends with its own alert.
func ScheduledStart(ctx context.Context, t Trainer, name, job string, params map[string]string, at time.Time) (chat.Reply, bool) {
	_, err := t.Start(ctx, trainer.StartRequest{Job: job, Params: params, By: "schedule " + name})
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	r := chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertSchedule, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
	what := job
	if len(params) > 0 {
		what += " " + render.ParamsText(params)
	}
	switch {
	case err == nil, errors.As(err, &startErr):
		return chat.Reply{}, false
	case errors.As(err, &busy) && busy.Active != nil:
		r.Text = fmt.Sprintf("⏰ %s: %s not started: run #%d (%s) is still running — %s. Send 停止 to stop it, or let it finish.",
			name, what, busy.Active.Run.ID, busy.Active.Run.Job, busy.Active.Brief())
		r.RunID = busy.Active.Run.ID
	case errors.Is(err, trainer.ErrBadParam):
		r.Text = fmt.Sprintf("⏰ %s: %s not started: %s", name, what, joinErrors(err))
	default:
		r.Text = fmt.Sprintf("⏰ %s: %s not started: %v", name, what, err)
	}
	return r, true
}

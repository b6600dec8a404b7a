package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// ScheduledStart starts a job for a schedule. It returns a reply to push,
// worded per language (notify's PushIn), only when the run was not started
// (a run is active, a parameter is refused): a started run announces
// itself, and one whose command fails ends with its own alert.
func ScheduledStart(ctx context.Context, t Trainer, name, job string, params map[string]string, at time.Time) (func(i18n.Lang) chat.Reply, bool) {
	_, err := t.Start(ctx, trainer.StartRequest{Job: job, Params: params, By: "schedule " + name})
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	what := job
	if len(params) > 0 {
		what += " " + render.ParamsText(params)
	}
	if err == nil || errors.As(err, &startErr) {
		return nil, false
	}
	return func(l i18n.Lang) chat.Reply {
		r := chat.Reply{Kind: chat.KindAlert, Alert: chat.AlertSchedule, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
		switch {
		case errors.As(err, &busy) && busy.Active != nil:
			r.Text = l.T(i18n.SchedBusy, name, what, busy.Active.Run.ID, busy.Active.Run.Job, render.StatusBrief(l, *busy.Active))
			r.RunID = busy.Active.Run.ID
		case errors.Is(err, trainer.ErrBadParam):
			r.Text = l.T(i18n.SchedRefused, name, what, paramErrors(l, err))
		default:
			r.Text = l.T(i18n.SchedRefused, name, what, err.Error())
		}
		return r
	}, true
}

package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer"
)

// RunCharts draws the charts that go with a report or the end of a run:
// the loss chart, then the memory chart. A run with nothing to draw yet
// gets no chart and no error.
func (c *Charts) RunCharts(ctx context.Context, run *trainer.Run) ([]Image, error) {
	var out []Image
	var errs []error
	loss, err := c.Loss(ctx, run, LossOptions{})
	switch {
	case err == nil:
		out = append(out, loss)
	case !errors.Is(err, ErrNoMetric):
		errs = append(errs, err)
	}
	mem, err := c.Memory(ctx, run)
	switch {
	case err == nil:
		out = append(out, mem)
	case !errors.Is(err, ErrNoSamples):
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// ReportReply is a scheduled report: the status of each active run with
// its charts, or a line about the last run when none is active. It goes
// out like progress (subscribed chats, push channels with progress, dropped
// during quiet hours) but as a notice: a message of its own with its
// charts, never an edit of a run's live progress message (KindProgress).
func ReportReply(ctx context.Context, t Trainer, h History, charts func(context.Context, *trainer.Run) []Image, name string, at time.Time) Reply {
	r := Reply{Kind: KindNotice, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
	active := t.Active()
	if len(active) == 0 {
		r.Text = fmt.Sprintf("⏰ %s: no run is active.", name)
		if run, err := h.LatestRun(ctx, ""); err == nil {
			last, _ := h.LastValues(ctx, run.ID)
			r.Text += " The last one:\n" + EndedText(run, last)
			r.RunID = run.ID
		}
		return r
	}
	parts := make([]string, 0, len(active))
	for _, st := range active {
		parts = append(parts, StatusText(st))
		if charts != nil {
			r.Images = append(r.Images, charts(ctx, st.Run)...)
		}
	}
	r.Text = fmt.Sprintf("⏰ %s report\n%s", name, strings.Join(parts, "\n\n"))
	r.RunID = active[0].Run.ID
	return r
}

// ScheduledStart starts a job for a schedule. It returns a reply to push
// only when the run was not started (a run is active, a parameter is
// refused): a started run announces itself, and one whose command fails
// ends with its own alert.
func ScheduledStart(ctx context.Context, t Trainer, name, job string, params map[string]string, at time.Time) (Reply, bool) {
	_, err := t.Start(ctx, trainer.StartRequest{Job: job, Params: params, By: "schedule " + name})
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	r := Reply{Kind: KindAlert, Alert: AlertSchedule, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
	what := job
	if len(params) > 0 {
		what += " " + paramsText(params)
	}
	switch {
	case err == nil, errors.As(err, &startErr):
		return Reply{}, false
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

package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// ActiveRuns is what notify reads of the supervisor.
type ActiveRuns interface {
	// Active returns the status of every active run.
	Active() []trainer.Status
}

// History is what a scheduled report reads of the store.
type History interface {
	// LatestRun returns the newest run of a job ("" for any job).
	LatestRun(ctx context.Context, job string) (*trainer.Run, error)
	// LastValues returns the last value of each metric of a run.
	LastValues(ctx context.Context, runID int64) (map[string]float64, error)
}

// ReportReply is a scheduled report: the status of each active run with
// its charts, or a line about the last run when none is active. It goes
// out like progress (subscribed chats, push channels with progress, dropped
// during quiet hours) but as a notice: a message of its own with its
// charts, never an edit of a run's live progress message (KindProgress).
// The runs are read once; the reply is worded, and its charts drawn, per
// language (Notifier.PushIn) while ctx lasts.
func ReportReply(ctx context.Context, t ActiveRuns, h History, charts func(context.Context, i18n.Lang, *trainer.Run) []chat.Image, name string, at time.Time) func(i18n.Lang) chat.Reply {
	base := chat.Reply{Kind: chat.KindNotice, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
	active := t.Active()
	if len(active) == 0 {
		run, err := h.LatestRun(ctx, "")
		var last map[string]float64
		if err == nil {
			last, _ = h.LastValues(ctx, run.ID)
			base.RunID = run.ID
		}
		return func(l i18n.Lang) chat.Reply {
			r := base
			r.Text = l.T(i18n.ReportNone, name)
			if err == nil {
				r.Text += l.T(i18n.ReportLastOne) + render.EndedText(l, run, last)
			}
			return r
		}
	}
	base.RunID = active[0].Run.ID
	return func(l i18n.Lang) chat.Reply {
		r := base
		parts := make([]string, 0, len(active))
		for _, st := range active {
			parts = append(parts, render.StatusText(l, st))
			if charts != nil && ctx.Err() == nil {
				r.Images = append(r.Images, charts(ctx, l, st.Run)...)
			}
		}
		r.Text = l.T(i18n.ReportHead, name, strings.Join(parts, "\n\n"))
		return r
	}
}

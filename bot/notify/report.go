package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
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
func ReportReply(ctx context.Context, t ActiveRuns, h History, charts func(context.Context, *trainer.Run) []chat.Image, name string, at time.Time) chat.Reply {
	r := chat.Reply{Kind: chat.KindNotice, Key: fmt.Sprintf("schedule:%s:%d", name, at.Unix())}
	active := t.Active()
	if len(active) == 0 {
		r.Text = fmt.Sprintf("⏰ %s: no run is active.", name)
		if run, err := h.LatestRun(ctx, ""); err == nil {
			last, _ := h.LastValues(ctx, run.ID)
			r.Text += " The last one:\n" + render.EndedText(run, last)
			r.RunID = run.ID
		}
		return r
	}
	parts := make([]string, 0, len(active))
	for _, st := range active {
		parts = append(parts, render.StatusText(st))
		if charts != nil {
			r.Images = append(r.Images, charts(ctx, st.Run)...)
		}
	}
	r.Text = fmt.Sprintf("⏰ %s report\n%s", name, strings.Join(parts, "\n\n"))
	r.RunID = active[0].Run.ID
	return r
}

package command

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// Knobs is what 存档 and 调参 need of the supervisor (trainer.Supervisor).
type Knobs interface {
	// Checkpoint sends a run its job's checkpoint signal; the answer's
	// Wait looks for the new checkpoint file.
	Checkpoint(ctx context.Context, runID int64, by string) (*trainer.CheckpointAsk, error)
	// SetLive writes live values to a run's control file and sends its
	// job's control signal.
	SetLive(ctx context.Context, runID int64, values map[string]string, by string) (*trainer.LiveChange, error)
}

var _ Knobs = (*trainer.Supervisor)(nil)

// DefaultCheckpointWait is how long 存档 waits for the new checkpoint file
// before it answers that none appeared.
const DefaultCheckpointWait = 60 * time.Second

func (r *Router) checkpointWait() time.Duration {
	if r.CheckpointWait > 0 {
		return r.CheckpointWait
	}
	return DefaultCheckpointWait
}

// knobs is the Knobs in use: the field, else the Trainer when it has them.
func (r *Router) knobs() Knobs {
	if r.Knobs != nil {
		return r.Knobs
	}
	k, _ := r.Trainer.(Knobs)
	return k
}

// checkpoint answers 存档 [run]: the signal is sent, and an answer names
// the new file once it appears (or says that none did within the wait):
// a second message with Later, else this reply once the wait is over.
func (r *Router) checkpoint(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	id, _, err := runArg(l, p.Args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	k := r.knobs()
	if k == nil {
		return chat.Reply{Text: l.T(i18n.KnobNothing)}
	}
	ask, err := k.Checkpoint(ctx, id, who(m))
	if err != nil {
		return r.knobRefusal(ctx, l, p.Word, id, err)
	}
	run := ask.Run
	sig := trainer.SignalName(int(ask.Signal))
	if ask.Pattern == "" {
		return chat.Reply{Text: l.T(i18n.CheckpointUnwatched, run.ID, run.Job, sig, run.Job), RunID: run.ID}
	}
	wait := r.checkpointWait()
	found := func(ctx context.Context) chat.Reply {
		res := ask.Wait(ctx, wait)
		if res.Path == "" {
			return chat.Reply{Text: l.T(i18n.CheckpointNotSeen, run.ID, run.Job, sig, ask.Pattern, render.FormatDuration(wait), sig), RunID: run.ID}
		}
		return chat.Reply{Text: l.T(i18n.CheckpointSaved, run.ID, run.Job, sig, filepath.Base(res.Path), render.FormatBytes(res.Size), took(res.Took)), RunID: run.ID}
	}
	if r.Later.Go(ctx, m, found) {
		return chat.Reply{Text: l.T(i18n.CheckpointSent, run.ID, run.Job, sig, ask.Pattern, render.FormatDuration(wait)), RunID: run.ID}
	}
	return found(ctx)
}

// took is a short wait in milliseconds ("22ms") or tenths of a second
// ("3.4s"), a longer one as durations are shown.
func took(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return render.FormatDuration(d)
}

// set answers 调参 [run] k=v…
func (r *Router) set(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	id, args, err := runArg(l, p.Args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	k := r.knobs()
	if k == nil {
		return chat.Reply{Text: l.T(i18n.KnobNothing)}
	}
	values := map[string]string{}
	var problems []string
	for _, a := range args {
		name, v, ok := strings.Cut(a, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			problems = append(problems, l.T(i18n.ParamUnread, a))
			continue
		}
		if prev, dup := values[name]; dup {
			problems = append(problems, l.T(i18n.ParamTwice, name, prev, v))
			continue
		}
		values[name] = v
	}
	if len(values) == 0 || len(problems) > 0 {
		usage := l.T(i18n.SetUsage, r.liveOf(id))
		if len(problems) > 0 {
			usage = strings.Join(problems, l.T(i18n.ParamSep)) + "\n" + usage
		}
		return chat.Reply{Text: usage}
	}
	ch, err := k.SetLive(ctx, id, values, who(m))
	if err != nil && ch == nil {
		if errors.Is(err, trainer.ErrBadParam) {
			return chat.Reply{Text: paramErrors(l, err), RunID: id}
		}
		return r.knobRefusal(ctx, l, p.Word, id, err)
	}
	run, _ := r.Trainer.Status(ch.RunID)
	jobName := ""
	if run.Run != nil {
		jobName = run.Run.Job
	}
	how := l.T(i18n.SetPolled)
	switch {
	case err != nil:
		how = l.T(i18n.SetNotSent, knobDetail(err))
	case ch.Signal != 0:
		how = l.T(i18n.SetSignalled, trainer.SignalName(int(ch.Signal)))
	}
	return chat.Reply{Text: l.T(i18n.SetDone, ch.RunID, jobName, ch.Label(), ch.Version, how), RunID: ch.RunID}
}

// liveOf is "2 (lr, wd)": the run's job and its live values, for 调参's
// usage ("?" when the run cannot be told).
func (r *Router) liveOf(id int64) string {
	st, err := r.Trainer.Status(id)
	if err != nil || st.Run == nil {
		return "?"
	}
	j := r.job(st.Run.Job)
	if j == nil {
		return st.Run.Job + ": ?"
	}
	names := j.LiveNames()
	if len(names) == 0 {
		return st.Run.Job + ": –"
	}
	return st.Run.Job + ": " + strings.Join(names, ", ")
}

func knobDetail(err error) string {
	var ke *trainer.KnobError
	if errors.As(err, &ke) && ke.Detail != "" {
		return ke.Detail
	}
	return err.Error()
}

// knobRefusal words why 存档 or 调参 (word, as typed) did nothing.
func (r *Router) knobRefusal(ctx context.Context, l i18n.Lang, word string, id int64, err error) chat.Reply {
	var ke *trainer.KnobError
	switch {
	case errors.As(err, &ke):
		reply := chat.Reply{RunID: ke.Run}
		switch ke.Why {
		case trainer.KnobNoSignal:
			reply.Text = l.T(i18n.KnobNoSignal, ke.Job)
		case trainer.KnobNoLive:
			reply.Text = l.T(i18n.KnobNoLive, ke.Job)
		case trainer.KnobOnHost:
			reply.Text = l.T(i18n.KnobOnHost, ke.Run, ke.Host, word)
		case trainer.KnobWatched:
			reply.Text = l.T(i18n.KnobWatched, ke.Run, word)
		case trainer.KnobNoSlurm:
			reply.Text = l.T(i18n.KnobNoSlurm, ke.Run, ke.Detail)
		case trainer.KnobNoShim:
			reply.Text = l.T(i18n.KnobNoShim, ke.Run, ke.Detail)
		default:
			reply.Text = l.T(i18n.KnobNoOwner, ke.Run, word)
		}
		return reply
	case errors.Is(err, trainer.ErrAmbiguous):
		return chat.Reply{Text: l.T(i18n.Ambiguous, r.activeIDs())}
	case errors.Is(err, trainer.ErrNotRunning):
		if id != 0 {
			if run, herr := r.History.Run(ctx, id); herr == nil {
				return chat.Reply{Text: l.T(i18n.AlreadyEnded, id, render.OutcomeWord(l, run.Outcome)), RunID: id}
			}
			return chat.Reply{Text: l.T(i18n.NoSuchRun, id)}
		}
		return chat.Reply{Text: l.T(i18n.KnobNothing)}
	}
	r.log().Warn("knob", "word", word, "run", id, "err", err)
	return chat.Reply{Text: err.Error()}
}

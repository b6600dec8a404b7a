package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// watch answers 关注 PATH [pid]: a run trainbot did not start, followed
// through its log, which must be in one of WatchDirs. The path is taken
// as typed (p.Raw): a file's name may have full-width characters that
// NFKC would change.
func (r *Router) watch(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	args := p.Args
	if len(r.cur().WatchDirs) == 0 {
		cli := ""
		if r.CLI != "" {
			cli = " " + r.CLI
		}
		return chat.Reply{Text: l.T(i18n.WatchOff, cli)}
	}
	if len(args) < 1 || len(args) > 2 {
		return chat.Reply{Text: l.T(i18n.WatchUsage)}
	}
	typed := args[0]
	if len(p.Raw) == len(args) {
		typed = p.Raw[0]
	}
	path, err := r.watchable(typed)
	if err != nil {
		return chat.Reply{Text: l.T(i18n.NotWatched, err.Error())}
	}
	pid := 0
	if len(args) == 2 {
		if pid, err = strconv.Atoi(args[1]); err != nil || pid <= 0 {
			return chat.Reply{Text: l.T(i18n.NotWatchedPID, args[1])}
		}
	}
	run, err := r.Trainer.Watch(ctx, trainer.WatchRequest{LogPath: path, PID: pid, By: who(m), Origin: m.ChatKey().String()})
	if err != nil {
		return chat.Reply{Text: l.T(i18n.NotWatched, err.Error())}
	}
	text := l.T(i18n.WatchingRun, run.ID, run.Job, run.LogPath)
	if pid > 0 {
		text += l.T(i18n.WatchEndsPID, pid)
	} else {
		text += l.T(i18n.WatchEndsStop, run.ID)
	}
	return chat.Reply{Text: text, RunID: run.ID}
}

// watchable resolves p (symbolic links too) and checks that it is a file in
// one of WatchDirs.
func (r *Router) watchable(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q: give the log's absolute path", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s: %v", p, errors.Unwrap(err))
	}
	for _, d := range r.cur().WatchDirs {
		dir, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(dir, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator)) && rel != "." {
			return real, nil
		}
	}
	return "", fmt.Errorf("%s is not in a directory of [watch] dirs (%s)", p, strings.Join(r.cur().WatchDirs, ", "))
}

// stopWatched answers 停止 of a watched run: without kill it only stops
// watching; with kill (confirmed) it stops the process as well.
func (r *Router) stopWatched(m chat.Message, l i18n.Lang, st trainer.Status, kill, confirmed bool) chat.Reply {
	id := st.Run.ID
	if kill && st.Run.PID > 0 && !confirmed {
		return chat.Reply{
			Text:  l.T(i18n.WatchKillAsk, id, st.Run.Job, st.Run.PID),
			RunID: id,
			Buttons: [][]chat.Button{{
				{Label: l.Button(i18n.BtnYes), Data: fmt.Sprintf("/stop %d kill confirm", id)},
				{Label: l.Button(i18n.BtnNo), Data: "/stop cancel"},
			}},
		}
	}
	killIt := kill && st.Run.PID > 0
	if _, err := r.Trainer.StopWatched(id, who(m), killIt); err != nil {
		return chat.Reply{Text: l.T(i18n.WatchGone, id)}
	}
	if killIt {
		return chat.Reply{Text: l.T(i18n.WatchKilling, id, st.Run.PID), RunID: id}
	}
	text := l.T(i18n.WatchUnwatched, id, st.Run.Job)
	if st.Run.PID > 0 {
		text += l.T(i18n.WatchProcGoesOn, st.Run.PID, id)
	}
	return chat.Reply{Text: text, RunID: id}
}

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
	"github.com/trainbot/trainbot/trainer"
)

// watch answers 关注 PATH [pid]: a run trainbot did not start, followed
// through its log, which must be in one of WatchDirs.
func (r *Router) watch(ctx context.Context, m chat.Message, args []string) chat.Reply {
	if len(r.cur().WatchDirs) == 0 {
		return chat.Reply{Text: "关注 is off: the config's [watch] dirs names no directory whose logs a chat may watch. On the host: trainbot watch --log FILE [--pid PID]."}
	}
	if len(args) < 1 || len(args) > 2 {
		return chat.Reply{Text: "关注 takes a log file and, optionally, the pid that writes it: 关注 /data/exp1/train.log 12345"}
	}
	path, err := r.watchable(args[0])
	if err != nil {
		return chat.Reply{Text: "Not watched: " + err.Error()}
	}
	pid := 0
	if len(args) == 2 {
		if pid, err = strconv.Atoi(args[1]); err != nil || pid <= 0 {
			return chat.Reply{Text: fmt.Sprintf("Not watched: %q is not a process id.", args[1])}
		}
	}
	run, err := r.Trainer.Watch(ctx, trainer.WatchRequest{LogPath: path, PID: pid, By: who(m), Origin: m.ChatKey().String()})
	if err != nil {
		return chat.Reply{Text: "Not watched: " + err.Error()}
	}
	text := fmt.Sprintf("👁 watching run #%d (%s): %s", run.ID, run.Job, run.LogPath)
	if pid > 0 {
		text += fmt.Sprintf("; it ends when pid %d exits", pid)
	} else {
		text += fmt.Sprintf("; with no pid it ends on 停止 %d", run.ID)
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
func (r *Router) stopWatched(m chat.Message, st trainer.Status, kill, confirmed bool) chat.Reply {
	id := st.Run.ID
	if kill && st.Run.PID > 0 && !confirmed {
		return chat.Reply{
			Text:  fmt.Sprintf("Kill the watched process of run #%d (%s, pid %d)? trainbot did not start it. SIGINT, then SIGTERM and SIGKILL.", id, st.Run.Job, st.Run.PID),
			RunID: id,
			Buttons: [][]chat.Button{{
				{Label: "确认 Yes", Data: fmt.Sprintf("/stop %d kill confirm", id)},
				{Label: "取消 No", Data: "/stop cancel"},
			}},
		}
	}
	killIt := kill && st.Run.PID > 0
	if _, err := r.Trainer.StopWatched(id, who(m), killIt); err != nil {
		return chat.Reply{Text: fmt.Sprintf("Run #%d is no longer watched.", id)}
	}
	if killIt {
		return chat.Reply{Text: fmt.Sprintf("⏹ stopping the watched process of run #%d (pid %d): SIGINT sent; you will get a message when it has exited.", id, st.Run.PID), RunID: id}
	}
	text := fmt.Sprintf("⏏️ run #%d (%s) is no longer watched.", id, st.Run.Job)
	if st.Run.PID > 0 {
		text += fmt.Sprintf(" Its process (pid %d) goes on; 停止 %d kill stops it (asks first).", st.Run.PID, id)
	}
	return chat.Reply{Text: text, RunID: id}
}

package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// Trainer is what the router needs of the supervisor.
type Trainer interface {
	Jobs() []*trainer.Job
	Start(ctx context.Context, req trainer.StartRequest) (*trainer.Run, error)
	Stop(runID int64, by string) (*trainer.Run, error)
	Active() []trainer.Status
	Status(runID int64) (trainer.Status, error)
	Tail(runID int64, n int) ([]string, error)
	Enqueue(ctx context.Context, req trainer.StartRequest, userID string) (trainer.QueueEntry, int, error)
	Watch(ctx context.Context, req trainer.WatchRequest) (*trainer.Run, error)
	StopWatched(runID int64, by string, killProcess bool) (*trainer.Run, error)
	Queued(ctx context.Context) ([]trainer.QueueEntry, error)
	CancelQueued(ctx context.Context, id int64, userID string, operator bool) (trainer.QueueEntry, error)
}

// History is what the router needs of the store.
type History interface {
	Run(ctx context.Context, id int64) (*trainer.Run, error)
	LatestRun(ctx context.Context, job string) (*trainer.Run, error)
	Runs(ctx context.Context, f store.RunFilter) ([]*trainer.Run, error)
	LastValues(ctx context.Context, runID int64) (map[string]float64, error)
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	Series(ctx context.Context, runID int64, name string) ([]store.Point, error)
	Flush(ctx context.Context) error
	Audit(ctx context.Context, e store.AuditEntry) (int64, error)
	AuditRun(ctx context.Context, id, runID int64) error
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
	SetSubscribed(ctx context.Context, transport string, chat int64, on bool) error
	SetNote(ctx context.Context, id int64, note string) error
}

var (
	_ Trainer = (*trainer.Supervisor)(nil)
	_ History = (*store.Store)(nil)
)

// Role is what a user may do.
type Role int

// Roles, from none to all.
const (
	RoleNone     Role = iota // strangers: refused
	RoleViewer               // may look
	RoleOperator             // may also start and stop
)

// Access lists who may use the bot. The local terminal user is always an
// operator.
type Access struct {
	Operators []int64
	Viewers   []int64
	// Chats, when not empty, limits the bot to these chats (of the
	// transports with numeric ids: Telegram).
	Chats []int64
	// Members are the users of messengers whose ids are strings (chat.User
	// Ref), by transport name and id: Members["wecom"]["zhangsan"].
	Members map[string]map[string]Role
}

// Role returns the role of a message's sender.
func (a Access) Role(m chat.Message) Role {
	if m.Local {
		return RoleOperator
	}
	if m.User.Ref != "" {
		return a.Members[m.Transport][m.User.Ref]
	}
	if len(a.Chats) > 0 && !slices.Contains(a.Chats, m.Chat) {
		return RoleNone
	}
	switch {
	case slices.Contains(a.Operators, m.User.ID):
		return RoleOperator
	case slices.Contains(a.Viewers, m.User.ID):
		return RoleViewer
	}
	return RoleNone
}

// Router answers chat messages: it authorises the sender, parses the
// command and runs it.
type Router struct {
	Trainer Trainer
	History History
	Access  Access
	Logger  *slog.Logger
	// Smoothing is the EMA weight of loss charts: plots.DefaultSmoothing
	// when 0, no smoothed line when negative.
	Smoothing float64
	// Plots draws the charts; plots.Default() when nil.
	Plots *plots.Painter
	// Charts is where charts read samples and series; the History when
	// nil (the store is both).
	Charts render.ChartData
	// ConfirmStop, for a transport name, makes 停止 ask for confirmation with
	// buttons before stopping (transports with buttons).
	ConfirmStop map[string]bool
	// WatchDirs are the directories whose files 关注 may watch (and
	// nothing else: a chat never reads arbitrary files); none: 关注 is off.
	WatchDirs []string
	live      atomic.Pointer[Settings] // set by Reload

	// Location is the time zone dates are shown in; nil: the process's
	// (TZ).
	Location *time.Location
	// GPU answers 显卡 when set; without it the command says so.
	GPU func(ctx context.Context) chat.Reply
	// HostAvailable returns the host's available memory, the limit of 适配
	// for a job that runs on the CPU; nil: unknown.
	HostAvailable func() int64
	// PageURL, when set, gives a run's web page address: chart replies get
	// a [网页 Open] button (render.PageButtons).
	PageURL func(runID int64) string
}

// maxText is the longest message the router reads.
const maxText = 4096

// now is the time in the configured zone (Location), which dates are
// shown in.
func (r *Router) now() time.Time {
	if loc := r.cur().Location; loc != nil {
		return time.Now().In(loc)
	}
	return time.Now()
}

// Settings are what a config reload changes in the router.
type Settings struct {
	Access    Access
	WatchDirs []string
	Location  *time.Location
}

// Reload replaces the router's settings (a reload of the config); it is
// safe while messages are handled.
func (r *Router) Reload(s Settings) { r.live.Store(&s) }

// cur is the settings in force: the last Reload's, else the fields'.
func (r *Router) cur() Settings {
	if s := r.live.Load(); s != nil {
		return *s
	}
	return Settings{Access: r.Access, WatchDirs: r.WatchDirs, Location: r.Location}
}

func (r *Router) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Handle answers one message.
func (r *Router) Handle(ctx context.Context, m chat.Message) chat.Reply {
	text := strings.TrimSpace(m.Text)
	if text == "" {
		return chat.Reply{}
	}
	if len(text) > maxText {
		text = text[:maxText]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	p := chat.Parse(text)
	role := r.cur().Access.Role(m)
	entry := store.AuditEntry{Transport: m.Transport, Chat: m.Chat, User: m.User.ID, UserName: auditName(m.User), Text: text}
	if p.Cmd != nil {
		entry.Command = p.Cmd.Name
		if strings.HasPrefix(p.Cmd.Args, "[run]") {
			entry.Run, _, _ = runArg(p.Args) // the run it names; a start's is known once started
		}
	}
	refuse := func(reason, reply string) chat.Reply {
		entry.Reason = reason
		r.audit(ctx, entry)
		return chat.Reply{Text: reply}
	}
	switch {
	case role == RoleNone:
		return refuse("not an allowed user", fmt.Sprintf("Sorry, you are not allowed to use this bot. 你没有权限。\nYour user id is %s: the owner can add it to [auth] %s or %s.", m.User.Who(), authKey(m, "operators"), authKey(m, "viewers")))
	case p.Cmd == nil:
		return refuse("unknown command", fmt.Sprintf("I don't know %q. Send 帮助 (/help) for the commands.", render.Clip(p.Word, 40)))
	case p.Cmd.Operator && role < RoleOperator:
		return refuse("viewer", fmt.Sprintf("Viewers can look but not %s. Your user id is %s: the owner can add it to [auth] %s.", p.Cmd.Help, m.User.Who(), authKey(m, "operators")))
	}
	entry.Allowed = true
	// Recorded before it is carried out, so a command that never returns
	// is in the audit too; the run it touched is added after.
	id := r.audit(ctx, entry)
	reply := r.dispatch(ctx, m, p)
	if reply.Empty() {
		reply.Text = "OK"
	}
	if id != 0 && reply.RunID != 0 && reply.RunID != entry.Run {
		if err := r.History.AuditRun(context.WithoutCancel(ctx), id, reply.RunID); err != nil {
			r.log().Warn("audit", "err", err)
		}
	}
	return reply
}

// auditName is the name the audit keeps: with the messenger's id where
// the user's number is only derived from it.
func auditName(u chat.User) string {
	switch {
	case u.Ref == "":
		return u.Name
	case u.Name == "" || u.Name == u.Ref:
		return u.Ref
	}
	return u.Name + " (" + u.Ref + ")"
}

// authKey is the [auth] key that lists the sender's kind of id:
// "operators", or "wecom_operators" for a messenger with string ids.
func authKey(m chat.Message, list string) string {
	if m.User.Ref != "" {
		return m.Transport + "_" + list
	}
	return list
}

// audit records an entry and returns its id (0 when it could not).
func (r *Router) audit(ctx context.Context, e store.AuditEntry) int64 {
	if r.History == nil {
		return 0
	}
	id, err := r.History.Audit(context.WithoutCancel(ctx), e)
	if err != nil {
		r.log().Warn("audit", "err", err)
	}
	return id
}

// auditLog answers 审计 [n]: the newest n entries (20; at most 50).
func (r *Router) auditLog(ctx context.Context, args []string) chat.Reply {
	n, bad := countArg(args, 20, 50, "审计 takes a number of entries, e.g. 审计 50")
	if bad != nil {
		return *bad
	}
	entries, err := r.History.AuditLog(ctx, store.AuditFilter{Limit: n})
	if err != nil {
		r.log().Error("read the audit", "err", err)
		return chat.Reply{Text: "Could not read the audit: " + err.Error()}
	}
	return chat.Reply{Text: render.AuditText(entries)}
}

func (r *Router) dispatch(ctx context.Context, m chat.Message, p chat.Parsed) chat.Reply {
	switch p.Cmd.Name {
	case "help":
		return chat.Reply{Text: HelpText()}
	case "train":
		return r.train(ctx, m, p.Args)
	case "stop":
		return r.stop(ctx, m, p.Args)
	case "status":
		return r.status(ctx, p.Args)
	case "plot":
		return r.plot(ctx, p.Args)
	case "log":
		return r.logTail(ctx, p.Args)
	case "runs":
		return r.runs(ctx, p.Args)
	case "jobs":
		return chat.Reply{Text: render.JobsText(r.Trainer.Jobs())}
	case "subscribe", "mute":
		on := p.Cmd.Name == "subscribe"
		if err := r.History.SetSubscribed(ctx, m.Transport, m.Chat, on); err != nil {
			r.log().Error("subscribe", "err", err)
			return chat.Reply{Text: "Could not save that: " + err.Error()}
		}
		if on {
			return chat.Reply{Text: "Subscribed: this chat gets run progress and reports. Send 静音 (/mute) to stop them. Alerts always come."}
		}
		return chat.Reply{Text: "Muted: no more progress pushes here (alerts still come). Send 订阅 (/subscribe) to turn them back on."}
	case "gpu":
		if r.GPU != nil {
			return r.GPU(ctx)
		}
		return chat.Reply{Text: "显卡 (/gpu) is not available in this version yet: GPU telemetry through NVML is still being built."}
	case "compare":
		return r.compare(ctx, p.Args)
	case "audit":
		return r.auditLog(ctx, p.Args)
	case "note":
		return r.note(ctx, p.Args)
	case "watch":
		return r.watch(ctx, m, p.Args)
	case "queue":
		if len(p.Args) == 0 && p.Word != "排队" {
			return r.queueList(ctx)
		}
		if r.cur().Access.Role(m) < RoleOperator {
			return chat.Reply{Text: fmt.Sprintf("Viewers can look at the queue (队列) but not add to it. Your user id is %d: the owner can add it to [auth] operators.", m.User.ID)}
		}
		return r.enqueue(ctx, m, p.Args)
	case "queued":
		return r.queueList(ctx)
	case "cancel":
		return r.cancelQueued(ctx, m, p.Args)
	case "fit":
		return r.fit(ctx, p.Args)
	}
	return chat.Reply{Text: HelpText()}
}

// HelpText is the command table.
func HelpText() string {
	var b strings.Builder
	b.WriteString("trainbot commands (中文 or English, with or without /):\n")
	for _, c := range chat.Commands {
		usage := c.Chinese
		if c.Args != "" {
			usage += " " + c.Args
		}
		fmt.Fprintf(&b, "%s  /%s — %s\n", usage, c.Name, c.Help)
	}
	b.WriteString("Example: 开始 batch_size=32 lr=3e-4")
	return b.String()
}

// noteWords start a run's note in 开始's arguments: the rest of the line
// is the note ("开始 mlp bs=32 备注 checkpointing on", "备注:…", "note: …",
// "-- …").
var noteWords = []string{"备注", "备注:", "备注：", "note", "note:", "--"}

// splitNote separates a note from 开始's arguments.
func splitNote(args []string) (rest []string, note string) {
	for i, a := range args {
		low := strings.ToLower(a)
		if slices.Contains(noteWords, low) {
			return args[:i], cleanNote(strings.Join(args[i+1:], " "))
		}
		for _, w := range []string{"备注:", "备注：", "note:"} {
			if strings.HasPrefix(low, w) {
				return args[:i], cleanNote(a[len(w):] + " " + strings.Join(args[i+1:], " "))
			}
		}
	}
	return args, ""
}

// maxNote bounds a note (runes).
const maxNote = 500

func cleanNote(s string) string {
	s = strings.TrimSpace(s)
	s = strings.Trim(s, `"'“”「」`)
	if r := []rune(s); len(r) > maxNote {
		s = string(r[:maxNote]) + "…"
	}
	return strings.TrimSpace(s)
}

// note answers 备注 N text.
func (r *Router) note(ctx context.Context, args []string) chat.Reply {
	if len(args) < 1 {
		return chat.Reply{Text: "备注 takes a run and a text, e.g. 备注 12 checkpointing on (备注 12 alone removes the note)."}
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return chat.Reply{Text: fmt.Sprintf("%q is not a run number: 备注 N text, e.g. 备注 12 checkpointing on.", args[0])}
	}
	text := cleanNote(strings.Join(args[1:], " "))
	if err := r.History.SetNote(ctx, id, text); errors.Is(err, store.ErrNotFound) {
		return chat.Reply{Text: fmt.Sprintf("There is no run #%d.", id)}
	} else if err != nil {
		return chat.Reply{Text: "Could not save the note: " + err.Error()}
	}
	if text == "" {
		return chat.Reply{Text: fmt.Sprintf("📝 run #%d has no note now.", id), RunID: id}
	}
	return chat.Reply{Text: fmt.Sprintf("📝 run #%d: %s", id, text), RunID: id}
}

// maxButtonData is the most bytes a button's data may have (Telegram's
// callback_data limit).
const maxButtonData = 64

// startArgs reads 开始's (and 排队's) arguments: [job] [k=v…] [备注 text].
// problem is the refusal when they cannot be read.
func (r *Router) startArgs(args []string) (jobName string, params map[string]string, note, problem string) {
	args, note = splitNote(args)
	params = map[string]string{}
	var bad, twice []string
	for i, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			if i == 0 {
				jobName = a
				continue
			}
			bad = append(bad, a)
			continue
		}
		k = strings.TrimSpace(k)
		if k == "" {
			bad = append(bad, a)
			continue
		}
		if prev, dup := params[k]; dup {
			twice = append(twice, fmt.Sprintf("%s is given twice (%q and %q): give it once", k, prev, v))
			continue
		}
		params[k] = v
	}
	if len(bad) == 0 && len(twice) == 0 {
		return jobName, params, note, ""
	}
	// Say first what is wrong with the values read ("1;rm" of
	// batch_size=1;rm -rf /), then what could not be read at all.
	var problems []string
	if job := r.job(jobName); job != nil {
		if _, err := job.ResolveParams(params); err != nil {
			for _, e := range unwrapJoined(err) {
				if pe := (*trainer.ParamError)(nil); errors.As(e, &pe) && pe.Given {
					problems = append(problems, e.Error())
				}
			}
		}
	}
	problems = append(problems, twice...)
	if len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("I could not read %s: parameters are written name=value without spaces, e.g. 开始 batch_size=32", strings.Join(bad, " ")))
	}
	return "", nil, "", "Not started: " + strings.Join(problems, "; ") + ".\nSend 任务 (/jobs) for the parameters."
}

func (r *Router) train(ctx context.Context, m chat.Message, rawArgs []string) chat.Reply {
	jobName, params, note, problem := r.startArgs(rawArgs)
	if problem != "" {
		return chat.Reply{Text: problem}
	}
	run, err := r.Trainer.Start(ctx, trainer.StartRequest{Job: jobName, Params: params, By: who(m), Origin: m.ChatKey().String(), Note: note})
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	switch {
	case errors.As(err, &busy):
		queue := "排队 " + strings.Join(rawArgs, " ")
		hint := fmt.Sprintf(" Send 停止 to stop it first, or %s to start this when it ends.", strings.TrimSpace(queue))
		var buttons [][]chat.Button
		if data := "/queue " + strings.Join(rawArgs, " "); len(data) <= maxButtonData {
			buttons = [][]chat.Button{{{Label: "排队 Queue", Data: strings.TrimSpace(data)}}}
		}
		if busy.Active != nil {
			return chat.Reply{
				Text:    fmt.Sprintf("Not started: run #%d (%s) is already running — %s.", busy.Active.Run.ID, busy.Active.Run.Job, busy.Active.Brief()) + hint,
				Buttons: append(buttons, render.StartButtons()...), RunID: busy.Active.Run.ID,
			}
		}
		return chat.Reply{Text: "Not started: " + busy.Other + "." + hint, Buttons: buttons}
	case errors.As(err, &startErr):
		return chat.Reply{Text: fmt.Sprintf("❌ run #%d could not start: %v", startErr.Run.ID, startErr.Err), RunID: startErr.Run.ID}
	case errors.Is(err, trainer.ErrBadParam):
		return chat.Reply{Text: "Not started: " + joinErrors(err) + "\nSend 任务 (/jobs) for the parameters."}
	case errors.Is(err, trainer.ErrUnknownJob):
		return chat.Reply{Text: "Not started: " + err.Error() + "."}
	case errors.Is(err, trainer.ErrClosed):
		return chat.Reply{Text: "Not started: trainbot is shutting down."}
	case err != nil:
		r.log().Error("start run", "err", err)
		return chat.Reply{Text: "Not started: " + err.Error()}
	}
	text := fmt.Sprintf("▶️ run #%d started: %s", run.ID, run.Job)
	if len(run.Params) > 0 {
		text += " " + render.ParamsText(run.Params)
	}
	if run.Note != "" {
		text += "\n📝 " + run.Note
	}
	if run.SlurmJobID != "" {
		text += fmt.Sprintf("\nSlurm job %s · log %s", run.SlurmJobID, run.LogPath)
	} else {
		text += fmt.Sprintf("\npid %d · log %s", run.PID, run.LogPath)
	}
	return chat.Reply{Text: text, Buttons: render.StartButtons(), RunID: run.ID}
}

func joinErrors(err error) string {
	var parts []string
	for _, e := range unwrapJoined(err) {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

// unwrapJoined is the errors joined in err (err itself when it joins none).
func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// job is the job a start names ("" for the only one), nil when there is no
// such job.
func (r *Router) job(name string) *trainer.Job {
	jobs := r.Trainer.Jobs()
	if name == "" && len(jobs) == 1 {
		return jobs[0]
	}
	for _, j := range jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

func who(m chat.Message) string {
	name := m.User.Name
	if name == "" {
		name = "user " + m.User.Who()
	}
	if m.Transport != "" && m.Transport != "console" {
		return fmt.Sprintf("%s (%s %s)", name, m.Transport, m.User.Who())
	}
	return name
}

// runArg reads an optional run id: "12" or "#12".
func runArg(args []string) (int64, []string, error) {
	if len(args) == 0 {
		return 0, args, nil
	}
	s := strings.TrimPrefix(args[0], "#")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, args, nil
	}
	if id <= 0 {
		return 0, args, fmt.Errorf("%q is not a run id", args[0])
	}
	return id, args[1:], nil
}

func (r *Router) stop(ctx context.Context, m chat.Message, args []string) chat.Reply {
	if len(args) > 0 && (args[0] == "cancel" || args[len(args)-1] == "cancel") {
		return chat.Reply{Text: "OK, the run keeps going."}
	}
	confirmed := len(args) > 0 && args[len(args)-1] == "confirm"
	if confirmed {
		args = args[:len(args)-1]
	}
	kill := len(args) > 0 && (args[len(args)-1] == "kill" || args[len(args)-1] == "杀")
	if kill {
		args = args[:len(args)-1]
	}
	id, _, err := runArg(args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	st, err := r.Trainer.Status(id)
	if err != nil {
		if id != 0 {
			if run, herr := r.History.Run(ctx, id); herr == nil {
				return chat.Reply{Text: fmt.Sprintf("Run #%d already ended: %s.", id, run.Outcome), RunID: id}
			}
			return chat.Reply{Text: fmt.Sprintf("There is no run #%d.", id)}
		}
		if errors.Is(err, trainer.ErrAmbiguous) {
			return chat.Reply{Text: "Several runs are active: " + r.activeIDs() + ". Say which: 停止 12"}
		}
		return chat.Reply{Text: "No run is active, nothing to stop."}
	}
	if st.Run.Runner == trainer.RunnerWatch {
		return r.stopWatched(m, st, kill, confirmed)
	}
	if r.ConfirmStop[m.Transport] && !confirmed {
		return chat.Reply{
			Text:  fmt.Sprintf("Stop run #%d (%s)? %s", st.Run.ID, st.Run.Job, st.Brief()),
			RunID: st.Run.ID,
			Buttons: [][]chat.Button{{
				{Label: "确认 Yes", Data: fmt.Sprintf("/stop %d confirm", st.Run.ID)},
				{Label: "取消 No", Data: "/stop cancel"},
			}},
		}
	}
	run, err := r.Trainer.Stop(st.Run.ID, who(m))
	if err != nil {
		return chat.Reply{Text: fmt.Sprintf("Run #%d already ended.", st.Run.ID)}
	}
	return chat.Reply{Text: fmt.Sprintf("⏹ stopping run #%d (%s): SIGINT sent so it can save a checkpoint; you will get a message when it has exited.", run.ID, run.Job), RunID: run.ID}
}

func (r *Router) activeIDs() string {
	var ids []string
	for _, st := range r.Trainer.Active() {
		ids = append(ids, fmt.Sprintf("#%d (%s)", st.Run.ID, st.Run.Job))
	}
	return strings.Join(ids, ", ")
}

func (r *Router) status(ctx context.Context, args []string) chat.Reply {
	id, _, err := runArg(args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	if id == 0 {
		active := r.Trainer.Active()
		if len(active) > 0 {
			var parts []string
			for _, st := range active {
				parts = append(parts, render.StatusText(st))
			}
			return chat.Reply{Text: strings.Join(parts, "\n\n"), RunID: active[0].Run.ID}
		}
	} else if st, err := r.Trainer.Status(id); err == nil {
		return chat.Reply{Text: render.StatusText(st), RunID: id}
	}
	var run *trainer.Run
	if id != 0 {
		run, err = r.History.Run(ctx, id)
	} else {
		run, err = r.History.LatestRun(ctx, "")
	}
	switch {
	case errors.Is(err, store.ErrNotFound) && id != 0:
		return chat.Reply{Text: fmt.Sprintf("There is no run #%d.", id)}
	case errors.Is(err, store.ErrNotFound):
		return chat.Reply{Text: "No run yet. Send 开始 to start one."}
	case err != nil:
		return chat.Reply{Text: "Could not read the history: " + err.Error()}
	}
	last, _ := r.History.LastValues(ctx, run.ID)
	prefix := ""
	if id == 0 {
		prefix = "No run is active. The last one:\n"
	}
	return chat.Reply{Text: prefix + render.EndedText(run, last), RunID: run.ID}
}

// pickRun chooses the run a command is about: the given id, else the
// active run, else the newest.
func (r *Router) pickRun(ctx context.Context, id int64) (*trainer.Run, string) {
	if id != 0 {
		if st, err := r.Trainer.Status(id); err == nil {
			return st.Run, ""
		}
		run, err := r.History.Run(ctx, id)
		if err != nil {
			return nil, fmt.Sprintf("There is no run #%d.", id)
		}
		return run, ""
	}
	if active := r.Trainer.Active(); len(active) > 0 {
		return active[0].Run, ""
	}
	run, err := r.History.LatestRun(ctx, "")
	if err != nil {
		return nil, "No run yet, so nothing to draw. Send 开始 to start one."
	}
	return run, ""
}

// charts returns the chart maker, or nil when the history cannot give
// series and samples.
func (r *Router) charts() *render.Charts {
	data := r.Charts
	if data == nil {
		data, _ = r.History.(render.ChartData)
	}
	if data == nil {
		return nil
	}
	return &render.Charts{Data: data, Painter: r.Plots, Smoothing: r.Smoothing}
}

// chartWord reads the words 画图 and 对比 take besides run ids and a
// metric: a chart kind, or the X axis.
func chartWord(w string) (kind string, xTime, ok bool) {
	switch strings.ToLower(w) {
	case "memory", "mem", "显存", "内存":
		return render.KindMemory, false, true
	case "util", "gpu", "utilisation", "utilization", "利用率", "显卡", "温度":
		return render.KindUtil, false, true
	case "time", "时间":
		return "", true, true
	case "step", "steps", "步数":
		return "", false, true
	}
	return "", false, false
}

// plot answers 画图 [run] [metric | memory | util] [time]: by default the
// loss chart and the memory chart of the run.
func (r *Router) plot(ctx context.Context, args []string) chat.Reply {
	id, rest, err := runArg(args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	var kind, metric string
	var xTime bool
	for _, a := range rest {
		k, t, ok := chartWord(a)
		switch {
		case ok:
			kind = cmp.Or(k, kind)
			xTime = xTime || t
		case metric == "":
			metric = a
		default:
			return chat.Reply{Text: fmt.Sprintf("画图 takes a run, a metric and memory, util or time, e.g. 画图 12 val_loss; %q is one word too many.", a)}
		}
	}
	run, msg := r.pickRun(ctx, id)
	if run == nil {
		return chat.Reply{Text: msg}
	}
	ch := r.charts()
	if ch == nil {
		return chat.Reply{Text: "Charts are not available: the history cannot give series.", RunID: run.ID}
	}
	var imgs []chat.Image
	var notes []string
	add := func(img chat.Image, err error) {
		if err != nil {
			notes = append(notes, err.Error())
			return
		}
		imgs = append(imgs, img)
	}
	switch {
	case kind == render.KindMemory:
		add(ch.Memory(ctx, run))
	case kind == render.KindUtil:
		add(ch.Device(ctx, run))
	case metric != "":
		add(ch.Loss(ctx, run, render.LossOptions{Metric: metric, XTime: xTime}))
	default:
		add(ch.Loss(ctx, run, render.LossOptions{XTime: xTime}))
		img, err := ch.Memory(ctx, run)
		if err == nil {
			imgs = append(imgs, img)
		} else if !errors.Is(err, render.ErrNoSamples) || len(imgs) == 0 {
			notes = append(notes, err.Error())
		}
	}
	return chat.Reply{Text: strings.Join(notes, "\n"), Images: imgs, RunID: run.ID, Buttons: render.PageButtons(r.PageURL, run.ID)}
}

func (r *Router) logTail(ctx context.Context, args []string) chat.Reply {
	n, bad := countArg(args, 20, 200, "日志 takes a number of lines, e.g. 日志 50")
	if bad != nil {
		return *bad
	}
	if active := r.Trainer.Active(); len(active) > 0 {
		id := active[0].Run.ID
		lines, err := r.Trainer.Tail(id, n)
		if err == nil {
			return chat.Reply{Text: logText(id, lines), RunID: id}
		}
	}
	run, err := r.History.LatestRun(ctx, "")
	if err != nil {
		return chat.Reply{Text: "No run yet, so no output."}
	}
	lines, err := TailFile(run.LogPath, n)
	if err != nil {
		return chat.Reply{Text: fmt.Sprintf("Could not read the log of run #%d: %v", run.ID, err)}
	}
	return chat.Reply{Text: logText(run.ID, lines), RunID: run.ID}
}

// countArg reads the optional count of 日志, 历史 and 审计: def without one,
// at most most; anything but a positive number is answered with usage.
func countArg(args []string, def, most int, usage string) (int, *chat.Reply) {
	if len(args) == 0 {
		return def, nil
	}
	v, err := strconv.Atoi(args[0])
	if err != nil || v < 1 {
		return 0, &chat.Reply{Text: fmt.Sprintf("%s; %q is not one.", usage, args[0])}
	}
	return min(v, most), nil
}

func logText(id int64, lines []string) string {
	if len(lines) == 0 {
		return fmt.Sprintf("Run #%d has printed nothing yet.", id)
	}
	return fmt.Sprintf("Last %d lines of run #%d:\n%s", len(lines), id, strings.Join(lines, "\n"))
}

func (r *Router) runs(ctx context.Context, args []string) chat.Reply {
	n, bad := countArg(args, 10, 50, "历史 takes a number of runs, e.g. 历史 20")
	if bad != nil {
		return *bad
	}
	runs, err := r.History.Runs(ctx, store.RunFilter{Limit: n})
	if err != nil {
		return chat.Reply{Text: "Could not read the history: " + err.Error()}
	}
	if len(runs) == 0 {
		return chat.Reply{Text: "No run yet. Send 开始 to start one."}
	}
	var b strings.Builder
	b.WriteString("Recent runs:\n")
	for _, run := range runs {
		last, _ := r.History.LastValues(ctx, run.ID)
		b.WriteString(render.RunLine(run, last, r.now()) + "\n")
	}
	return chat.Reply{Text: strings.TrimRight(b.String(), "\n")}
}

// maxCompare is the most runs 对比 overlays (one colour each).
const maxCompare = 8

// compare answers 对比 A B [C D…] [metric] [time]: the runs' curves
// overlaid and a table with ratios against the first run.
func (r *Router) compare(ctx context.Context, args []string) chat.Reply {
	var runs []*trainer.Run
	metric, kind := "", ""
	xTime, xStep := false, false
	for _, a := range args {
		if id, err := strconv.ParseInt(strings.TrimPrefix(a, "#"), 10, 64); err == nil {
			if id <= 0 {
				return chat.Reply{Text: fmt.Sprintf("%q is not a run id.", a)}
			}
			run, err := r.History.Run(ctx, id)
			if err != nil {
				return chat.Reply{Text: fmt.Sprintf("There is no run #%d.", id)}
			}
			runs = append(runs, run)
			continue
		}
		if k, t, ok := chartWord(a); ok && k != render.KindUtil {
			xTime = xTime || t
			xStep = xStep || (k == "" && !t)
			kind = cmp.Or(k, kind)
			continue
		}
		if metric != "" {
			return chat.Reply{Text: fmt.Sprintf("对比 takes run ids and one metric, e.g. 对比 12 13 val_loss; %q is one word too many.", a)}
		}
		metric = a
	}
	if len(runs) < 2 {
		return chat.Reply{Text: "对比 takes two or more run ids, e.g. 对比 12 13."}
	}
	if len(runs) > maxCompare {
		return chat.Reply{Text: fmt.Sprintf("对比 compares at most %d runs at once.", maxCompare)}
	}
	ch := r.charts()
	if ch == nil {
		return chat.Reply{Text: "Comparisons are not available: the history cannot give series."}
	}
	if kind == render.KindMemory && metric != "" {
		return chat.Reply{Text: fmt.Sprintf("对比 draws either a metric or memory; %q and 显存 together are one too many.", metric)}
	}
	o := render.LossOptions{Metric: metric, XTime: xTime, XStep: xStep}
	var imgs []chat.Image
	var text string
	var err error
	switch {
	case kind == render.KindMemory:
		var img chat.Image
		img, text, err = ch.CompareMemory(ctx, runs, o)
		imgs = append(imgs, img)
	case metric != "":
		var img chat.Image
		img, text, err = ch.Compare(ctx, runs, o)
		imgs = append(imgs, img)
	default: // the loss overlay and the memory overlay
		imgs, text, err = ch.CompareAll(ctx, runs, o)
	}
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	reply := chat.Reply{Text: text}
	for _, img := range imgs {
		if img.PNG != nil {
			reply.Images = append(reply.Images, img)
		}
	}
	return reply
}

// fit answers 适配 [job] [param]: the largest value of the job's batch
// parameter (or param) that the peak memory of its past runs says fits.
func (r *Router) fit(ctx context.Context, args []string) chat.Reply {
	if len(args) > 2 {
		return chat.Reply{Text: "适配 takes a job and a parameter, e.g. 适配 mnist batch_size."}
	}
	jobs := r.Trainer.Jobs()
	var job *trainer.Job
	param := ""
	for _, a := range args {
		if j := findJob(jobs, a); j != nil && job == nil {
			job = j
			continue
		}
		if param != "" {
			return chat.Reply{Text: fmt.Sprintf("适配 takes a job and a parameter; %q is neither a job nor the only parameter.", a)}
		}
		param = a
	}
	if job == nil {
		if len(jobs) != 1 {
			names := make([]string, len(jobs))
			for i, j := range jobs {
				names[i] = j.Name
			}
			return chat.Reply{Text: "Which job? 适配 JOB [param], with one of: " + strings.Join(names, ", ")}
		}
		job = jobs[0]
	}
	if spec, ok := job.Params[param]; param != "" && (!ok || (spec.Type != trainer.ParamInt && spec.Type != trainer.ParamFloat)) {
		return chat.Reply{Text: fmt.Sprintf("%s has no numeric parameter %q.", job.Name, param)}
	}
	var data render.FitData
	if ch := r.charts(); ch != nil {
		data, _ = ch.Data.(render.FitData)
	}
	if data == nil {
		return chat.Reply{Text: "适配 is not available: the history cannot give the job's runs."}
	}
	f, source, err := render.MemoryFit(ctx, data, render.FitOptions{Job: job, Name: job.Name, Param: param, HostAvailable: r.HostAvailable})
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	return chat.Reply{Text: render.FitText(f, source)}
}

// findJob returns the job named name, nil if none.
func findJob(jobs []*trainer.Job, name string) *trainer.Job {
	for _, j := range jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/plots"
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
	Runs(ctx context.Context, f history.RunFilter) ([]*trainer.Run, error)
	LastValues(ctx context.Context, runID int64) (map[string]float64, error)
	MetricNames(ctx context.Context, runID int64) ([]string, error)
	Series(ctx context.Context, runID int64, name string) ([]history.Point, error)
	Flush(ctx context.Context) error
	Audit(ctx context.Context, e history.AuditEntry) (int64, error)
	AuditRun(ctx context.Context, id, runID int64) error
	AuditLog(ctx context.Context, f history.AuditFilter) ([]history.AuditEntry, error)
	SetSubscribed(ctx context.Context, transport string, chat int64, on bool) error
	SetNote(ctx context.Context, id int64, note string) error
}

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
	// CLI are the flags the trainbot commands the bot suggests need to
	// read its history (render.Charts.CLI).
	CLI string
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

	// Knobs answers 存档 and 调参; nil: the Trainer, when it has them.
	Knobs Knobs
	// CheckpointWait is how long 存档 waits for the new checkpoint file;
	// 0: DefaultCheckpointWait.
	CheckpointWait time.Duration
	// Later posts the answers that come after the reply (存档's new file);
	// nil: the reply waits for them.
	Later *Later

	// Location is the time zone dates are shown in; nil: the process's
	// (TZ).
	Location *time.Location
	// GPUs answers 显卡 with a fresh sample (gpu.Monitor); nil: the
	// command says there is no GPU telemetry.
	GPUs GPUs
	// HostGPUs answers 显卡 for the [[hosts]] (gpu/remote); nil without
	// any.
	HostGPUs HostGPUs
	// SlurmMaxRSS reads a Slurm job's MaxRSS for 显卡's note on each active
	// Slurm run; nil: slurm.MaxRSS (sstat).
	SlurmMaxRSS func(ctx context.Context, slurmJobID string) (int64, error)
	// GPUFree keeps 通知空闲's requests; nil when this trainbot has no
	// GPUs (the command says it sees none). A nil *gpufree.Watcher must
	// be left nil here, not stored in the interface.
	GPUFree GPUFree
	// HostAvailable returns the host's available memory, the limit of 适配
	// for a job that runs on the CPU; nil: unknown.
	HostAvailable func() int64
	// PageURL, when set, gives a run's web page address: chart replies get
	// a [网页 Open] button (render.PageButtons).
	PageURL func(runID int64) string
	// Languages is the language of each transport's chats; the zero value
	// speaks zh+en everywhere. A reload does not change it (as with the
	// notifier's, it takes a restart).
	Languages i18n.Languages
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

// Lang is the language the router answers a message in: its transport's.
func (r *Router) Lang(m chat.Message) i18n.Lang { return r.Languages.For(m.Transport) }

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
	l := r.Lang(m)
	role := r.cur().Access.Role(m)
	entry := history.AuditEntry{Transport: m.Transport, Chat: m.Chat, User: m.User.ID, UserName: auditName(m.User), Text: text}
	if p.Cmd != nil {
		entry.Command = p.Cmd.Name
		if strings.HasPrefix(p.Cmd.Args, "[run]") {
			entry.Run, _, _ = runArg(l, p.Args) // the run it names; a start's is known once started
		}
	}
	refuse := func(reason, reply string) chat.Reply {
		entry.Reason = reason
		r.auditLater(ctx, entry)
		return chat.Reply{Text: reply}
	}
	switch {
	case m.Channel:
		// Nobody in particular sent it: nobody to allow, nobody to tell.
		refuse(ReasonChannel, "")
		return chat.Reply{}
	case m.Edited:
		// The command was read when the message was first sent; an edit
		// must not carry it out again (a second run). Members who meant
		// the edit are told to send it anew; strangers are not told.
		reply := refuse(ReasonEdited, l.T(i18n.EditedNotRun, render.Clip(text, 60)))
		if role == RoleNone || p.Cmd == nil {
			return chat.Reply{}
		}
		return reply
	case role == RoleNone:
		// A refusal, which delivery sends by its refusal rule (seldom,
		// never ahead of members' answers).
		reply := refuse(ReasonStranger, l.T(i18n.NotAllowed, m.User.Who(), authKey(m, "operators"), authKey(m, "viewers")))
		reply.Kind = chat.KindRefusal
		return reply
	case p.Cmd == nil:
		if near, ok := chat.Nearest(p.Word); ok {
			return refuse(ReasonUnknown, l.T(i18n.UnknownWordNear, render.Clip(p.Word, 40), commandWord(l, near))+readAs(l, p))
		}
		return refuse(ReasonUnknown, l.T(i18n.UnknownWord, render.Clip(p.Word, 40))+readAs(l, p))
	case p.Cmd.Operator && role < RoleOperator:
		return refuse(ReasonViewer, l.T(i18n.ViewerRefused, l.T(p.Cmd.Help), m.User.Who(), authKey(m, "operators")))
	}
	entry.Allowed = true
	if !p.Cmd.Operator {
		// A look changes nothing: it is recorded once answered, with the
		// run it showed, and its answer never waits for the database's
		// write connection (busy with a long batch of points under many
		// live runs).
		entry.T = time.Now()
		reply := r.dispatch(ctx, m, p, l)
		if reply.Empty() {
			reply.Text = l.T(i18n.OK)
		}
		if reply.RunID != 0 {
			entry.Run = reply.RunID
		}
		r.auditLater(ctx, entry)
		return reply
	}
	// Recorded before it is carried out, so a command that never returns
	// is in the audit too; the run it touched is added after.
	id := r.audit(ctx, entry)
	reply := r.dispatch(ctx, m, p, l)
	if reply.Empty() {
		reply.Text = l.T(i18n.OK)
	}
	if id != 0 && reply.RunID != 0 && reply.RunID != entry.Run {
		if err := r.History.AuditRun(context.WithoutCancel(ctx), id, reply.RunID); err != nil {
			r.log().Warn("audit", "err", err)
		}
	}
	return reply
}

// Why a message was not carried out, as the audit records it (its reason
// column, trainbot audit's "reason").
const (
	ReasonStranger = "not an allowed user"
	ReasonUnknown  = "unknown command"
	ReasonViewer   = "viewer"
	ReasonEdited   = "edited message"
	ReasonChannel  = "channel post"
)

// readAs is the line a refusal ends with when what was read (p.Text,
// Normalize) is not what was typed: "(read as: 开始 demo steps=200)", so
// the user sees what trainbot understood. "" when they are the same.
func readAs(l i18n.Lang, p chat.Parsed) string {
	if p.Text == p.Typed {
		return ""
	}
	return "\n" + l.T(i18n.ReadAs, p.Text)
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

// laterAuditor is a History that can record an audit entry without the
// caller waiting for the write (the store: store.AuditLater).
type laterAuditor interface {
	AuditLater(e history.AuditEntry)
}

// auditLater records an entry nobody needs the id of, without waiting
// where the History can.
func (r *Router) auditLater(ctx context.Context, e history.AuditEntry) {
	if h, ok := r.History.(laterAuditor); ok {
		h.AuditLater(e)
		return
	}
	r.audit(ctx, e)
}

// audit records an entry and returns its id (0 when it could not).
func (r *Router) audit(ctx context.Context, e history.AuditEntry) int64 {
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
func (r *Router) auditLog(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	n, bad := countArg(l, args, 20, 50, l.T(i18n.AuditUsage))
	if bad != nil {
		return *bad
	}
	entries, err := r.History.AuditLog(ctx, history.AuditFilter{Limit: n})
	if err != nil {
		r.log().Error("read the audit", "err", err)
		return chat.Reply{Text: l.T(i18n.AuditFailed, err.Error())}
	}
	return chat.Reply{Text: render.AuditText(l, entries)}
}

func (r *Router) dispatch(ctx context.Context, m chat.Message, p chat.Parsed, l i18n.Lang) chat.Reply {
	switch p.Cmd.Name {
	case "help":
		return chat.Reply{Text: HelpText(l)}
	case "train":
		return r.train(ctx, m, l, p)
	case "stop":
		return r.stop(ctx, m, l, p.Args)
	case "status":
		return r.status(ctx, l, p.Args)
	case "plot":
		return r.plot(ctx, l, p.Args)
	case "log":
		return r.logTail(ctx, l, p.Args)
	case "runs":
		return r.runs(ctx, l, p.Args)
	case "jobs":
		return chat.Reply{Text: render.JobsText(l, r.Trainer.Jobs())}
	case "subscribe", "mute":
		on := p.Cmd.Name == "subscribe"
		if err := r.History.SetSubscribed(ctx, m.Transport, m.Chat, on); err != nil {
			r.log().Error("subscribe", "err", err)
			return chat.Reply{Text: l.T(i18n.SaveFailed, err.Error())}
		}
		if on {
			return chat.Reply{Text: l.T(i18n.Subscribed)}
		}
		return chat.Reply{Text: l.T(i18n.Muted)}
	case "gpu":
		return r.gpu(ctx, l)
	case "notifyfree":
		return r.notifyFree(ctx, m, l, p)
	case "compare":
		return r.compare(ctx, l, p.Args)
	case "audit":
		return r.auditLog(ctx, l, p.Args)
	case "note":
		return r.note(ctx, l, p)
	case "watch":
		return r.watch(ctx, m, l, p)
	case "queue":
		if len(p.Args) == 0 && p.Word != "排队" {
			return r.queueList(ctx, l)
		}
		if r.cur().Access.Role(m) < RoleOperator {
			return chat.Reply{Text: l.T(i18n.ViewerQueue, m.User.ID)}
		}
		return r.enqueue(ctx, m, l, p)
	case "queued":
		return r.queueList(ctx, l)
	case "cancel":
		return r.cancelQueued(ctx, m, l, p.Args)
	case "fit":
		return r.fit(ctx, l, p.Args)
	case "checkpoint":
		return r.checkpoint(ctx, m, l, p)
	case "set":
		return r.set(ctx, m, l, p)
	}
	return chat.Reply{Text: HelpText(l)}
}

// HelpText is the command table in l: both command words in zh+en and zh
// (either may be typed), the English one in en.
func HelpText(l i18n.Lang) string {
	var b strings.Builder
	b.WriteString(l.T(i18n.HelpTitle) + "\n")
	for _, c := range chat.Commands {
		usage := c.Chinese
		if l == i18n.En {
			usage = "/" + c.Name
		}
		switch {
		case l == i18n.Zh && c.ArgsZH != "":
			usage += " " + c.ArgsZH
		case c.Args != "":
			usage += " " + c.Args
		}
		switch l {
		case i18n.En:
			fmt.Fprintf(&b, "%s — %s\n", usage, l.T(c.Help))
		case i18n.Zh:
			fmt.Fprintf(&b, "%s（/%s）— %s\n", usage, c.Name, l.T(c.Help))
		default:
			fmt.Fprintf(&b, "%s  /%s — %s\n", usage, c.Name, l.T(c.Help))
		}
	}
	b.WriteString(l.T(i18n.HelpExample))
	return b.String()
}

// noteWords start a run's note in 开始's arguments: the rest of the line
// is the note ("开始 mlp bs=32 备注 checkpointing on", "备注:…", "note: …",
// "-- …").
var noteWords = []string{"备注", "备注:", "备注：", "note", "note:", "--"}

// splitNote separates a note from 开始's arguments (as read, args) and
// takes the note from the words as typed (raw, one for each of args): a
// note is free text, and its Chinese punctuation (，：（）) stays as
// written instead of becoming ASCII.
func splitNote(args, raw []string) (rest []string, note string) {
	if len(raw) != len(args) {
		raw = args
	}
	for i, a := range args {
		low := strings.ToLower(a)
		if slices.Contains(noteWords, low) {
			return args[:i], cleanNote(strings.Join(raw[i+1:], " "))
		}
		for _, w := range []string{"备注:", "备注：", "note:"} {
			if strings.HasPrefix(low, w) {
				// The word as typed may have had "：" or "︰": cut at its
				// first colon of any width.
				typed := raw[i]
				cut := strings.IndexFunc(typed, func(c rune) bool { return chat.Normalize(string(c)) == ":" })
				return args[:i], cleanNote(typed[cut+len(string([]rune(typed[cut:])[0])):] + " " + strings.Join(raw[i+1:], " "))
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

// note answers 备注 N text. The text is kept as typed (p.Raw).
func (r *Router) note(ctx context.Context, l i18n.Lang, p chat.Parsed) chat.Reply {
	args := p.Args
	if len(args) < 1 {
		return chat.Reply{Text: l.T(i18n.NoteUsage)}
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return chat.Reply{Text: l.T(i18n.NoteBadRun, args[0])}
	}
	raw := p.Raw
	if len(raw) != len(args) {
		raw = args
	}
	text := cleanNote(strings.Join(raw[1:], " "))
	if err := r.History.SetNote(ctx, id, text); errors.Is(err, history.ErrNotFound) {
		return chat.Reply{Text: l.T(i18n.NoSuchRun, id)}
	} else if err != nil {
		return chat.Reply{Text: l.T(i18n.NoteFailed, err.Error())}
	}
	if text == "" {
		return chat.Reply{Text: l.T(i18n.NoteRemoved, id), RunID: id}
	}
	return chat.Reply{Text: l.T(i18n.NoteSet, id, text), RunID: id}
}

// maxButtonData is the most bytes a button's data may have (Telegram's
// callback_data limit).
const maxButtonData = 64

// startArgs reads 开始's (and 排队's) arguments: [job] [k=v…] [备注 text].
// problems are what is wrong when they cannot be read (joined in the
// refusal).
func (r *Router) startArgs(l i18n.Lang, p chat.Parsed) (jobName string, params map[string]string, note string, problems []string) {
	args, note := splitNote(p.Args, p.Raw)
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
			twice = append(twice, l.T(i18n.ParamTwice, k, prev, v))
			continue
		}
		params[k] = v
	}
	if len(bad) == 0 && len(twice) == 0 {
		return jobName, params, note, nil
	}
	// Say first what is wrong with the values read ("1;rm" of
	// batch_size=1;rm -rf /), then what could not be read at all.
	if job := r.job(jobName); job != nil {
		if _, err := job.ResolveParams(params); err != nil {
			for _, e := range unwrapJoined(err) {
				if pe := (*trainer.ParamError)(nil); errors.As(e, &pe) && pe.Given {
					problems = append(problems, render.ParamErrorText(l, pe))
				}
			}
		}
	}
	problems = append(problems, twice...)
	if len(bad) > 0 {
		problems = append(problems, l.T(i18n.ParamUnread, strings.Join(bad, " ")))
	}
	return "", nil, "", problems
}

// paramErrors words the parameter errors joined in err, in l.
func paramErrors(l i18n.Lang, err error) string {
	var parts []string
	for _, e := range unwrapJoined(err) {
		if pe := (*trainer.ParamError)(nil); errors.As(e, &pe) {
			parts = append(parts, render.ParamErrorText(l, pe))
		} else {
			parts = append(parts, e.Error())
		}
	}
	return strings.Join(parts, l.T(i18n.ParamSep))
}

func (r *Router) train(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	rawArgs := p.Args
	jobName, params, note, problems := r.startArgs(l, p)
	if len(problems) > 0 {
		return chat.Reply{Text: l.T(i18n.NotStarted, strings.Join(problems, l.T(i18n.ParamSep))) + readAs(l, p)}
	}
	run, err := r.Trainer.Start(ctx, trainer.StartRequest{Job: jobName, Params: params, By: who(m), Origin: m.ChatKey().String(), Note: note})
	var busy *trainer.BusyError
	var startErr *trainer.StartError
	switch {
	case errors.As(err, &busy):
		queue := "排队 " + strings.Join(rawArgs, " ")
		hint := l.T(i18n.BusyHint, strings.TrimSpace(queue))
		var buttons [][]chat.Button
		if data := "/queue " + strings.Join(rawArgs, " "); len(data) <= maxButtonData {
			buttons = [][]chat.Button{{{Label: l.Button(i18n.BtnQueue), Data: strings.TrimSpace(data)}}}
		}
		if busy.GPUs != nil {
			text := render.GPURefusal(l, busy.GPUs, r.gpuRuns())
			if text == "" {
				text = l.T(i18n.BusyOther, busy.GPUs.Error())
			}
			return chat.Reply{Text: text + l.T(i18n.GPUQueueHint, strings.TrimSpace(queue)), Buttons: buttons}
		}
		if busy.Active != nil && busy.Active.Unsupervised != nil {
			u, run := busy.Active.Unsupervised, busy.Active.Run
			return chat.Reply{Text: l.T(i18n.BusyOrphan, run.ID, run.Job, u.SupervisorPID, u.Processes, u.PGID, run.ID),
				Buttons: [][]chat.Button{{{Label: l.Button(i18n.BtnStop), Data: fmt.Sprintf("/stop %d", run.ID)}}}, RunID: run.ID}
		}
		if busy.Active != nil {
			return chat.Reply{
				Text:    l.T(i18n.BusyRun, busy.Active.Run.ID, busy.Active.Run.Job, render.StatusBrief(l, *busy.Active)) + hint,
				Buttons: append(buttons, render.StartButtons(l)...), RunID: busy.Active.Run.ID,
			}
		}
		return chat.Reply{Text: l.T(i18n.BusyOther, busy.Other) + hint, Buttons: buttons}
	case errors.As(err, &startErr):
		return chat.Reply{Text: l.T(i18n.CouldNotRun, startErr.Run.ID, render.StartFailure(l, startErr)), RunID: startErr.Run.ID}
	case errors.Is(err, trainer.ErrBadParam):
		return chat.Reply{Text: l.T(i18n.NotStartedP, paramErrors(l, err)) + readAs(l, p)}
	case errors.Is(err, trainer.ErrUnknownJob), errors.Is(err, trainer.ErrNoHost):
		return chat.Reply{Text: l.T(i18n.NotStartedE, err.Error()) + readAs(l, p)}
	case errors.Is(err, trainer.ErrClosed):
		return chat.Reply{Text: l.T(i18n.ShuttingDown)}
	case errors.Is(err, trainer.ErrNoGPUs):
		if text := render.GPURefusal(l, err, nil); text != "" {
			return chat.Reply{Text: text}
		}
		return chat.Reply{Text: l.T(i18n.GPUNone, err.Error())}
	case err != nil:
		r.log().Error("start run", "err", err)
		return chat.Reply{Text: l.T(i18n.NotStartedRaw, err.Error())}
	}
	text := l.T(i18n.RunStarted, run.ID, run.Job)
	if len(run.Params) > 0 {
		text += " " + render.ParamsText(run.Params)
	}
	if run.Note != "" {
		text += "\n📝 " + run.Note
	}
	if len(run.GPUs) > 0 {
		text += l.T(i18n.GPULine, render.GPUsText(run.GPUs))
	}
	if run.SlurmJobID != "" {
		text += l.T(i18n.SlurmLine, run.SlurmJobID, run.LogPath)
	} else if run.Host != "" {
		text += l.T(i18n.HostPIDLine, run.Host, run.PID, filepath.Join(run.RemoteDir, "output.log"), run.LogPath)
	} else {
		text += l.T(i18n.PIDLine, run.PID, run.LogPath)
	}
	return chat.Reply{Text: text, Buttons: render.StartButtons(l), RunID: run.ID}
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
// gpuRuns are this trainbot's active runs, by id, for a GPU text.
func (r *Router) gpuRuns() map[int64]render.GPURun {
	out := map[int64]render.GPURun{}
	for _, st := range r.Trainer.Active() {
		out[st.Run.ID] = render.GPURun{Job: st.Run.Job, By: st.Run.StartedBy}
	}
	return out
}

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
func runArg(l i18n.Lang, args []string) (int64, []string, error) {
	if len(args) == 0 {
		return 0, args, nil
	}
	s := strings.TrimPrefix(args[0], "#")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, args, nil
	}
	if id <= 0 {
		return 0, args, errors.New(l.T(i18n.NotRunID, args[0]))
	}
	return id, args[1:], nil
}

func (r *Router) stop(ctx context.Context, m chat.Message, l i18n.Lang, args []string) chat.Reply {
	if len(args) > 0 && (args[0] == "cancel" || args[len(args)-1] == "cancel") {
		return chat.Reply{Text: l.T(i18n.KeepsGoing)}
	}
	confirmed := len(args) > 0 && args[len(args)-1] == "confirm"
	if confirmed {
		args = args[:len(args)-1]
	}
	kill := len(args) > 0 && (args[len(args)-1] == "kill" || args[len(args)-1] == "杀")
	if kill {
		args = args[:len(args)-1]
	}
	id, _, err := runArg(l, args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	st, err := r.Trainer.Status(id)
	if err != nil {
		if id != 0 {
			if run, herr := r.History.Run(ctx, id); herr == nil {
				return chat.Reply{Text: l.T(i18n.AlreadyEnded, id, render.OutcomeWord(l, run.Outcome)), RunID: id}
			}
			return chat.Reply{Text: l.T(i18n.NoSuchRun, id)}
		}
		if errors.Is(err, trainer.ErrAmbiguous) {
			return chat.Reply{Text: l.T(i18n.Ambiguous, r.activeIDs())}
		}
		return chat.Reply{Text: l.T(i18n.NothingToStop)}
	}
	if st.Run.Runner == trainer.RunnerWatch {
		return r.stopWatched(m, l, st, kill, confirmed)
	}
	if r.ConfirmStop[m.Transport] && !confirmed {
		return chat.Reply{
			Text:  l.T(i18n.ConfirmStop, st.Run.ID, st.Run.Job, render.StatusBrief(l, st)),
			RunID: st.Run.ID,
			Buttons: [][]chat.Button{{
				{Label: l.Button(i18n.BtnYes), Data: fmt.Sprintf("/stop %d confirm", st.Run.ID)},
				{Label: l.Button(i18n.BtnNo), Data: "/stop cancel"},
			}},
		}
	}
	run, err := r.Trainer.Stop(st.Run.ID, who(m))
	if err != nil {
		return chat.Reply{Text: l.T(i18n.EndedBefore, st.Run.ID)}
	}
	sig := syscall.SIGINT
	if j := r.job(run.Job); j != nil && j.Signals.Stop != 0 {
		sig = j.Signals.Stop
	}
	return chat.Reply{Text: l.T(i18n.Stopping, run.ID, run.Job, trainer.SignalName(int(sig))), RunID: run.ID}
}

func (r *Router) activeIDs() string {
	var ids []string
	for _, st := range r.Trainer.Active() {
		ids = append(ids, fmt.Sprintf("#%d (%s)", st.Run.ID, st.Run.Job))
	}
	return strings.Join(ids, ", ")
}

func (r *Router) status(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	id, _, err := runArg(l, args)
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	if id == 0 {
		active := r.Trainer.Active()
		if len(active) > 0 {
			var parts []string
			for _, st := range active {
				parts = append(parts, render.StatusText(l, st))
			}
			return chat.Reply{Text: strings.Join(parts, "\n\n"), RunID: active[0].Run.ID}
		}
	} else if st, err := r.Trainer.Status(id); err == nil {
		return chat.Reply{Text: render.StatusText(l, st), RunID: id}
	}
	var run *trainer.Run
	if id != 0 {
		run, err = r.History.Run(ctx, id)
	} else {
		run, err = r.History.LatestRun(ctx, "")
	}
	switch {
	case errors.Is(err, history.ErrNotFound) && id != 0:
		return chat.Reply{Text: l.T(i18n.NoSuchRun, id)}
	case errors.Is(err, history.ErrNotFound):
		return chat.Reply{Text: l.T(i18n.NoRunYet)}
	case err != nil:
		return chat.Reply{Text: l.T(i18n.HistoryFailed, err.Error())}
	}
	last, _ := r.History.LastValues(ctx, run.ID)
	prefix := ""
	if id == 0 {
		prefix = l.T(i18n.LastOne)
	}
	return chat.Reply{Text: prefix + render.EndedText(l, run, last), RunID: run.ID}
}

// pickRun chooses the run a command is about: the given id, else the
// active run, else the newest.
func (r *Router) pickRun(ctx context.Context, l i18n.Lang, id int64) (*trainer.Run, string) {
	if id != 0 {
		if st, err := r.Trainer.Status(id); err == nil {
			return st.Run, ""
		}
		run, err := r.History.Run(ctx, id)
		if err != nil {
			return nil, l.T(i18n.NoSuchRun, id)
		}
		return run, ""
	}
	if active := r.Trainer.Active(); len(active) > 0 {
		return active[0].Run, ""
	}
	run, err := r.History.LatestRun(ctx, "")
	if err != nil {
		return nil, l.T(i18n.NothingToDraw)
	}
	return run, ""
}

// charts returns the chart maker speaking l, or nil when the history
// cannot give series and samples.
func (r *Router) charts(l i18n.Lang) *render.Charts {
	data := r.Charts
	if data == nil {
		data, _ = r.History.(render.ChartData)
	}
	if data == nil {
		return nil
	}
	return &render.Charts{Data: data, Painter: r.Plots, Smoothing: r.Smoothing, Lang: l, CLI: r.CLI}
}

// commandWord is how l names a command to send: 状态 in Chinese, /status
// in English, 状态 (/status) in zh+en.
func commandWord(l i18n.Lang, c *chat.Command) string {
	switch l {
	case i18n.Zh:
		return c.Chinese
	case i18n.En:
		return "/" + c.Name
	}
	return c.Chinese + " (/" + c.Name + ")"
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
func (r *Router) plot(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	id, rest, err := runArg(l, args)
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
			return chat.Reply{Text: l.T(i18n.PlotTooMany, a)}
		}
	}
	run, msg := r.pickRun(ctx, l, id)
	if run == nil {
		return chat.Reply{Text: msg}
	}
	ch := r.charts(l)
	if ch == nil {
		return chat.Reply{Text: l.T(i18n.NoCharts), RunID: run.ID}
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
	return chat.Reply{Text: strings.Join(notes, "\n"), Images: imgs, RunID: run.ID, Buttons: render.PageButtons(l, r.PageURL, run.ID)}
}

func (r *Router) logTail(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	n, bad := countArg(l, args, 20, 200, l.T(i18n.LogUsage))
	if bad != nil {
		return *bad
	}
	if active := r.Trainer.Active(); len(active) > 0 {
		id := active[0].Run.ID
		lines, err := r.Trainer.Tail(id, n)
		if err == nil {
			return chat.Reply{Text: logText(l, id, lines), RunID: id}
		}
	}
	run, err := r.History.LatestRun(ctx, "")
	if err != nil {
		return chat.Reply{Text: l.T(i18n.NoOutput)}
	}
	lines, err := TailFile(run.LogPath, n)
	if err != nil {
		return chat.Reply{Text: l.T(i18n.LogFailed, run.ID, err)}
	}
	return chat.Reply{Text: logText(l, run.ID, lines), RunID: run.ID}
}

// countArg reads the optional count of 日志, 历史 and 审计: def without one,
// at most most; anything but a positive number is answered with usage.
func countArg(l i18n.Lang, args []string, def, most int, usage string) (int, *chat.Reply) {
	if len(args) == 0 {
		return def, nil
	}
	v, err := strconv.Atoi(args[0])
	if err != nil || v < 1 {
		return 0, &chat.Reply{Text: l.T(i18n.NotOne, usage, args[0])}
	}
	return min(v, most), nil
}

func logText(l i18n.Lang, id int64, lines []string) string {
	if len(lines) == 0 {
		return l.T(i18n.PrintedNothing, id)
	}
	return l.T(i18n.LastLines, len(lines), id, strings.Join(lines, "\n"))
}

func (r *Router) runs(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	n, bad := countArg(l, args, 10, 50, l.T(i18n.RunsUsage))
	if bad != nil {
		return *bad
	}
	runs, err := r.History.Runs(ctx, history.RunFilter{Limit: n})
	if err != nil {
		return chat.Reply{Text: l.T(i18n.HistoryFailed, err.Error())}
	}
	if len(runs) == 0 {
		return chat.Reply{Text: l.T(i18n.NoRunYet)}
	}
	var b strings.Builder
	b.WriteString(l.T(i18n.RecentRuns))
	for _, run := range runs {
		last, _ := r.History.LastValues(ctx, run.ID)
		b.WriteString(render.RunLine(l, run, last, r.now()) + "\n")
	}
	return chat.Reply{Text: strings.TrimRight(b.String(), "\n")}
}

// maxCompare is the most runs 对比 overlays (one colour each).
const maxCompare = 8

// compare answers 对比 A B [C D…] [metric] [time]: the runs' curves
// overlaid and a table with ratios against the first run.
func (r *Router) compare(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	var runs []*trainer.Run
	metric, kind := "", ""
	xTime, xStep := false, false
	for _, a := range args {
		if id, err := strconv.ParseInt(strings.TrimPrefix(a, "#"), 10, 64); err == nil {
			if id <= 0 {
				return chat.Reply{Text: l.T(i18n.NotRunIDDot, a)}
			}
			run, err := r.History.Run(ctx, id)
			if err != nil {
				return chat.Reply{Text: l.T(i18n.NoSuchRun, id)}
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
			return chat.Reply{Text: l.T(i18n.CompareTooMany, a)}
		}
		metric = a
	}
	if len(runs) < 2 {
		return chat.Reply{Text: l.T(i18n.CompareTwo)}
	}
	if len(runs) > maxCompare {
		return chat.Reply{Text: l.T(i18n.CompareMost, maxCompare)}
	}
	ch := r.charts(l)
	if ch == nil {
		return chat.Reply{Text: l.T(i18n.NoCompare)}
	}
	if kind == render.KindMemory && metric != "" {
		return chat.Reply{Text: l.T(i18n.CompareEither, metric)}
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
func (r *Router) fit(ctx context.Context, l i18n.Lang, args []string) chat.Reply {
	if len(args) > 2 {
		return chat.Reply{Text: l.T(i18n.FitArgs)}
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
			return chat.Reply{Text: l.T(i18n.FitNeither, a)}
		}
		param = a
	}
	if job == nil {
		if len(jobs) != 1 {
			names := make([]string, len(jobs))
			for i, j := range jobs {
				names[i] = j.Name
			}
			return chat.Reply{Text: l.T(i18n.FitWhichJob, strings.Join(names, ", "))}
		}
		job = jobs[0]
	}
	if spec, ok := job.Params[param]; param != "" && (!ok || (spec.Type != trainer.ParamInt && spec.Type != trainer.ParamFloat)) {
		return chat.Reply{Text: l.T(i18n.FitNoParam, job.Name, param)}
	}
	var data render.FitData
	if ch := r.charts(l); ch != nil {
		data, _ = ch.Data.(render.FitData)
	}
	if data == nil {
		return chat.Reply{Text: l.T(i18n.NoFit)}
	}
	f, source, err := render.MemoryFit(ctx, data, render.FitOptions{Job: job, Name: job.Name, Param: param, HostAvailable: r.HostAvailable})
	if err != nil {
		return chat.Reply{Text: err.Error()}
	}
	return chat.Reply{Text: render.FitText(l, f, source)}
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

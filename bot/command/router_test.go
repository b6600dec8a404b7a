package command_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

const (
	operator = 100
	viewer   = 200
	stranger = 300
)

// env is a router over a real supervisor and store, with a job that prints
// a metric every 50 ms for a few seconds.
type env struct {
	t   *testing.T
	dir string // the store's
	st  *store.Store
	sup *trainer.Supervisor
	r   *command.Router
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvJob(t, "train")
}

// newEnvJob is newEnv with the job named name.
func newEnvJob(t *testing.T, name string) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{FlushEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	min1 := 1.0
	j := &trainer.Job{
		Name: name,
		Command: []string{"/bin/sh", "-c", `trap 'echo bye; exit 130' INT; i=0; while [ $i -lt $0 ]; do i=$((i+1)); echo "Epoch [1/1], Step [$i/$0], Loss: 0.$((1000-i))"; sleep 0.05; done`,
			"{steps}"},
		Params:    map[string]trainer.ParamSpec{"steps": {Type: trainer.ParamInt, Default: "100", HasDefault: true, Min: &min1}},
		StopGrace: time.Second, KillGrace: time.Second,
	}
	sup, err := trainer.New(context.Background(), trainer.Options{Jobs: []*trainer.Job{j}, Recorder: st, DataDir: dir, Queue: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sup.Close(ctx)
		st.Close()
	})
	r := &command.Router{Trainer: sup, History: st, Access: command.Access{Operators: []int64{operator}, Viewers: []int64{viewer}},
		ConfirmStop: map[string]bool{"telegram": true}}
	return &env{t: t, dir: dir, st: st, sup: sup, r: r}
}

func (e *env) say(user int64, text string) chat.Reply {
	e.t.Helper()
	return e.r.Handle(context.Background(), chat.Message{Transport: "telegram", Chat: user, User: chat.User{ID: user, Name: "u"}, Text: text})
}

func mustContain(t *testing.T, r chat.Reply, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.Text, s) {
			t.Errorf("reply %q lacks %q", r.Text, s)
		}
	}
}

func (e *env) runs() []*trainer.Run {
	runs, err := e.st.Runs(context.Background(), history.RunFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

func TestStrangerIsRefusedAndAudited(t *testing.T) {
	e := newEnv(t)
	r := e.say(stranger, "开始")
	mustContain(t, r, "not allowed", "300")
	if len(e.runs()) != 0 {
		t.Fatal("a stranger started a run")
	}
	log, _ := e.st.AuditLog(context.Background(), history.AuditFilter{Limit: 10})
	if len(log) != 1 || log[0].Allowed || log[0].User != stranger || log[0].Command != "train" {
		t.Fatalf("audit %+v", log)
	}
	// Even help is refused: a stranger learns nothing but their id.
	mustContain(t, e.say(stranger, "帮助"), "not allowed")
	// Delivery decides how often a refusal goes out: the router marks it.
	if r.Kind != chat.KindRefusal {
		t.Errorf("a stranger's refusal is of kind %v, want KindRefusal", r.Kind)
	}
	if r := e.say(viewer, "开始"); r.Kind == chat.KindRefusal {
		t.Error("a viewer's answer is a member's answer, not a stranger's refusal")
	}
}

// TestEditsAndChannelPostsAreAuditedNotCarriedOut: an edited command is
// recorded and not carried out (no second run); a member is told to send
// it anew, a stranger is told nothing. A channel post has nobody to tell.
func TestEditsAndChannelPostsAreAuditedNotCarriedOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	edit := func(user int64, text string) chat.Reply {
		return e.r.Handle(ctx, chat.Message{Transport: "telegram", Chat: user, User: chat.User{ID: user, Name: "u"}, Text: text, Edited: true})
	}
	r := edit(operator, "开始 steps=5")
	mustContain(t, r, "edited message is not carried out", `"开始 steps=5"`)
	if len(e.runs()) != 0 {
		t.Fatal("an edited 开始 started a run")
	}
	if r := edit(operator, "hello there"); !r.Empty() {
		t.Errorf("an edit that is no command was answered: %q", r.Text)
	}
	if r := edit(stranger, "开始"); !r.Empty() {
		t.Errorf("a stranger's edit was answered: %q", r.Text)
	}
	post := e.r.Handle(ctx, chat.Message{Transport: "telegram", Chat: -1001, User: chat.User{Name: "news"}, Text: "/train", Channel: true})
	if !post.Empty() {
		t.Errorf("a channel post was answered: %q", post.Text)
	}
	log, err := e.st.AuditLog(ctx, history.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range log {
		if a.Allowed {
			t.Errorf("audit %+v: carried out", a)
		}
		got = append([]string{fmt.Sprintf("%d %s %s: %s", a.User, a.UserName, a.Command, a.Reason)}, got...)
	}
	want := []string{"100 u train: edited message", "100 u : edited message", "300 u train: edited message", "0 news train: channel post"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// 审计 reads the audit back to operators: who sent what, allowed or
// refused, and the run it touched (named, or started).
func TestAuditIsReadByOperatorsOnly(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(stranger, "停止 5"), "not allowed")
	r := e.say(operator, "开始 steps=5")
	mustContain(t, r, "run #1 started")
	mustContain(t, e.say(viewer, "/audit"), "Viewers can look but not who sent which command")
	mustContain(t, e.say(operator, "审计 x"), `"x" is not one`)
	got := e.say(operator, "审计")
	mustContain(t, got, "Last 5 command(s), newest first:",
		"telegram chat 300 · u (300) · 停止 5 · refused: not an allowed user · run #5",
		"telegram chat 100 · u (100) · 开始 steps=5 · allowed · run #1",
		"telegram chat 200 · u (200) · /audit · refused: viewer",
		`审计 x · allowed`)
	if lines := strings.Count(e.say(operator, "审计 2").Text, "\n"); lines != 2 {
		t.Errorf("审计 2 answered %d entries, want 2", lines)
	}
	e.sup.Stop(r.RunID, "test")
	e.sup.WaitRun(context.Background(), r.RunID)
}

// A look (状态) is answered while another connection holds the
// database's write lock, as the point writer does in a long batch: its
// audit entry is written once the lock is free, and 审计 shows it.
func TestALookNeverWaitsForTheDatabaseWrite(t *testing.T) {
	e := newEnv(t)
	db, err := sql.Open("sqlite", filepath.Join(e.dir, "trainbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan chat.Reply, 1)
	go func() { answered <- e.say(viewer, "状态") }()
	select {
	case r := <-answered:
		mustContain(t, r, "No run yet")
	case <-time.After(5 * time.Second): // the store's busy timeout is 10 s
		t.Fatal("状态 waited for the database's write lock")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.say(operator, "审计"), "telegram chat 200 · u (200) · 状态 · allowed")
}

func TestViewerLooksButCannotStart(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(viewer, "/train"), "Viewers can look", "200")
	mustContain(t, e.say(viewer, "状态"), "No run yet")
	if len(e.runs()) != 0 {
		t.Fatal("a viewer started a run")
	}
}

func TestHelpStartAndUnknown(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(operator, "帮助"), "开始", "/train", "显卡", "/compare")
	mustContain(t, e.say(operator, "/start"), "trainbot commands")
	if len(e.runs()) != 0 {
		t.Fatal("/start started training")
	}
	mustContain(t, e.say(operator, "hello there"), "帮助")
	long := strings.Repeat("长", 10000)
	mustContain(t, e.say(operator, long), "帮助")
	if r := e.say(operator, "   "); !r.Empty() {
		t.Fatalf("blank message answered %q", r.Text)
	}
}

// awaitStep waits up to 10 s for the active run to reach step n.
func (e *env) awaitStep(n int64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.sup.Status(0)
		if err == nil && st.Progress.Step >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the run did not reach step %d in 10 s: %+v, %v", n, st.Progress, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOperatorSession(t *testing.T) {
	e := newEnv(t)
	r := e.say(operator, "开始 steps=2000")
	mustContain(t, r, "run #1 started", "steps=2000")
	if len(r.Buttons) != 1 || len(r.Buttons[0]) != 3 || r.Buttons[0][0].Data != "停止" {
		t.Fatalf("buttons %+v", r.Buttons)
	}
	mustContain(t, e.say(operator, "开始"), "already running", "run #1")
	if n := len(e.runs()); n != 1 {
		t.Fatalf("got %d runs, want 1", n)
	}
	// Wait for a few metrics.
	e.awaitStep(5)
	mustContain(t, e.say(operator, "状态"), "run #1", "step", "/2000", "loss")
	plot := e.say(operator, "画图")
	if len(plot.Images) != 1 {
		t.Fatalf("画图 gave %q and %d images", plot.Text, len(plot.Images))
	}
	img, err := png.Decode(bytes.NewReader(plot.Images[0].PNG))
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
		t.Errorf("chart is %dx%d, want 1280x800", b.Dx(), b.Dy())
	}
	mustContain(t, e.say(operator, "画图 1 nope"), "no metric \"nope\"", "loss")
	mustContain(t, e.say(operator, "日志 3"), "Last 3 lines of run #1", "Loss")
	mustContain(t, e.say(operator, "日志 x"), "not one")
	// Telegram asks first.
	ask := e.say(operator, "停止")
	mustContain(t, ask, "Stop run #1")
	if len(ask.Buttons) != 1 || ask.Buttons[0][0].Data != "/stop 1 confirm" || ask.Buttons[0][1].Data != "/stop cancel" {
		t.Fatalf("confirm buttons %+v", ask.Buttons)
	}
	mustContain(t, e.say(operator, "/stop cancel"), "keeps going")
	if len(e.sup.Active()) != 1 {
		t.Fatal("cancel stopped the run")
	}
	mustContain(t, e.say(operator, "/stop 1 confirm"), "stopping run #1")
	if _, err := e.sup.WaitRun(context.Background(), 1); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	// A confirmation from an old message.
	mustContain(t, e.say(operator, "/stop 1 confirm"), "already ended")
	mustContain(t, e.say(operator, "停止"), "No run is active")
	mustContain(t, e.say(operator, "状态"), "No run is active", "run #1", "stopped")
	mustContain(t, e.say(operator, "历史"), "#1 train stopped")
	mustContain(t, e.say(operator, "状态 9"), "no run #9")
}

func TestBadParametersStartNothing(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(operator, "开始 steps=abc"), "Not started", "steps", "not an integer")
	mustContain(t, e.say(operator, "开始 steps=0"), "below the minimum 1")
	mustContain(t, e.say(operator, "开始 bs=3"), "unknown parameter", "takes steps")
	mustContain(t, e.say(operator, "开始 nosuchjob"), "unknown job", "train")
	mustContain(t, e.say(operator, "开始 train steps"), "could not read steps", "name=value")
	// What is wrong with a value comes first, then what could not be read.
	got := e.say(operator, "开始 train steps=1;rm -rf /")
	mustContain(t, got, `steps: "1;rm" is not an integer`, "could not read -rf /")
	mustContain(t, e.say(operator, "开始 train steps=99999999999999999999"), `steps: "99999999999999999999" is out of range`)
	mustContain(t, e.say(operator, "开始 train steps=10 steps=20"), `steps is given twice ("10" and "20")`)
	mustContain(t, e.say(operator, "开始 32"), `unknown job "32"`, "the jobs are train")
	if len(e.runs()) != 0 {
		t.Fatal("a bad start recorded a run")
	}
}

func TestNoRunYet(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(operator, "画图"), "No run yet")
	mustContain(t, e.say(operator, "日志"), "No run yet")
	mustContain(t, e.say(operator, "历史"), "No run yet")
	mustContain(t, e.say(operator, "任务"), "train", "steps: int")
	mustContain(t, e.say(operator, "显卡"), "not available")
	mustContain(t, e.say(operator, "对比"), "two or more")
	mustContain(t, e.say(operator, "对比 1"), "no run #1")
}

func TestSubscribeAndMute(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(viewer, "订阅"), "Subscribed")
	mustContain(t, e.say(operator, "/mute"), "Muted")
	subs, _ := e.st.Subscriptions(context.Background())
	if len(subs) != 2 {
		t.Fatalf("subs %+v", subs)
	}
	for _, s := range subs {
		if (s.Chat == viewer) != s.Subscribed {
			t.Errorf("chat %d subscribed=%v", s.Chat, s.Subscribed)
		}
	}
}

func TestScheduledReportAndStart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	charts := func(ctx context.Context, _ i18n.Lang, run *trainer.Run) []chat.Image {
		imgs, err := (&render.Charts{Data: e.st}).RunCharts(ctx, run)
		if err != nil {
			t.Errorf("charts: %v", err)
		}
		return imgs
	}
	r := notify.ReportReply(ctx, e.sup, e.st, charts, "morning", at)(i18n.ZhEn)
	if r.Text != "⏰ morning: no run is active." || r.Kind != chat.KindNotice || len(r.Images) != 0 {
		t.Errorf("report with no run: %+v", r)
	}
	if words, refused := command.ScheduledStart(ctx, e.sup, "nightly", "train", map[string]string{"steps": "400"}, at); refused {
		t.Fatalf("start refused: %s", words(i18n.ZhEn).Text)
	}
	active := e.sup.Active()
	if len(active) != 1 || active[0].Run.StartedBy != "schedule nightly" || active[0].Run.Params["steps"] != "400" {
		t.Fatalf("active %+v", active)
	}
	e.awaitStep(5)
	r = notify.ReportReply(ctx, e.sup, e.st, charts, "morning", at)(i18n.ZhEn)
	if !strings.HasPrefix(r.Text, "⏰ morning report\nrun #1 · train · running") || len(r.Images) != 1 || r.RunID != 1 || r.Key != "schedule:morning:1893574800" {
		t.Errorf("report of a run: %q, %d images, run %d, key %s", r.Text, len(r.Images), r.RunID, r.Key)
	}
	// A second start while the run is active is refused, with a message.
	words, refused := command.ScheduledStart(ctx, e.sup, "nightly", "train", nil, at)
	r = words(i18n.ZhEn)
	if !refused || r.Kind != chat.KindAlert || r.Alert != chat.AlertSchedule || !strings.Contains(r.Text, "⏰ nightly: train not started: run #1 (train) is still running") {
		t.Errorf("busy: %v %+v", refused, r)
	}
	words, refused = command.ScheduledStart(ctx, e.sup, "typo", "train", map[string]string{"steps": "0"}, at)
	r = words(i18n.ZhEn)
	if !refused || !strings.Contains(r.Text, "below the minimum 1") {
		t.Errorf("bad param: %+v", r)
	}
	if n := len(e.runs()); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// A run's note: given with 开始, changed with 备注, shown in 历史, 状态 of an
// ended run and 对比; dates in the configured zone.
func TestNotesAndDates(t *testing.T) {
	e := newEnv(t)
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	e.r.Location = shanghai
	got := e.say(operator, "开始 train steps=3 备注 checkpointing on")
	mustContain(t, got, "run #1 started", "📝 checkpointing on")
	if _, err := e.sup.WaitRun(context.Background(), 1); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	r, err := e.st.Run(context.Background(), 1)
	if err != nil || r.Note != "checkpointing on" || r.Params["steps"] != "3" {
		t.Fatalf("stored %+v %v", r, err)
	}
	e.say(operator, `开始 train steps=2 note: "no checkpointing"`)
	if _, err := e.sup.WaitRun(context.Background(), 2); err != nil && !errors.Is(err, trainer.ErrNotRunning) {
		t.Fatal(err)
	}
	hist := e.say(operator, "历史")
	date := r.StartedAt.In(shanghai).Format("01-02 15:04")
	mustContain(t, hist, "#1 train finished", date, "📝 checkpointing on", "📝 no checkpointing")
	mustContain(t, e.say(operator, "备注 2 baseline, batch 64"), "📝 run #2: baseline, batch 64")
	mustContain(t, e.say(operator, "状态 2"), "📝 baseline, batch 64")
	mustContain(t, e.say(operator, "对比 1 2"), "📝 checkpointing on", "📝 baseline, batch 64")
	mustContain(t, e.say(operator, "备注 9 x"), "no run #9")
	mustContain(t, e.say(operator, "备注 x y"), `"x" is not a run number`)
	mustContain(t, e.say(operator, "备注 2"), "run #2 has no note now")
	mustContain(t, e.say(viewer, "备注 1 mine"), "operator")
}

// 开始 while the job runs offers to queue; queued starts run in order when
// the lock frees, each telling nobody twice; viewers look, operators and
// owners cancel.
func TestQueue(t *testing.T) {
	e := newEnv(t)
	mustContain(t, e.say(operator, "开始 train steps=400"), "run #1 started")
	busy := e.say(operator, "开始 train steps=3")
	mustContain(t, busy, "already running", "排队 train steps=3")
	if len(busy.Buttons) == 0 || busy.Buttons[0][0].Data != "/queue train steps=3" {
		t.Errorf("busy reply's buttons %+v, want [排队 Queue] first", busy.Buttons)
	}
	mustContain(t, e.say(operator, "/queue train steps=3"), "queued #1: train steps=3", "position 1")
	mustContain(t, e.say(operator, "排队 train steps=4 备注 second"), "queued #2", "position 2")
	mustContain(t, e.say(operator, "排队 train steps=0"), "Not queued", "below the minimum 1")
	mustContain(t, e.say(viewer, "排队 train"), "Viewers can look at the queue")
	list := e.say(viewer, "队列")
	mustContain(t, list, "#1 · train steps=3 · position 1", "#2 · train steps=4 · position 2", "📝 second")
	mustContain(t, e.say(viewer, "/queue"), "#1 · train steps=3")
	mustContain(t, e.say(viewer, "取消 2"), "only they or an operator")
	mustContain(t, e.say(operator, "取消 9"), "no queue entry #9")
	mustContain(t, e.say(operator, "排队 train steps=5"), "queued #3")
	mustContain(t, e.say(operator, "取消 3"), "queue entry #3 (train) removed")

	// The end of run 1 starts #1, whose end starts #2.
	mustContain(t, e.say(operator, "/stop 1 confirm"), "stopping run #1")
	for id := int64(2); id <= 3; id++ {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if r, err := e.st.Run(context.Background(), id); err == nil && r.State == trainer.StateEnded {
				want := map[int64]string{2: "3", 3: "4"}[id]
				if r.Params["steps"] != want || r.Outcome != trainer.OutcomeFinished {
					t.Errorf("run %d has steps=%s and ended %s, want %s and finished", id, r.Params["steps"], r.Outcome, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("queued run %d never ended", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r, _ := e.st.Run(context.Background(), 3); r.Note != "second" {
		t.Errorf("run 3's note %q, want the queued one", r.Note)
	}
	mustContain(t, e.say(operator, "队列"), "The queue is empty")
}

// 关注 watches only logs in [watch] dirs; 停止 of a watched run stops
// watching, 停止 N kill asks first and then stops the process.
func TestWatchFromTheChat(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "ext.log")
	os.WriteFile(log, []byte("step 1 loss=0.5\n"), 0o644)
	mustContain(t, e.say(operator, "关注 "+log), "关注 is off")
	e.r.WatchDirs = []string{dir}
	mustContain(t, e.say(operator, "关注 /etc/passwd"), "Not watched", "not in a directory of [watch] dirs")
	mustContain(t, e.say(operator, "关注 "+filepath.Join(dir, "..", filepath.Base(dir), "..", "x")), "Not watched")
	mustContain(t, e.say(viewer, "关注 "+log), "Viewers can look")
	cmd := exec.Command("/bin/sh", "-c", `trap 'exit 3' INT; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	defer cmd.Process.Kill()
	got := e.say(operator, fmt.Sprintf("关注 %s %d", log, cmd.Process.Pid))
	mustContain(t, got, "👁 watching run #1 (ext)", "it ends when pid")
	mustContain(t, e.say(operator, "/stop 1 kill"), "Kill the watched process of run #1", "trainbot did not start it")
	mustContain(t, e.say(operator, "/stop 1 kill confirm"), "stopping the watched process of run #1")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r, err := e.st.Run(context.Background(), 1); err == nil && r.State == trainer.StateEnded {
			if r.Outcome != trainer.OutcomeStopped {
				t.Errorf("got %s: %s", r.Outcome, r.Detail)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watched run did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Without kill: the watch ends, nothing else.
	mustContain(t, e.say(operator, "关注 "+log), "watching run #2", "it ends on 停止 2")
	mustContain(t, e.say(operator, "/stop 2 confirm"), "run #2 (ext) is no longer watched")
}

// Users of messengers with string ids are allowed by those ids, per
// transport; a stranger is told their own id and the key to add it to.
func TestMessengerUsersByTheirOwnIDs(t *testing.T) {
	a := command.Access{Operators: []int64{operator}, Members: map[string]map[string]command.Role{
		"wecom": {"zhangsan": command.RoleOperator, "lisi": command.RoleViewer}}}
	msg := func(transport, ref string) chat.Message {
		return chat.Message{Transport: transport, Chat: 7, User: chat.User{ID: operator, Ref: ref}}
	}
	for _, c := range []struct {
		m    chat.Message
		want command.Role
	}{
		{msg("wecom", "zhangsan"), command.RoleOperator},
		{msg("wecom", "lisi"), command.RoleViewer},
		{msg("feishu", "zhangsan"), command.RoleNone}, // another messenger's id
		{msg("wecom", "wangwu"), command.RoleNone},    // its number is an operator's: ignored
	} {
		if got := a.Role(c.m); got != c.want {
			t.Errorf("%s %s: got role %d, want %d", c.m.Transport, c.m.User.Ref, got, c.want)
		}
	}
	e := newEnv(t)
	e.r.Access = a
	r := e.r.Handle(context.Background(), withText(msg("wecom", "wangwu"), "开始"))
	mustContain(t, r, "Your user id is wangwu", "[auth] wecom_operators or wecom_viewers")
	r = e.r.Handle(context.Background(), withText(msg("wecom", "lisi"), "开始"))
	mustContain(t, r, "Your user id is lisi", "[auth] wecom_operators.")
}

func withText(m chat.Message, text string) chat.Message {
	m.Text = text
	return m
}

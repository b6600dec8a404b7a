package command_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/gpufree"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/i18n"
)

// fakeFree is a GPUFree whose answers are its function fields; it records
// every call.
type fakeFree struct {
	watch  func(key chat.ChatKey, who string, n int, memory uint64) (time.Time, bool, error)
	cancel func(key chat.ChatKey) (int, error)

	mu    sync.Mutex
	calls []string
}

var _ command.GPUFree = (*fakeFree)(nil)

func (f *fakeFree) Watch(_ context.Context, key chat.ChatKey, who string, n int, memory uint64) (time.Time, bool, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("watch %v %s %d %d", key, who, n, memory))
	f.mu.Unlock()
	if f.watch == nil {
		return time.Now().Add(gpufree.DefaultTTL), false, nil
	}
	return f.watch(key, who, n, memory)
}

func (f *fakeFree) Cancel(_ context.Context, key chat.ChatKey) (int, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("cancel %v", key))
	f.mu.Unlock()
	if f.cancel == nil {
		return 0, nil
	}
	return f.cancel(key)
}

func (f *fakeFree) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// freeRouter is a router with no trainer and no history, for 通知空闲.
func freeRouter(f command.GPUFree, l i18n.Lang) *command.Router {
	r := &command.Router{Access: command.Access{Operators: []int64{operator}, Viewers: []int64{viewer}},
		Location: time.UTC, Languages: i18n.Languages{Default: l}}
	if f != nil {
		r.GPUFree = f
	}
	return r
}

func sayTo(r *command.Router, user int64, text string) chat.Reply {
	return r.Handle(context.Background(), chat.Message{Transport: "telegram", Chat: user, User: chat.User{ID: user, Name: "ann"}, Text: text})
}

const gib = 1 << 30

func TestNotifyFreeArguments(t *testing.T) {
	good := []struct {
		text   string
		n      int
		memory uint64
	}{
		{"通知空闲", 1, 0},
		{"通知空闲 2", 2, 0},
		{"通知空闲 2 20GiB", 2, 20 * gib},
		{"/notifyfree 1 8G", 1, 8 * gib},
		{"/notifyfree 20000MiB", 1, 20000 << 20},
		{"通知空闲 20GiB 3", 3, 20 * gib},
		{"通知空闲 2 20 GiB", 2, 20 * gib},
		{"通知空闲 2 20gb", 2, 20e9},
		{"通知空闲 64 0.5G", 64, gib / 2},
		{"通知空闲２　２０ＧｉＢ", 2, 20 * gib},
		{"/NOTIFYFREE@MyBot 4", 4, 0},
	}
	for _, c := range good {
		t.Run(c.text, func(t *testing.T) {
			f := &fakeFree{}
			reply := sayTo(freeRouter(f, i18n.ZhEn), operator, c.text)
			want := fmt.Sprintf("watch telegram:%d ann (telegram %d) %d %d", operator, operator, c.n, c.memory)
			if calls := f.takeCalls(); len(calls) != 1 || calls[0] != want {
				t.Fatalf("calls %q, want %q (reply %q)", calls, want, reply.Text)
			}
			if !strings.HasPrefix(reply.Text, "🔔 I'll tell this chat once") {
				t.Errorf("reply %q", reply.Text)
			}
		})
	}
	bad := []struct{ text, want string }{
		{"通知空闲 0", `"0" is not a number of GPUs: give 1 to 64`},
		{"通知空闲 65", `"65" is not a number of GPUs: give 1 to 64`},
		{"通知空闲 99999999999999999999", `is not a number of GPUs`},
		{"通知空闲 two", `"two" is not a number of GPUs`},
		{"通知空闲 -2", `"-2" is not a number of GPUs`},
		{"通知空闲 2 20", `"20" is not a size: give the free memory each GPU needs with its unit, e.g. 20GiB, 20G or 20000MiB`},
		{"通知空闲 2 2.5", `"2.5" is not a size`},
		{"通知空闲 2 20XB", `"20XB" is not a size`},
		{"通知空闲 2 -5GiB", `"-5GiB" is not a size`},
		{"通知空闲 2 lots", `"lots" is not a size`},
		{"通知空闲 2 2TiB", `"2TiB" is more free memory than any GPU has: at most 1 TiB.`},
		{"通知空闲 1e300G", `"1e300G" is more free memory than any GPU has`},
		{"通知空闲 2 20GiB 3", `"3" is one word too many: 通知空闲 takes a number of GPUs and a size`},
		{"通知空闲 2GiB 3GiB", `"3GiB" is one word too many`},
		{"通知空闲 关 2", `"2" is one word too many`},
		{"通知空闲 ２　２０", `"20" is not a size`},
	}
	for _, c := range bad {
		t.Run(c.text, func(t *testing.T) {
			f := &fakeFree{}
			reply := sayTo(freeRouter(f, i18n.ZhEn), operator, c.text)
			if !strings.Contains(reply.Text, c.want) {
				t.Errorf("reply %q lacks %q", reply.Text, c.want)
			}
			if calls := f.takeCalls(); len(calls) != 0 {
				t.Errorf("malformed arguments reached the watcher: %q", calls)
			}
		})
	}
	// What was read is echoed when it is not what was typed.
	mustContain(t, sayTo(freeRouter(&fakeFree{}, i18n.ZhEn), operator, "通知空闲 ２　２０"), "(read as: 通知空闲 2 20)")
}

func TestNotifyFreeReplies(t *testing.T) {
	exp := time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)
	when := render.StartedText(exp, time.Now().UTC())
	f := &fakeFree{watch: func(chat.ChatKey, string, int, uint64) (time.Time, bool, error) { return exp, false, nil }}

	mustContain(t, sayTo(freeRouter(f, i18n.En), operator, "/notifyfree 2 20GiB"),
		"🔔 I'll tell this chat once, when this host has 2 free GPUs with ≥ 20 GiB of free memory each (watching until "+when+"; send it again to renew, /notifyfree off to cancel).")
	mustContain(t, sayTo(freeRouter(f, i18n.Zh), operator, "通知空闲"),
		"🔔 这台主机一有 1 块空闲显卡，就在这个聊天里通知一次（等到 "+when+"；再发一次可续期，发送「通知空闲 关」取消）。")
	f.watch = func(chat.ChatKey, string, int, uint64) (time.Time, bool, error) { return exp, true, nil }
	mustContain(t, sayTo(freeRouter(f, i18n.En), operator, "/notifyfree 1"), "🔔 Renewed: I'll tell this chat once, when this host has 1 free GPU (watching until "+when+" now; /notifyfree off cancels).")

	f.watch = func(chat.ChatKey, string, int, uint64) (time.Time, bool, error) {
		return time.Time{}, false, gpufree.ErrTooMany
	}
	mustContain(t, sayTo(freeRouter(f, i18n.ZhEn), operator, "通知空闲 3"), "Not added: this chat already waits for 5 sets of GPUs, the most it may. 通知空闲 关 cancels them.")
	f.watch = func(chat.ChatKey, string, int, uint64) (time.Time, bool, error) {
		return time.Time{}, false, errors.New("save gpufree.watches: disk full")
	}
	mustContain(t, sayTo(freeRouter(f, i18n.En), operator, "/notifyfree"), "Could not save that: save gpufree.watches: disk full")
	f.takeCalls()

	// off
	f.cancel = func(chat.ChatKey) (int, error) { return 2, nil }
	for _, text := range []string{"通知空闲 关", "通知空闲关", "/notifyfree off", "/notifyfree OFF", "通知空闲 取消"} {
		mustContain(t, sayTo(freeRouter(f, i18n.En), operator, text), "🔕 No longer waiting: 2 GPU watches of this chat cancelled.")
	}
	if calls := f.takeCalls(); len(calls) != 5 || calls[0] != fmt.Sprintf("cancel telegram:%d", operator) {
		t.Errorf("calls %q, want 5 cancels of the chat", calls)
	}
	f.cancel = func(chat.ChatKey) (int, error) { return 1, nil }
	mustContain(t, sayTo(freeRouter(f, i18n.En), operator, "/notifyfree off"), "🔕 No longer waiting: 1 GPU watch of this chat cancelled.")
	f.cancel = func(chat.ChatKey) (int, error) { return 0, nil }
	mustContain(t, sayTo(freeRouter(f, i18n.Zh), operator, "通知空闲 关"), "这个聊天没有在等空闲显卡。")
	f.cancel = func(chat.ChatKey) (int, error) { return 0, errors.New("disk gone") }
	mustContain(t, sayTo(freeRouter(f, i18n.En), operator, "/notifyfree off"), "Could not save that: disk gone")
}

func TestNotifyFreeWithoutGPUs(t *testing.T) {
	for _, text := range []string{"通知空闲", "/notifyfree 2 20GiB", "通知空闲 关"} {
		mustContain(t, sayTo(freeRouter(nil, i18n.ZhEn), operator, text), "This trainbot sees no GPU, so there is nothing to wait for")
	}
	mustContain(t, sayTo(freeRouter(nil, i18n.Zh), viewer, "通知空闲"), "这个 trainbot 看不到显卡")
}

// Viewers may ask; strangers are refused before the watcher hears of it.
func TestNotifyFreeWho(t *testing.T) {
	f := &fakeFree{}
	mustContain(t, sayTo(freeRouter(f, i18n.En), viewer, "/notifyfree 2"), "🔔")
	if calls := f.takeCalls(); len(calls) != 1 || calls[0] != fmt.Sprintf("watch telegram:%d ann (telegram %d) 2 0", viewer, viewer) {
		t.Errorf("a viewer's request: calls %q", calls)
	}
	mustContain(t, sayTo(freeRouter(f, i18n.En), stranger, "/notifyfree 2"), "not allowed")
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Errorf("a stranger's request reached the watcher: %q", calls)
	}
}

func TestHelpListsNotifyFree(t *testing.T) {
	for l, want := range map[i18n.Lang]string{
		i18n.En: "/notifyfree [n] [memory] — one message when n GPUs (default 1) with that much free memory each are free here",
		i18n.Zh: "通知空闲 [块数] [显存]（/notifyfree）— 这台主机空出 n 块",
	} {
		if got := command.HelpText(l); !strings.Contains(got, want) {
			t.Errorf("%v help lacks %q:\n%s", l, want, got)
		}
	}
}

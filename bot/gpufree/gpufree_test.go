package gpufree

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

const gib = 1 << 30

// memKV is the state table in memory; failGet and failSet make it fail.
type memKV struct {
	mu      sync.Mutex
	m       map[string]string
	failGet error
	failSet error
}

var _ KV = (*memKV)(nil)

func newKV() *memKV { return &memKV{m: map[string]string{}} }

func (k *memKV) Get(_ context.Context, key string) (string, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failGet != nil {
		return "", false, k.failGet
	}
	v, ok := k.m[key]
	return v, ok, nil
}

func (k *memKV) Set(_ context.Context, key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failSet != nil {
		return k.failSet
	}
	k.m[key] = value
	return nil
}

// clock is a fake clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeMet answers from free: the GPUs that meet a request, none when a
// request is not in it; it records every call.
type fakeMet struct {
	mu    sync.Mutex
	free  map[request][]int
	calls []request
}

func (f *fakeMet) Met(n int, memory uint64) ([]int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, request{n, memory})
	idx, ok := f.free[request{n, memory}]
	return idx, ok
}

func (f *fakeMet) set(n int, memory uint64, idx ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free == nil {
		f.free = map[request][]int{}
	}
	f.free[request{n, memory}] = idx
}

// takeCalls returns the calls since the last takeCalls.
func (f *fakeMet) takeCalls() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

type posted struct {
	to chat.ChatKey
	r  chat.Reply
}

// rig is a Watcher over fakes, with no loop running: tests call check.
type rig struct {
	t     *testing.T
	w     *Watcher
	kv    *memKV
	clock *clock
	met   *fakeMet

	mu    sync.Mutex
	posts []posted
}

func newRig(t *testing.T, kv *memKV) *rig {
	t.Helper()
	r := &rig{t: t, kv: kv, clock: &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}, met: &fakeMet{}}
	r.w = New(Options{Met: r.met.Met, State: kv, Post: r.post, Now: r.clock.Now,
		Languages: i18n.Languages{Default: i18n.En, ByTransport: map[string]i18n.Lang{"wecom": i18n.Zh}}})
	return r
}

func (r *rig) post(to chat.ChatKey, reply chat.Reply) {
	r.mu.Lock()
	r.posts = append(r.posts, posted{to, reply})
	r.mu.Unlock()
}

// takePosts returns the posts since the last takePosts.
func (r *rig) takePosts() []posted {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.posts
	r.posts = nil
	return p
}

func (r *rig) check() { r.w.check(context.Background()) }

func (r *rig) watch(key chat.ChatKey, n int, memory uint64) (time.Time, bool) {
	r.t.Helper()
	exp, renewed, err := r.w.Watch(context.Background(), key, "alice (telegram 1)", n, memory)
	if err != nil {
		r.t.Fatalf("Watch(%v, %d, %d): %v", key, n, memory, err)
	}
	return exp, renewed
}

var (
	chatA = chat.ChatKey{Transport: "telegram", Chat: 1}
	chatB = chat.ChatKey{Transport: "telegram", Chat: 2}
	chatZ = chat.ChatKey{Transport: "wecom", Chat: 3}
)

func TestFiresOnceWhenMet(t *testing.T) {
	r := newRig(t, newKV())
	r.watch(chatA, 2, 20*gib)
	r.check()
	if got := r.met.takeCalls(); !slices.Equal(got, []request{{2, 20 * gib}}) {
		t.Fatalf("Met calls %v, want one for (2, 20 GiB)", got)
	}
	if p := r.takePosts(); len(p) != 0 {
		t.Fatalf("posted %v before the GPUs were free", p)
	}

	r.met.set(2, 20*gib, 0, 3)
	r.check()
	p := r.takePosts()
	if len(p) != 1 {
		t.Fatalf("got %d posts, want 1: %v", len(p), p)
	}
	if p[0].to != chatA {
		t.Errorf("posted to %v, want %v", p[0].to, chatA)
	}
	want := "🟢 2 GPUs free now (0, 3), each with ≥ 20 GiB: send /train to use them."
	if !strings.HasPrefix(p[0].r.Text, want) {
		t.Errorf("got %q, want it to start with %q", p[0].r.Text, want)
	}
	if p[0].r.Kind != chat.KindAlert || p[0].r.Alert != chat.AlertGPUFree || p[0].r.Key == "" {
		t.Errorf("kind %v alert %q key %q, want an alert of kind gpufree with a key", p[0].r.Kind, p[0].r.Alert, p[0].r.Key)
	}

	// Told once: the request is gone, and with it the Met calls.
	r.met.takeCalls()
	r.check()
	if p := r.takePosts(); len(p) != 0 {
		t.Errorf("posted again: %v", p)
	}
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met called %v after the only request was met", c)
	}
}

func TestOneMetCallPerRequestAndAnyMemory(t *testing.T) {
	r := newRig(t, newKV())
	r.watch(chatA, 1, 0)
	r.watch(chatB, 1, 0)
	r.watch(chatB, 2, 0)
	r.check()
	if got := r.met.takeCalls(); len(got) != 2 {
		t.Fatalf("Met calls %v, want one per distinct request (2)", got)
	}
	r.met.set(1, 0, 5)
	r.check()
	p := r.takePosts()
	if len(p) != 2 {
		t.Fatalf("got %d posts, want 2 (chats A and B, one GPU each): %v", len(p), p)
	}
	for _, x := range p {
		if want := "🟢 1 GPU free now (5): send /train to use it."; !strings.HasPrefix(x.r.Text, want) {
			t.Errorf("got %q, want it to start with %q", x.r.Text, want)
		}
	}
	// B's request for two stays.
	r.met.set(2, 0, 1, 2)
	r.check()
	if p := r.takePosts(); len(p) != 1 || p[0].to != chatB {
		t.Errorf("got %v, want one post to B", p)
	}
}

func TestRenew(t *testing.T) {
	r := newRig(t, newKV())
	t0 := r.clock.Now()
	exp, renewed := r.watch(chatA, 2, 20*gib)
	if renewed || !exp.Equal(t0.Add(DefaultTTL)) {
		t.Fatalf("first Watch: expires %v renewed %v, want %v and false", exp, renewed, t0.Add(DefaultTTL))
	}
	r.clock.Add(20 * time.Hour)
	exp, renewed = r.watch(chatA, 2, 20*gib)
	if !renewed || !exp.Equal(t0.Add(44*time.Hour)) {
		t.Fatalf("second Watch: expires %v renewed %v, want %v and true", exp, renewed, t0.Add(44*time.Hour))
	}
	// Another size is another request, not a renewal.
	if _, renewed := r.watch(chatA, 2, 10*gib); renewed {
		t.Error("a request with another size renewed the first")
	}
	// Past the first expiry, the renewed one still waits.
	r.clock.Add(10 * time.Hour)
	r.check()
	if p := r.takePosts(); len(p) != 0 {
		t.Errorf("posted %v while both requests wait", p)
	}
	if c := r.met.takeCalls(); !slices.Contains(c, request{2, 20 * gib}) {
		t.Errorf("Met calls %v lack the renewed request", c)
	}
}

func TestExpiry(t *testing.T) {
	kv := newKV()
	r := newRig(t, kv)
	r.watch(chatA, 2, 20*gib)
	r.clock.Add(DefaultTTL - time.Second)
	r.check()
	if p := r.takePosts(); len(p) != 0 {
		t.Fatalf("posted %v a second before the expiry", p)
	}
	r.met.takeCalls()
	r.clock.Add(time.Second)
	r.check()
	p := r.takePosts()
	if len(p) != 1 {
		t.Fatalf("got %d posts at the expiry, want 1: %v", len(p), p)
	}
	want := "⌛ No longer waiting for 2 free GPUs with ≥ 20 GiB of free memory each: 1d passed without a match. Send /notifyfree 2 20GiB to wait again."
	if p[0].r.Text != want || p[0].r.Kind != chat.KindNotice {
		t.Errorf("got %q (kind %v), want %q (a notice)", p[0].r.Text, p[0].r.Kind, want)
	}
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met asked %v about an expired request", c)
	}
	// Gone, from memory and from the state.
	r.check()
	if p := r.takePosts(); len(p) != 0 {
		t.Errorf("expired twice: %v", p)
	}
	if s := stored(t, kv); len(s.Watches) != 0 {
		t.Errorf("the state still has %v", s.Watches)
	}
	// Asked again, it waits a new day.
	if exp, renewed := r.watch(chatA, 2, 20*gib); renewed || !exp.Equal(r.clock.Now().Add(DefaultTTL)) {
		t.Errorf("asked again: expires %v renewed %v", exp, renewed)
	}
}

// An expired request asked again before the check dropped it starts anew,
// untold of its expiry.
func TestExpiredAskedAgain(t *testing.T) {
	r := newRig(t, newKV())
	r.watch(chatA, 1, 0)
	r.clock.Add(DefaultTTL + time.Minute)
	if _, renewed := r.watch(chatA, 1, 0); renewed {
		t.Error("an expired request was renewed; want a new one")
	}
	r.check()
	if p := r.takePosts(); len(p) != 0 {
		t.Errorf("posted %v", p)
	}
}

func TestCancel(t *testing.T) {
	r := newRig(t, newKV())
	r.watch(chatA, 1, 0)
	r.watch(chatA, 2, 8*gib)
	r.watch(chatB, 1, 0)
	n, err := r.w.Cancel(context.Background(), chatA)
	if err != nil || n != 2 {
		t.Fatalf("Cancel(A) = %d, %v; want 2", n, err)
	}
	r.met.set(1, 0, 0)
	r.met.set(2, 8*gib, 0, 1)
	r.check()
	if p := r.takePosts(); len(p) != 1 || p[0].to != chatB {
		t.Errorf("got %v, want one post, to B", p)
	}
	if n, err := r.w.Cancel(context.Background(), chatA); err != nil || n != 0 {
		t.Errorf("Cancel(A) again = %d, %v; want 0", n, err)
	}
}

func TestPersistsAcrossNew(t *testing.T) {
	kv := newKV()
	r1 := newRig(t, kv)
	t0 := r1.clock.Now()
	r1.watch(chatA, 2, 20*gib)
	r1.watch(chatZ, 1, 0)

	r2 := newRig(t, kv)
	r2.clock.Add(time.Hour)
	// The same request in the new Watcher is a renewal.
	if exp, renewed := r2.watch(chatA, 2, 20*gib); !renewed || !exp.Equal(t0.Add(time.Hour+DefaultTTL)) {
		t.Errorf("after New: expires %v renewed %v; want a renewal to %v", exp, renewed, t0.Add(time.Hour+DefaultTTL))
	}
	r3 := newRig(t, kv)
	r3.met.set(1, 0, 7)
	r3.check()
	p := r3.takePosts()
	if len(p) != 1 || p[0].to != chatZ {
		t.Fatalf("got %v, want one post to %v", p, chatZ)
	}
	// The chat's language: wecom speaks Chinese here.
	if want := "🟢 现在有 1 块显卡空闲（7 号）：发送「开始」使用。"; !strings.HasPrefix(p[0].r.Text, want) {
		t.Errorf("got %q, want it to start with %q", p[0].r.Text, want)
	}
	if c := r3.met.takeCalls(); len(c) != 2 {
		t.Errorf("Met calls %v, want the two restored requests", c)
	}
	s := stored(t, kv)
	if len(s.Watches) != 1 || s.Watches[0].ChatKey != "telegram:1" || s.Watches[0].N != 2 || s.Watches[0].Memory != 20*gib || s.Watches[0].Who == "" {
		t.Errorf("state %+v, want A's request for 2 × 20 GiB", s.Watches)
	}
}

func TestBrokenStateStartsEmpty(t *testing.T) {
	kv := newKV()
	kv.m[StateKey] = "{not json"
	r := newRig(t, kv)
	r.check()
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met called %v with no readable request", c)
	}
	r.watch(chatA, 1, 0)
	if s := stored(t, kv); len(s.Watches) != 1 {
		t.Errorf("state after a Watch: %+v", s)
	}
}

func TestStateErrors(t *testing.T) {
	kv := newKV()
	kv.m[StateKey] = `{"version":1,"watches":[{"chat":"telegram:1","n":1,"since":"2026-12-01T08:00:00Z","expires":"2026-12-02T08:00:00Z"}]}`
	kv.failGet = errors.New("disk gone")
	r := newRig(t, kv)
	r.check()
	r.check()
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met called %v while the state could not be read", c)
	}
	if _, _, err := r.w.Watch(context.Background(), chatA, "a", 1, 0); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("Watch with an unreadable state: %v, want its error", err)
	}
	kv.mu.Lock()
	kv.failGet, kv.failSet = nil, errors.New("disk full")
	kv.mu.Unlock()
	if _, _, err := r.w.Watch(context.Background(), chatA, "a", 1, 0); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Watch with an unwritable state: %v, want its error", err)
	}
	// Not kept: only the request read from the state is checked.
	r.check()
	if c := r.met.takeCalls(); !slices.Equal(c, []request{{1, 0}}) {
		t.Errorf("Met calls %v, want the one read from the state, once it could be read", c)
	}
}

func TestNoMetCallWithoutRequests(t *testing.T) {
	r := newRig(t, newKV())
	r.check()
	r.watch(chatA, 1, 0)
	if _, err := r.w.Cancel(context.Background(), chatA); err != nil {
		t.Fatal(err)
	}
	r.check()
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met called %v with no request", c)
	}
	// Without a State too.
	w := New(Options{Met: r.met.Met})
	w.check(context.Background())
	if c := r.met.takeCalls(); len(c) != 0 {
		t.Errorf("Met called %v with no request and no State", c)
	}
}

func TestLimits(t *testing.T) {
	r := newRig(t, newKV())
	for _, n := range []int{0, -1, MaxGPUs + 1} {
		if _, _, err := r.w.Watch(context.Background(), chatA, "a", n, 0); !errors.Is(err, ErrBadCount) {
			t.Errorf("Watch(n=%d): %v, want ErrBadCount", n, err)
		}
	}
	for n := 1; n <= MaxPerChat; n++ {
		r.watch(chatA, n, 0)
	}
	if _, _, err := r.w.Watch(context.Background(), chatA, "a", MaxPerChat+1, 0); !errors.Is(err, ErrTooMany) {
		t.Errorf("request %d of a chat: %v, want ErrTooMany", MaxPerChat+1, err)
	}
	if _, renewed := r.watch(chatA, 1, 0); !renewed {
		t.Error("a renewal at the limit was refused or not a renewal")
	}
	r.watch(chatB, MaxPerChat+1, 0) // another chat has its own
	// Expired requests do not count.
	r.clock.Add(DefaultTTL + time.Second)
	r.watch(chatA, MaxPerChat+1, 0)
}

// The loop started by Start checks on its own and Close stops it.
func TestStartChecksUntilClose(t *testing.T) {
	met := &fakeMet{}
	met.set(1, 8*gib, 2)
	ch := make(chan posted, 10)
	w := New(Options{Met: met.Met, Every: 5 * time.Millisecond, Post: func(to chat.ChatKey, r chat.Reply) { ch <- posted{to, r} }})
	w.Start()
	w.Start() // a second Start does nothing
	if _, _, err := w.Watch(context.Background(), chatA, "a", 1, 8*gib); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-ch:
		if p.to != chatA || !strings.Contains(p.r.Text, "(2)") {
			t.Errorf("got %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no post within 10 s of a met request")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func stored(t *testing.T, kv *memKV) state {
	t.Helper()
	kv.mu.Lock()
	v := kv.m[StateKey]
	kv.mu.Unlock()
	var s state
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		t.Fatalf("state %q: %v", v, err)
	}
	return s
}

func TestTexts(t *testing.T) {
	for m, want := range map[uint64]string{20 * gib: "20 GiB", 20000 << 20: "19.53 GiB", 512 << 20: "512 MiB", 7*gib + gib/2: "7.5 GiB"} {
		if got := Size(m); got != want {
			t.Errorf("Size(%d) = %q, want %q", m, got, want)
		}
	}
	for m, want := range map[uint64]string{20 * gib: "20GiB", 20000 << 20: "20000MiB", 2e10: "20000000000B", 1 << 40: "1TiB"} {
		if got := sizeWord(m); got != want {
			t.Errorf("sizeWord(%d) = %q, want %q", m, got, want)
		}
	}
	for l, want := range map[i18n.Lang]string{i18n.En: "/notifyfree 2 20GiB", i18n.Zh: "通知空闲 2 20GiB", i18n.ZhEn: "通知空闲 2 20GiB"} {
		if got := Command(l, 2, 20*gib); got != want {
			t.Errorf("Command(%v) = %q, want %q", l, got, want)
		}
	}
	if got, want := FreeNow(i18n.Zh, 2, 20*gib, []int{0, 3}).Text, "🟢 现在有 2 块显卡空闲（0、3 号），每块空闲显存 ≥ 20 GiB：发送「开始」使用。不会为你预留，先到先得。"; got != want {
		t.Errorf("zh: got %q, want %q", got, want)
	}
	if got, want := FreeNow(i18n.ZhEn, 1, 0, []int{4}).Text, "🟢 1 GPU free now (4): send 开始 to use it. It is not held for you: first come, first served."; got != want {
		t.Errorf("zh+en: got %q, want %q", got, want)
	}
}

package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/web/webtest"
)

// site is a server with the run pages over a real store in a temp dir.
type site struct {
	srv    *Server
	pages  *Pages
	st     *store.Store
	signer *Signer
	base   string
	dir    string

	mu     sync.Mutex
	active map[int64]*trainer.Status // what Supervisor.Status would say
}

func newSite(t testing.TB) *site {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	signer, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{st: st, signer: signer, dir: dir, active: map[int64]*trainer.Status{}}
	pages := &Pages{Store: st, Signer: signer, Live: 200 * time.Millisecond,
		Status: func(id int64) (trainer.Status, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if a, ok := s.active[id]; ok {
				c := *a
				c.Run = a.Run.Clone()
				return c, nil
			}
			return trainer.Status{}, trainer.ErrNotRunning
		},
		Tail: func(r *trainer.Run, n int) ([]string, error) {
			return []string{"step " + strconv.FormatInt(r.Steps, 10) + " loss 0.5", "line <2> & more"}, nil
		},
	}
	s.pages = pages
	s.srv = New(Options{Listen: "127.0.0.1:0", Pages: pages})
	if err := s.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.srv.Close(ctx)
	})
	s.base = "http://" + s.srv.Addr()
	return s
}

// addRun stores a run whose loss falls over steps 1..n (every step), and
// returns its id.
func (s *site) addRun(t testing.TB, job string, running bool, n int64) int64 {
	t.Helper()
	ctx := context.Background()
	r := &trainer.Run{Job: job, State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: time.Now().Add(-time.Hour),
		EndedAt: time.Now(), Params: map[string]string{"lr": "0.01", "batch": "32"}, Steps: n}
	if running {
		r.State, r.Outcome, r.EndedAt = trainer.StateRunning, trainer.OutcomeRunning, time.Time{}
	}
	id, err := s.st.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	r.ID = id
	s.addPoints(t, id, 1, n)
	if running {
		s.mu.Lock()
		s.active[id] = &trainer.Status{Run: r, Progress: logparse.Progress{Step: n}}
		s.mu.Unlock()
	}
	return id
}

// addSamples stores a run's memory and two GPUs' utilisation, one sample
// a minute over the last hour.
func (s *site) addSamples(t testing.TB, id int64) {
	t.Helper()
	var mem []history.RunMemory
	var devs []history.DeviceSample
	now := time.Now()
	for i := range int64(60) {
		at := now.Add(-time.Duration(60-i) * time.Minute)
		gpu, host := (4+i%5)<<30, (2+i%3)<<30
		mem = append(mem, history.RunMemory{RunID: id, T: at, GPUBytes: &gpu, HostBytes: &host})
		for d := range 2 {
			devs = append(devs, history.DeviceSample{T: at, Device: d, Name: "H200", MemUsed: gpu, MemTotal: 141 << 30, Util: int(50 + i%40), TempC: 60})
		}
	}
	if err := s.st.AddRunMemory(context.Background(), mem); err != nil {
		t.Fatal(err)
	}
	if err := s.st.AddDeviceSamples(context.Background(), devs); err != nil {
		t.Fatal(err)
	}
}

// addPoints stores loss and acc at steps [from, to].
func (s *site) addPoints(t testing.TB, id, from, to int64) {
	t.Helper()
	var pts []trainer.TimedPoint
	now := time.Now()
	for step := from; step <= to; step++ {
		loss := 2*math.Exp(-float64(step)/300) + 0.1*math.Sin(float64(step))
		pts = append(pts,
			trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: loss}, At: now},
			trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: math.NaN(), Name: "acc", Value: 1 - loss/3}, At: now})
	}
	s.st.AddPoints(id, pts)
	if err := s.st.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// advance moves a running run on: points up to step to, and its status.
func (s *site) advance(t testing.TB, id, to int64) {
	t.Helper()
	s.mu.Lock()
	a := s.active[id]
	from := a.Progress.Step + 1
	s.mu.Unlock()
	s.addPoints(t, id, from, to)
	s.mu.Lock()
	a.Progress.Step, a.Run.Steps = to, to
	s.mu.Unlock()
}

// points asks /api/runs/ID/points?QUERY with the run's token.
func (s *site) points(t testing.TB, run int64, query string) pointsReply {
	t.Helper()
	tok := url.QueryEscape(s.token(Scope(run), time.Hour))
	code, body := webtest.Get(t, s.base+"/api/runs/"+strconv.FormatInt(run, 10)+"/points?"+query+"&t="+tok)
	if code != 200 {
		t.Fatalf("got %d: %s", code, body)
	}
	var r pointsReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *site) token(scope Scope, ttl time.Duration) string {
	return s.signer.Sign(scope, time.Now().Add(ttl))
}

func TestTokens(t *testing.T) {
	s := newSite(t)
	run := s.addRun(t, "mnist", false, 100)
	other := s.addRun(t, "cifar", false, 100)
	forger, err := NewSigner([]byte("not the key of this trainbot!!!!"))
	if err != nil {
		t.Fatal(err)
	}
	good := s.token(Scope(run), time.Hour)
	tampered := strings.Replace(good, "r"+strconv.FormatInt(run, 10), "r"+strconv.FormatInt(other, 10), 1)
	page := "/runs/" + strconv.FormatInt(run, 10)
	api := "/api/runs/" + strconv.FormatInt(run, 10) + "/points?metric=loss&width=100"
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"no token", page, "", 401},
		{"forged", page, forger.Sign(Scope(run), time.Now().Add(time.Hour)), 401},
		{"tampered", page, tampered, 401},
		{"garbage", page, "r1.x.y", 401},
		{"expired", page, s.token(Scope(run), -time.Second), 401},
		{"other run", page, s.token(Scope(other), time.Hour), 401},
		{"the run's", page, good, 200},
		{"the list's opens a run", page, s.token(ScopeList, time.Hour), 200},
		{"api, no token", api, "", 401},
		{"api, other run", api, s.token(Scope(other), time.Hour), 401},
		{"api, expired", api, s.token(Scope(run), -time.Second), 401},
		{"api, the run's", api, good, 200},
		{"events, other run", "/api/runs/" + strconv.FormatInt(run, 10) + "/events", s.token(Scope(other), time.Hour), 401},
		{"list, a run's token", "/", good, 401},
		{"list, no token", "/", "", 401},
		{"list, the list's", "/", s.token(ScopeList, time.Hour), 200},
		{"compare, a run's token", "/compare?runs=1,2", good, 401},
		{"compare, the list's", "/compare?runs=1,2", s.token(ScopeList, time.Hour), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := s.base + tc.path
			if tc.token != "" {
				sep := "?"
				if strings.Contains(u, "?") {
					sep = "&"
				}
				u += sep + "t=" + url.QueryEscape(tc.token)
			}
			code, body := webtest.Get(t, u)
			if code != tc.want {
				t.Fatalf("got %d, want %d: %s", code, tc.want, body)
			}
			if code == 401 && !strings.HasPrefix(tc.path, "/api/") && !strings.Contains(body, "trainbot link") {
				t.Errorf("the 401 page does not say how to get a fresh link:\n%s", body)
			}
		})
	}
}

func TestKeyFileIsPrivateAndKept(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir + "/" + KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("key file mode %04o, want 0600", m)
	}
	b, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok := a.Sign(Scope(3), time.Now().Add(time.Minute))
	if sc, err := b.Verify(tok, time.Now()); err != nil || sc != 3 {
		t.Errorf("a token of the first load, checked after a second: scope %v, err %v; want 3, nil", sc, err)
	}
	if err := os.Chmod(dir+"/"+KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(dir); err == nil {
		t.Error("a key file others may read was accepted")
	}
}

func TestPointsAPI(t *testing.T) {
	s := newSite(t)
	run := s.addRun(t, "mnist", false, 5000)
	get := func(q string) pointsReply { t.Helper(); return s.points(t, run, q) }
	all := get("metric=loss&width=100")
	if all.From != 1 || all.To != 5000 {
		t.Errorf("full range: got [%d, %d], want [1, 5000]", all.From, all.To)
	}
	if n := len(all.X); n == 0 || n > 200 {
		t.Errorf("got %d points for 100 px, want 1..200", n)
	}
	zoom := get("metric=loss&from=1000&to=1099&width=400")
	if len(zoom.X) != 100 {
		t.Errorf("100 steps at 400 px: got %d points, want every one (100)", len(zoom.X))
	}
	for _, x := range zoom.X {
		if x < 1000 || x > 1099 {
			t.Fatalf("point at step %d outside [1000, 1099]", x)
		}
	}
	if none := get("metric=nope&width=100"); len(none.X) != 0 {
		t.Errorf("an unknown metric: got %d points, want none", len(none.X))
	}
}

func TestDownsampleKeepsTheEnvelope(t *testing.T) {
	var xs []int64
	var ys []float64
	for i := range int64(100_000) {
		xs = append(xs, i)
		ys = append(ys, math.Sin(float64(i)/500)+float64(i%7)/10)
	}
	ys[12345] = 50  // a spike
	ys[67890] = -50 // and a dip
	ys[500] = math.NaN()
	for _, width := range []int{1, 37, 390, 1000} {
		got := Downsample(xs, ys, 0, 99_999, width)
		if len(got.X) > 2*width {
			t.Errorf("width %d: %d points, want at most %d", width, len(got.X), 2*width)
		}
		var lo, hi float64
		for i, y := range got.Y {
			lo, hi = min(lo, y), max(hi, y)
			if i > 0 && got.X[i] <= got.X[i-1] {
				t.Fatalf("width %d: x not increasing at %d", width, i)
			}
		}
		if lo != -50 || hi != 50 {
			t.Errorf("width %d: envelope [%v, %v], want the spike and the dip [-50, 50]", width, lo, hi)
		}
		if got.Skipped != 1 {
			t.Errorf("width %d: skipped %d, want the NaN (1)", width, got.Skipped)
		}
	}
}

func decodeJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func TestPointsOfARunningRunFollowIt(t *testing.T) {
	// A running run's summary is rebuilt once it is older than
	// summaryAge: the whole-range chart reaches the new steps.
	s := newSite(t)
	run := s.addRun(t, "mnist", true, 1000)
	get := func() pointsReply { t.Helper(); return s.points(t, run, "metric=loss&width=390") }
	if r := get(); r.To != 1000 || len(r.X) > 780 {
		t.Fatalf("got to %d and %d points, want 1000 and at most 780", r.To, len(r.X))
	}
	s.advance(t, run, 3000)
	deadline := time.Now().Add(10 * summaryAge)
	for r := get(); r.To != 3000; r = get() {
		if time.Now().After(deadline) {
			t.Fatalf("the chart still ends at step %d, want 3000", r.To)
		}
		time.Sleep(50 * time.Millisecond) // polling the server, bounded by the deadline
	}
}

// The list shows each run's note.
func TestListShowsNotes(t *testing.T) {
	s := newSite(t)
	id := s.addRun(t, "mlp", false, 10)
	if err := s.st.SetNote(context.Background(), id, "checkpointing on"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.base + "/?t=" + url.QueryEscape(s.token(ScopeList, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != 200 || !strings.Contains(b.String(), "📝 checkpointing on") {
		t.Errorf("list: %d, note missing", resp.StatusCode)
	}
}

// A live run's event says how long it has left (issue 31: the page showed
// "Step 120" with no total or ETA).
func TestLiveEventSaysTheETA(t *testing.T) {
	s := newSite(t)
	id := s.addRun(t, "mnist", true, 120)
	s.mu.Lock()
	s.active[id].Progress.TotalSteps = 500
	s.active[id].ETA = 185 * time.Second
	s.mu.Unlock()
	ev, err := s.pages.liveEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Total != 500 || ev.ETA != "3m05s" {
		t.Errorf("total %d, eta %q; want 500 and 3m05s", ev.Total, ev.ETA)
	}
	if b, _ := json.Marshal(ev); !strings.Contains(string(b), `"eta":"3m05s"`) {
		t.Errorf("event JSON %s has no eta", b)
	}
}

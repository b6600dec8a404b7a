package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trainbot/trainbot/bot/push"
)

// hookServer is a generic webhook on 127.0.0.1 that records what it gets.
type hookServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []push.WebhookMessage
}

func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	h := &hookServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m push.WebhookMessage
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		h.mu.Lock()
		h.msgs = append(h.msgs, m)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) got() []push.WebhookMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]push.WebhookMessage(nil), h.msgs...)
}

// oomScript runs out of "CUDA memory" when its batch ($0) is above 16,
// asking for 1 GiB per 32 examples (a batch of 64: 2 GiB).
const oomScript = `if [ "$0" -gt 16 ]; then echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate $(($0 / 32)).00 GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.00 GiB is free." >&2; exit 1; fi; echo "step 1 loss=0.5"; echo "step 2 loss=0.25"`

func TestOnOOMRetriesReportAndPush(t *testing.T) {
	dir := t.TempDir()
	hook := newHookServer(t)
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`data_dir = "`+filepath.Join(dir, "data")+`"
[[jobs]]
name = "fit"
command = ["/bin/sh", "-c", '`+oomScript+`', "{bs}"]
on_oom = { retry = 2, halve = "bs" }
[jobs.params.bs]
type = "int"
default = 64
min = 1

[[push]]
kind = "webhook"
name = "ops"
url = "`+hook.srv.URL+`/hook"
alerts = ["oom", "finished"]
`), 0o644)
	code, out, stderr := trainbot(t, "开始\n", "console", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Acceptance: in causal order (each end report before the start of
	// the retry it announces, which names the run it retries), one message
	// per out-of-memory end, what to try once.
	want := []string{
		"💥 run #1 (fit) ran out of memory",
		"CUDA out of memory on GPU 0: tried to allocate 2.00 GiB",
		"↻ on_oom: starting it again with bs=32 (retry 1 of 2)",
		"What to try:\n• a smaller batch: 开始 fit bs=32",
		"run #2 started: fit bs=32 (by on_oom, retry 1/2 of run #1)",
		"💥 run #2 (fit) ran out of memory",
		"↻ on_oom: starting it again with bs=16 (retry 2 of 2)",
		"run #3 started: fit bs=16 (by on_oom, retry 2/2 of run #2)",
		"✅ run #3 (fit) finished",
		"best loss 0.2500 (step 2)",
		"✅ bs=16 fit, after 2 out-of-memory retries (previous run #2)",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(out[at:], w)
		if i < 0 {
			t.Errorf("output lacks %q after what came before it:\n%s", w, out)
			continue
		}
		at += i + len(w)
	}
	if n := strings.Count(out, "What to try"); n != 1 {
		t.Errorf("what to try came %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "hit out-of-memory") || strings.Contains(out, "[buttons] 开始 fit") {
		t.Errorf("a run that dies of its OOM gets one message, and no retry button while on_oom retries:\n%s", out)
	}
	// The push channel got the alerts it asked for, the charts with the end.
	var alerts []string
	var images int
	for _, m := range hook.got() {
		alerts = append(alerts, m.Alert)
		images += len(m.Images)
	}
	if strings.Join(alerts, ",") != "oom,oom,finished" || images != 1 {
		t.Errorf("webhook got alerts %v and %d images, want the 2 oom ends, then the finish with its chart", alerts, images)
	}

	code, out, _ = trainbot(t, "", "runs", "--json", "--data", filepath.Join(dir, "data"))
	if code != 0 {
		t.Fatalf("runs: %d", code)
	}
	var runs []runJSON
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].RetryOf == nil || *runs[0].RetryOf != 2 || *runs[1].RetryOf != 1 || runs[2].RetryOf != nil ||
		runs[0].Params["bs"] != float64(16) || runs[2].Outcome != "oom" {
		t.Errorf("runs %+v", runs)
	}
	if !strings.Contains(out, `"retry_of": null`) {
		t.Errorf("runs --json has no retry_of null:\n%s", out)
	}
}

func TestCheckNamesBadSchedulesAndListsThem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`[[jobs]]
name = "j"
command = ["true"]

[[schedules]]
name = "nightly"
spec = "CRON_TZ="
action = "start"

[[schedules]]
name = "hourly"
spec = "61 * * * *"
action = "report"
`), 0o644)
	code, _, stderr := trainbot(t, "", "check", "--config", path)
	if code != 1 || !strings.Contains(stderr, path+`:7: schedules[0] (nightly): spec "CRON_TZ=": CRON_TZ= names no time zone`) ||
		!strings.Contains(stderr, path+`:12: schedules[1] (hourly): spec "61 * * * *": end of range (61) above maximum (59)`) {
		t.Errorf("check: %d\n%s", code, stderr)
	}
	os.WriteFile(path, []byte(`[[jobs]]
name = "j"
command = ["true"]

[[schedules]]
name = "nightly"
spec = "CRON_TZ=Asia/Shanghai 30 2 * * *"
action = "start"

[[push]]
kind = "dingtalk"
key = "tok"
alerts = ["oom"]
`), 0o644)
	code, out, stderr := trainbot(t, "", "check", "--config", path)
	if code != 0 || !strings.Contains(out, "push dingtalk:dingtalk: alerts oom") || !strings.Contains(out, `schedule nightly: start j at "CRON_TZ=Asia/Shanghai 30 2 * * *", next `) {
		t.Errorf("check: %d\n%s\n%s", code, out, stderr)
	}
}

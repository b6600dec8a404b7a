package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/web/webtest"
)

// withHTTP adds [http] listen = 127.0.0.1:0 to a config written by
// writeStepsJob.
func withHTTP(t *testing.T, cfgPath string) {
	t.Helper()
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(b), "[[jobs]]", "[http]\nlisten = \"127.0.0.1:0\"\n[[jobs]]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// httpAddr reads the address trainbot's HTTP server listens on from its
// log (DATA/trainbot.log), after the offset of an earlier trainbot's.
func httpAddr(t *testing.T, data string, from int) string {
	t.Helper()
	rx := regexp.MustCompile(`msg="http listening: /metrics, /healthz" .*addr=(127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(data, "trainbot.log"))
		if len(b) > from {
			if m := rx.FindSubmatch(b[from:]); m != nil {
				return string(m[1])
			}
		}
	}
	t.Fatal("no http address in trainbot.log")
	return ""
}

// stepsOf returns how many times each step of run id's loss is stored.
func stepsOf(t *testing.T, data, id string) map[int64]int {
	t.Helper()
	code, pts, stderr := trainbot(t, "", "points", id, "--metric", "loss", "--json", "--data", data)
	if code != 0 {
		return nil // not there (yet): the caller polls
	}
	var got []struct {
		Step int64 `json:"step"`
	}
	if err := json.Unmarshal([]byte(pts), &got); err != nil {
		t.Fatalf("points --json: %v\n%s%s", err, pts, stderr)
	}
	seen := map[int64]int{}
	for _, p := range got {
		seen[p.Step]++
	}
	return seen
}

// TestTruncatedDatabaseMidRun is the acceptance of "database faults are
// faults": trainbot.db truncated to 0 bytes while a run prints; /healthz
// turns 503 within 10 s saying why, the chat is told once, the run goes on
// and ends finished; after the documented recovery (restart trainbot)
// every point of the run is in a new database, the damaged file kept, and
// the run is not announced again.
func TestTruncatedDatabaseMidRun(t *testing.T) {
	const steps = 200 // 6 s at 30 ms
	cfgPath, data := writeStepsJob(t, steps, 30*time.Millisecond)
	withHTTP(t, cfgPath)
	pr, pw := io.Pipe()
	e, out, errOut := testEnv(t, pr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"console", "--config", cfgPath}, e) }()
	io.WriteString(pw, "开始\n")
	waitFor(t, out, 0, `run #1 started`)
	addr := httpAddr(t, data, 0)
	logPath := filepath.Join(data, "runs", "1", "output.log")
	for deadline := time.Now().Add(20 * time.Second); logLines(logPath) < 30; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run printed %d lines in 20 s, want 30", logLines(logPath))
		}
	}
	if err := os.Truncate(filepath.Join(data, store.DBName), 0); err != nil {
		t.Fatal(err)
	}
	truncated := time.Now()
	var code int
	var body string
	for time.Since(truncated) < 15*time.Second {
		if code, body = webtest.Get(t, "http://"+addr+"/healthz"); code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(truncated)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "damaged") {
		t.Fatalf("/healthz %s after the truncation: %d %q, want 503 saying the database is damaged", took, code, body)
	}
	if took > 10*time.Second {
		t.Errorf("/healthz turned 503 after %s, want within 10 s", took)
	}
	t.Logf("/healthz 503 %s after the truncation: %s", took.Round(10*time.Millisecond), strings.TrimSpace(body))
	waitFor(t, out, 0, `run #1 \(steps\) finished`)
	pw.Close()
	select {
	case c := <-done:
		if c != 0 {
			t.Fatalf("trainbot exited %d: %s", c, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("trainbot did not end")
	}
	if n := strings.Count(out.String(), "is damaged"); n != 1 {
		t.Errorf("the chat was told of the damage %d times, want once:\n%s", n, out.String())
	}

	// The documented recovery: start trainbot again.
	logSize := 0
	if fi, err := os.Stat(filepath.Join(data, "trainbot.log")); err == nil {
		logSize = int(fi.Size())
	}
	pr2, pw2 := io.Pipe()
	e2, out2, errOut2 := testEnv(t, pr2)
	done2 := make(chan int, 1)
	go func() { done2 <- run(ctx, []string{"console", "--config", cfgPath}, e2) }()
	defer func() {
		pw2.Close()
		select {
		case <-done2:
		case <-time.After(time.Minute):
			t.Error("the second trainbot did not end")
		}
	}()
	httpAddr(t, data, logSize) // it serves
	var seen map[int64]int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if seen = stepsOf(t, data, "1"); len(seen) == steps {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d steps stored in 30 s after the recovery (stderr: %s)", len(seen), steps, errOut2.String())
		}
	}
	for i := int64(1); i <= steps; i++ {
		if seen[i] != 1 {
			t.Errorf("step %d stored %d times after the recovery, want once (stderr: %s)", i, seen[i], errOut2.String())
			break
		}
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps) {
		t.Errorf("run 1 after the recovery: %v at step %v (%v), want finished at step %d", r["outcome"], r["steps"], r["detail"], steps)
	}
	if aside, _ := filepath.Glob(filepath.Join(data, store.DBName+".damaged-*")); len(aside) == 0 {
		t.Error("the damaged database was not kept")
	}
	if _, err := os.Stat(filepath.Join(data, store.DBName)); err != nil {
		t.Errorf("no new database: %v", err)
	}
	if strings.Contains(out2.String(), "run #1 (steps) finished") {
		t.Errorf("the restored run was announced again:\n%s", out2.String())
	}
}

// TestRunUnderAnFDLimitWithIdleConnections is the acceptance of "unknown
// is not dead" and "HTTP is bounded" together: trainbot under ulimit -n 256
// with more idle keep-alive connections to /healthz than it has
// descriptors; the run is recorded finished with every step, and 开始 works
// while they are held and after they close.
func TestRunUnderAnFDLimitWithIdleConnections(t *testing.T) {
	const steps = 150 // 4.5 s at 30 ms
	cfgPath, data := writeStepsJob(t, steps, 30*time.Millisecond)
	withHTTP(t, cfgPath)
	cmd, stdin, out := startConsole(t, cfgPath, "/bin/sh", "-c", `ulimit -n 256 && exec "$0" "$@"`)
	defer cmd.Process.Kill()
	io.WriteString(stdin, "开始\n")
	_, at := waitFor(t, out, 0, `run #1 started`)
	addr := httpAddr(t, data, 0)

	// 400 idle keep-alive connections, each having had its answer.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 512)
		c.Read(buf) // an answer, or the close of a connection the cap let go: either way idle now
	}
	// While they are held: 状态 answers, a second job's start is refused
	// only because the job is busy (not for want of descriptors).
	io.WriteString(stdin, "开始\n")
	_, at = waitFor(t, out, at, `run #1 \(steps\) is already running`)
	_, at = waitFor(t, out, at, `run #1 \(steps\) finished`)
	if strings.Contains(out.String(), "too many open files") {
		t.Errorf("trainbot ran out of descriptors:\n%s", out.String())
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	io.WriteString(stdin, "开始\n")
	waitFor(t, out, at, `run #2 started`)
	stdin.Close()
	werr := make(chan error, 1)
	go func() { werr <- cmd.Wait() }()
	select {
	case err := <-werr:
		if err != nil {
			t.Fatalf("trainbot: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("trainbot did not end with its second run")
	}
	r := runJSONOf(t, data, "1")
	if r["outcome"] != "finished" || r["steps"] != float64(steps) {
		t.Fatalf("run 1: %v at step %v (%v), want finished at step %d", r["outcome"], r["steps"], r["detail"], steps)
	}
	seen := stepsOf(t, data, "1")
	for i := int64(1); i <= steps; i++ {
		if seen[i] != 1 {
			t.Fatalf("step %d stored %d times, want once", i, seen[i])
		}
	}
}

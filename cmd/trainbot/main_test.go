package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// TestMain lets the test binary play trainbot's demo child and its run
// supervisor: the demo job runs os.Executable() with "demo-train", and
// every run is started by os.Executable() with "shim".
func TestMain(m *testing.M) {
	// With TRAINBOT_TEST_MAIN=1 it is trainbot itself (a console a test
	// kills with -9).
	if len(os.Args) > 1 && (os.Args[1] == "demo-train" || os.Args[1] == "shim" || os.Getenv("TRAINBOT_TEST_MAIN") == "1") {
		exe, _ := os.Executable()
		os.Exit(run(context.Background(), os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ(), exe: exe}))
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testEnv(t *testing.T, stdin io.Reader) (env, *syncBuffer, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	return env{stdin: stdin, stdout: out, stderr: errOut, environ: []string{"HOME=" + t.TempDir()}, exe: exe}, out, errOut
}

// trainbot runs a subcommand to completion.
func trainbot(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	e, out, errOut := testEnv(t, strings.NewReader(stdin))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = run(ctx, args, e)
	return code, out.String(), errOut.String()
}

// waitFor polls the output until it matches re (after offset from).
func waitFor(t *testing.T, out *syncBuffer, from int, re string) (string, int) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s := out.String()
		if loc := rx.FindStringIndex(s[from:]); loc != nil {
			return s[from+loc[0] : from+loc[1]], from + loc[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("output never matched %q:\n%s", re, out.String()[from:])
	return "", 0
}

// endOfInput closes the terminal's input and waits for the demo to exit
// with 0.
func endOfInput(t *testing.T, pw *io.PipeWriter, done <-chan int, errOut *syncBuffer) {
	t.Helper()
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exited %d; stderr:\n%s", code, errOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not exit after the end of input")
	}
}

// TestDemoAcceptance is the Foundation issue's acceptance scenario:
// 开始, 状态, 画图, a second 开始, 停止, end of input; then runs --json.
func TestDemoAcceptance(t *testing.T) {
	data := t.TempDir()
	pr, pw := io.Pipe()
	e, out, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	start := time.Now()
	go func() { done <- run(context.Background(), []string{"demo", "--data", data}, e) }()
	say := func(s string) {
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	say("开始")
	_, pos := waitFor(t, out, 0, `run #1 started: demo`)
	_, pos = waitFor(t, out, pos, `\[buttons\] 停止 \| 状态 \| 画图`)
	// Ask for status until it shows a step and a loss.
	var status string
	for i := 0; i < 100; i++ {
		say("状态")
		status, pos = waitFor(t, out, pos, `run #1 · demo · running[^\n]*\n(?:no metric yet\n|[^\n]*step \d+/1500[^\n]*\n[^\n]*loss[^\n]*\n)`)
		if strings.Contains(status, "loss") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(status, "loss") || !regexp.MustCompile(`step \d+/1500`).MatchString(status) {
		t.Fatalf("status %q lacks a step and a loss", status)
	}
	firstMetric := time.Since(start)
	say("画图")
	img, pos := waitFor(t, out, pos, `\[image\] \S+\.png`)
	path := strings.TrimPrefix(img, "[image] ")
	if !strings.HasPrefix(path, filepath.Join(data, "charts")) {
		t.Errorf("chart %s is not under DATA/charts", path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	f.Close()
	say("开始")
	_, pos = waitFor(t, out, pos, `already running`)
	say("停止")
	_, pos = waitFor(t, out, pos, `stopping run #1`)
	endOfInput(t, pw, done, errOut)
	waitFor(t, out, pos, `run #1 \(demo\) stopped by`)
	t.Logf("first metric shown %s after 开始", firstMetric.Round(time.Millisecond))

	code, stdout, stderr := trainbot(t, "", "runs", "--json", "--data", data)
	if code != 0 {
		t.Fatalf("runs --json exited %d: %s", code, stderr)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
		t.Fatalf("runs --json is not JSON: %v\n%s", err, stdout)
	}
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(runs))
	}
	r := runs[0]
	for _, k := range []string{"id", "job", "state", "outcome", "exit_code", "started_at", "ended_at", "params", "steps", "last", "note"} {
		if _, ok := r[k]; !ok {
			t.Errorf("run JSON lacks %q", k)
		}
	}
	if r["outcome"] != "stopped" || r["steps"].(float64) <= 0 {
		t.Fatalf("got outcome %v steps %v, want stopped with steps", r["outcome"], r["steps"])
	}
	if _, ok := r["last"].(map[string]any)["loss"]; !ok {
		t.Errorf("last has no loss: %v", r["last"])
	}
	// Parameters are JSON numbers per their declared types; nothing is
	// HTML-escaped.
	params, _ := r["params"].(map[string]any)
	if _, ok := params["steps"].(float64); !ok {
		t.Errorf("params.steps is %T %v, want a number", params["steps"], params["steps"])
	}
	if _, ok := params["lr"].(float64); !ok {
		t.Errorf("params.lr is %T %v, want a number", params["lr"], params["lr"])
	}
	if strings.Contains(stdout, `\u00`) {
		t.Errorf("runs --json escapes HTML:\n%s", stdout)
	}
}

func TestDemoRunsToTheEndAtEOF(t *testing.T) {
	data := t.TempDir()
	code, out, stderr := trainbot(t, "开始\n", "demo", "--data", data, "--steps", "300", "--pace", "1ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "✅ run #1 (demo) finished") {
		t.Fatalf("no finish report:\n%s", out)
	}
	code, out, _ = trainbot(t, "", "runs", "show", "1", "--json", "--data", data)
	if code != 0 {
		t.Fatal(out)
	}
	var r struct {
		Outcome string
		Steps   int64
		Last    map[string]*float64
	}
	json.Unmarshal([]byte(out), &r)
	if r.Outcome != "finished" || r.Steps != 300 || r.Last["loss"] == nil || *r.Last["loss"] > 0.5 {
		t.Fatalf("got %+v", r)
	}
	chart := filepath.Join(t.TempDir(), "c.png")
	code, out, stderr = trainbot(t, "", "plot", "1", "--data", data, "-o", chart)
	if code != 0 {
		t.Fatalf("plot exited %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(chart); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("plot wrote no PNG (%v): %s", err, out)
	}
	code, out, _ = trainbot(t, "", "runs", "--data", data)
	if code != 0 || !strings.Contains(out, "#1 demo finished") {
		t.Fatalf("runs: %d %s", code, out)
	}
}

func TestUsageAndErrors(t *testing.T) {
	data := t.TempDir()
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"demo", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"runs", "show"}, 2, "one run id"},
		{[]string{"runs", "show", "x"}, 2, "not a run id"},
		{[]string{"runs", "show", "999", "--data", data}, 1, "run 999 not found"},
		{[]string{"plot", "--data", data}, 2, "one run id"},
		{[]string{"plot", "5", "--data", data}, 1, "run 5 not found"},
		{[]string{"console"}, 2, "no config: give --config FILE"},
		{[]string{"serve"}, 2, "no config: give --config FILE"},
		{[]string{"check"}, 2, "no config: give --config FILE"},
		{[]string{"check", "--config", "/nonexistent.toml"}, 1, "no such file"},
		{[]string{"demo", "--steps", "0"}, 2, "--steps 0"},
	}
	for _, c := range cases {
		code, _, stderr := trainbot(t, "", c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("trainbot %q: got %d %q, want %d containing %q", c.args, code, stderr, c.code, c.stderr)
		}
	}
	if code, out, _ := trainbot(t, "", "runs", "--data", data); code != 0 || !strings.Contains(out, "no runs yet") {
		t.Errorf("runs on an empty data dir: %d %q", code, out)
	}
	if code, out, _ := trainbot(t, "", "version"); code != 0 || !strings.HasPrefix(out, "trainbot ") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, out, _ := trainbot(t, "", "--help"); code != 0 || !strings.Contains(out, "demo") || strings.Contains(out, "demo-train") {
		t.Errorf("help: %d %q", code, out)
	}
}

func TestCheckReportsEveryErrorWithLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.toml")
	os.WriteFile(path, []byte(`log_level = "loud"

[[jobs]]
name = "a"
comand = ["python3"]
stop_grace = 5
`), 0o644)
	code, _, stderr := trainbot(t, "", "check", "--config", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		path + `:1: log_level: want debug, info, warn or error`,
		path + `:5: jobs[0].comand: unknown key (did you mean "command"?)`,
		path + `:6: jobs[0].stop_grace: want a duration string`,
		"3 config error(s)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The typo is one mistake: the missing command it leaves is not told
	// as a second one (#31).
	if strings.Contains(stderr, "a job needs a command") {
		t.Errorf("the typo comand is told twice:\n%s", stderr)
	}
	code, out, stderr := trainbot(t, "", "check", "--config", filepath.Join("..", "..", "config.example.toml"))
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("example: %d %s %s", code, out, stderr)
	}
}

func TestConsoleWithConfigJobs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`data_dir = "`+filepath.Join(dir, "data")+`"
[[jobs]]
name = "hello"
command = ["/bin/echo", "step 1 loss=0.5 {word}"]
[jobs.params.word]
type = "string"
default = "hi"
`), 0o644)
	code, out, stderr := trainbot(t, "任务\n开始 word=你好\n", "console", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"hello", "word: string", "run #1 started: hello word=你好", "✅ run #1 (hello) finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// serve without a transport refuses to start.
	code, _, stderr = trainbot(t, "", "serve", "--config", path)
	if code != 1 || !strings.Contains(stderr, "nothing to serve") {
		t.Fatalf("serve: %d %s", code, stderr)
	}
}

// check believes no placeholder: the example's values, a program not on
// PATH and a parameter inside a shell script are warned about (exit 0).
func TestCheckWarnsAboutLikelyMistakes(t *testing.T) {
	example := filepath.Join("..", "..", "config.example.toml")
	code, out, stderr := trainbot(t, "", "check", "--config", example)
	if code != 0 {
		t.Fatalf("example: %d %s %s", code, out, stderr)
	}
	lineOf := func(prefix string) int {
		raw, _ := os.ReadFile(example)
		for i, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, prefix) {
				return i + 1
			}
		}
		t.Fatalf("the example has no line %q", prefix)
		return 0
	}
	for _, want := range []string{
		fmt.Sprintf("%s:%d: [[push]] key: still the example's placeholder REPLACE-WITH-THE-ROBOT-KEY", example, lineOf(`key = "REPLACE-WITH`)),
		fmt.Sprintf("%s:%d: auth.operators: 123456789 is the example's user id", example, lineOf("operators = [123456789]")),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check of the example lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`[[jobs]]
name = "a"
command = ["no-such-program-here", "{lr}"]
[jobs.params.lr]
type = "float"
default = 0.1

[[jobs]]
name = "b"
command = ["sh", "-c", "python3 train.py --lr {lr} && echo ${{HOME}}"]
[jobs.params.lr]
type = "float"
default = 0.1

[[jobs]]
name = "c"
command = ["./train.sh"]
dir = "`+dir+`"
`), 0o644)
	code, out, stderr = trainbot(t, "", "check", "--config", path)
	if code != 0 {
		t.Fatalf("check: %d %s %s", code, out, stderr)
	}
	for _, want := range []string{
		path + `:3: jobs[0].command: program "no-such-program-here" is not on PATH here`,
		path + `:10: jobs[1].command: the shell script after -c puts {lr} into shell code`,
		`"$TRAINBOT_PARAM_LR"`,
		path + `:17: jobs[2].command: program "./train.sh": stat ` + filepath.Join(dir, "train.sh") + `: no such file or directory`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "shell code") != 1 {
		t.Errorf("${{HOME}} is a literal brace, not a parameter:\n%s", out)
	}
}

// trainbot queue lists the waiting start requests, with positions per lock.
func TestQueueCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "c.toml")
	os.WriteFile(cfgPath, []byte(`data_dir = "`+data+`"
[[jobs]]
name = "a"
command = ["true"]
max_queue = 3
`), 0o600)
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range []string{"one", "two"} {
		if _, err := st.AddQueued(context.Background(), trainer.QueueEntry{Job: "a", Params: map[string]string{"x": "1"}, Note: note, By: "ann", Origin: "telegram:1", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	code, out, stderr := trainbot(t, "", "queue", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "#1 · a x=1 · position 1 · by ann") || !strings.Contains(out, "#2 · a x=1 · position 2") {
		t.Errorf("queue: %d %q %s", code, out, stderr)
	}
	code, out, _ = trainbot(t, "", "queue", "--json", "--config", cfgPath)
	var q []map[string]any
	if err := json.Unmarshal([]byte(out), &q); err != nil || code != 0 || len(q) != 2 || q[1]["position"] != float64(2) || q[0]["note"] != "one" || q[0]["chat"] != "telegram:1" {
		t.Errorf("queue --json: %d %v %s", code, err, out)
	}
}

// trainbot watch records a watched run for the serving trainbot; bad input
// is refused with the reason.
func TestWatchCommand(t *testing.T) {
	data := t.TempDir()
	log := filepath.Join(t.TempDir(), "exp.log")
	os.WriteFile(log, []byte("step 1 loss=0.5\n"), 0o644)
	code, out, stderr := trainbot(t, "", "watch", "--log", log, "--name", "exp1", "--data", data)
	if code != 0 || !strings.Contains(out, "run #1 (exp1): watching "+log) {
		t.Fatalf("watch: %d %q %s", code, out, stderr)
	}
	r := runJSONOf(t, data, "1")
	if r["runner"] != "watch" || r["state"] != "running" || r["log_path"] != log {
		t.Errorf("runs show: %v", r)
	}
	if code, _, stderr := trainbot(t, "", "watch", "--log", log+".none", "--data", data); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("a missing log: %d %s", code, stderr)
	}
	if code, _, stderr := trainbot(t, "", "watch", "--data", data); code != 2 || !strings.Contains(stderr, "--log FILE is required") {
		t.Errorf("no log: %d %s", code, stderr)
	}
	if code, _, stderr := trainbot(t, "", "watch", "--log", log, "--pid", "999999999", "--data", data); code != 1 || !strings.Contains(stderr, "no process") {
		t.Errorf("a dead pid: %d %s", code, stderr)
	}
}

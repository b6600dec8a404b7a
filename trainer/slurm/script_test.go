package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary, started with it, the command of a batch
// script: it writes what it received (helperReport) to the file named by it.
const helperEnv = "TRAINBOT_SLURM_TEST_HELPER_OUT"

type helperReport struct {
	Args []string          `json:"args"`
	Dir  string            `json:"dir"`
	Env  map[string]string `json:"env"` // the TB_ variables
	PID  int               `json:"pid"`
}

func TestMain(m *testing.M) {
	if out := os.Getenv(helperEnv); out != "" {
		os.Exit(helper(out))
	}
	os.Exit(m.Run())
}

func helper(out string) int {
	dir, _ := os.Getwd()
	r := helperReport{Args: os.Args[1:], Dir: dir, Env: map[string]string{}, PID: os.Getpid()}
	for _, e := range os.Environ() {
		if k, v, _ := strings.Cut(e, "="); strings.HasPrefix(k, "TB_") {
			r.Env[k] = v
		}
	}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(out, data, 0o600); err != nil {
		return 1
	}
	code, _ := strconv.Atoi(os.Getenv("TB_EXIT"))
	return code
}

// nasty are argv and environment values a shell would interpret.
var nasty = []string{
	"plain",
	"two words",
	"it's",
	`"double"`,
	"'",
	"''",
	`\`,
	`\'`,
	"$(touch pwned)",
	"`touch pwned`",
	"${HOME}",
	"$HOME",
	"a;b",
	"a && b || c",
	"line1\nline2",
	"\n#SBATCH --mem=1T",
	"trailing newline\n",
	"tab\there",
	"*",
	"~",
	"!!",
	"-n",
	"--",
	"{a,b}",
	"> /tmp/x",
	"ünïcödé 训练",
	"\x01\x7f",
	"",
}

// The script runs the command exactly as given: bash reads every item back
// byte for byte, in the directory and with the environment asked for, and
// exec makes the command the script's own process (so Slurm's signals to
// the batch step reach it).
func TestBatchScriptPassesItemsByteForByte(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not on PATH")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "work dir $(x) 'q'")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "report.json")
	env := []string{helperEnv + "=" + out, "TB_EXIT=7"}
	for i, v := range nasty {
		env = append(env, "TB_"+strconv.Itoa(i)+"="+v)
	}
	argv := append([]string{self}, nasty...)
	script := filepath.Join(tmp, ScriptFile)
	if err := writeScript(script, batchScript(1, dir, env, argv)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, script)
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("script: got %v, want exit status 7 (the command's)", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r helperReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Args, nasty) {
		t.Errorf("argv:\n got %q\nwant %q", r.Args, nasty)
	}
	if r.Dir != dir {
		t.Errorf("directory: got %q, want %q", r.Dir, dir)
	}
	for i, v := range nasty {
		if got := r.Env["TB_"+strconv.Itoa(i)]; got != v {
			t.Errorf("TB_%d: got %q, want %q", i, got, v)
		}
	}
	if r.PID != cmd.Process.Pid {
		t.Errorf("command pid %d, script pid %d: want the same (exec)", r.PID, cmd.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a command substitution ran")
	}
	if info, err := os.Stat(script); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("script mode: got %v (%v), want 0700", info.Mode(), err)
	}
}

// A directory that does not exist stops the script before the command.
func TestBatchScriptStopsWhenDirIsMissing(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not on PATH")
	}
	tmp := t.TempDir()
	marker := filepath.Join(tmp, "ran")
	script := filepath.Join(tmp, ScriptFile)
	if err := writeScript(script, batchScript(1, filepath.Join(tmp, "missing"), nil, []string{"touch", marker})); err != nil {
		t.Fatal(err)
	}
	err := exec.Command("bash", script).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("got %v, want exit status 1", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran in the wrong directory")
	}
}

// sbatch reads "#SBATCH" lines only before the first command: no value may
// come before it.
func TestBatchScriptHasNoValueBeforeTheFirstCommand(t *testing.T) {
	s := batchScript(42, "/d", []string{"A=\n#SBATCH --mem=1T"}, []string{"x"})
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#SBATCH") {
			break
		}
		if !strings.HasPrefix(line, "#") {
			if !strings.HasPrefix(line, "cd -- ") {
				t.Errorf("first command %q: want the cd", line)
			}
			return
		}
	}
	t.Errorf("no command before an #SBATCH line in:\n%s", s)
}

func TestPrepareArgs(t *testing.T) {
	tmp := t.TempDir()
	spec := SubmitSpec{
		RunID: 7, Job: "train", Argv: []string{"python3", "train.py"}, Dir: tmp,
		Env: []string{"TRAINBOT_RUN_ID=7"}, RunDir: tmp, LogPath: filepath.Join(tmp, "50%j", "output.log"),
		Options: Options{Partition: "gpu", GPUs: "2", ExtraArgs: []string{"--requeue"}},
	}
	argv, script, err := prepare(spec)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(tmp, "50%%j", "output.log")
	want := []string{"sbatch", "--parsable", "--job-name=trainbot-7-train", "--output=" + log, "--error=" + log,
		"--open-mode=append", "--no-requeue", "--chdir=" + tmp, "--partition=gpu", "--gpus=2", "--requeue"}
	if !reflect.DeepEqual(argv, want) {
		t.Errorf("got  %q\nwant %q", argv, want)
	}
	if !strings.Contains(script, "export -- 'TRAINBOT_RUN_ID=7'\nexec -- 'python3' 'train.py'\n") {
		t.Errorf("script:\n%s", script)
	}
}

func TestPrepareRejects(t *testing.T) {
	ok := SubmitSpec{RunID: 1, Job: "j", Argv: []string{"true"}, RunDir: "/r", LogPath: "/r/output.log"}
	for _, tc := range []struct {
		name   string
		change func(*SubmitSpec)
		detail string
	}{
		{"no command", func(s *SubmitSpec) { s.Argv = nil }, "empty command"},
		{"empty program", func(s *SubmitSpec) { s.Argv = []string{""} }, "empty command"},
		{"NUL in argv", func(s *SubmitSpec) { s.Argv = []string{"a\x00b"} }, "NUL"},
		{"env without =", func(s *SubmitSpec) { s.Env = []string{"FOO"} }, `"FOO"`},
		{"env name", func(s *SubmitSpec) { s.Env = []string{"A.B=1"} }, `"A.B=1"`},
		{"env NUL", func(s *SubmitSpec) { s.Env = []string{"A=\x00"} }, "NUL"},
		{"no run dir", func(s *SubmitSpec) { s.RunDir = "" }, "RunDir"},
		{"no log", func(s *SubmitSpec) { s.LogPath = "" }, "LogPath"},
		{"backslash", func(s *SubmitSpec) { s.LogPath = `/r/a\b.log` }, "backslash"},
		{"options", func(s *SubmitSpec) { s.Options.Time = "soon" }, "time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.change(&s)
			_, _, err := prepare(s)
			if err == nil || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("got %v, want an error with %q", err, tc.detail)
			}
		})
	}
}

func TestParseParsable(t *testing.T) {
	for in, want := range map[string]string{
		"42\n":                      "42",
		"42;cluster\n":              "42",
		"note from a wrapper\n43\n": "43",
		"":                          "",
	} {
		if got := parseParsable(in); got != want {
			t.Errorf("parseParsable(%q): got %q, want %q", in, got, want)
		}
	}
}

// fakeRunner answers by command name; it records the calls.
type fakeRunner struct {
	answers map[string]func(argv []string) ([]byte, error)
	calls   [][]string
}

func (f *fakeRunner) run(_ context.Context, _ time.Duration, argv ...string) ([]byte, error) {
	f.calls = append(f.calls, argv)
	if a, ok := f.answers[argv[0]]; ok {
		return a(argv)
	}
	return nil, &commandError{argv: argv, err: errors.New("not found")}
}

func failWith(stderr string) func([]string) ([]byte, error) {
	return func(argv []string) ([]byte, error) {
		return nil, &commandError{argv: argv, err: errors.New("exit status 1"), stderr: stderr}
	}
}

func answer(out string) func([]string) ([]byte, error) {
	return func([]string) ([]byte, error) { return []byte(out), nil }
}

func TestQueryFallsBackToSacct(t *testing.T) {
	invalid := failWith("slurm_load_jobs error: Invalid job id specified")
	for _, tc := range []struct {
		name      string
		scontrol  func([]string) ([]byte, error)
		sacct     func([]string) ([]byte, error)
		state     string
		unknown   bool // ErrUnknownJob
		calls     int
		errDetail string
	}{
		{name: "scontrol knows it", scontrol: answer(readFixture(t, "scontrol-timeout.txt")), state: "TIMEOUT", calls: 1},
		{name: "sacct knows it", scontrol: invalid, sacct: answer(readFixture(t, "sacct-out-of-memory.txt")), state: "OUT_OF_MEMORY", calls: 2},
		{name: "no accounting", scontrol: invalid, sacct: failWith("Slurm accounting storage is disabled"),
			unknown: true, calls: 2, errDetail: "accounting storage is disabled"},
		{name: "sacct has no such job", scontrol: invalid, sacct: answer(""), unknown: true, calls: 2},
		{name: "controller down", scontrol: failWith("slurm_load_jobs error: Unable to contact slurm controller (connect failure)"),
			calls: 1, errDetail: "Unable to contact slurm controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{answers: map[string]func([]string) ([]byte, error){"scontrol": tc.scontrol, "sacct": tc.sacct}}
			if tc.sacct == nil {
				delete(f.answers, "sacct")
			}
			j, err := query(context.Background(), "21", f.run)
			if len(f.calls) != tc.calls {
				t.Errorf("got %d calls (%q), want %d", len(f.calls), f.calls, tc.calls)
			}
			if errors.Is(err, ErrUnknownJob) != tc.unknown {
				t.Errorf("got %v, want ErrUnknownJob: %v", err, tc.unknown)
			}
			if tc.errDetail != "" && (err == nil || !strings.Contains(err.Error(), tc.errDetail)) {
				t.Errorf("got %v, want an error with %q", err, tc.errDetail)
			}
			if tc.state != "" && (err != nil || j.State != tc.state) {
				t.Errorf("got %q, %v; want %s", j.State, err, tc.state)
			}
		})
	}
	if _, err := query(context.Background(), "-1", (&fakeRunner{}).run); err == nil {
		t.Error("an id that is not digits was accepted")
	}
}

func TestCancelArgs(t *testing.T) {
	for _, tc := range []struct {
		signal    string
		batchOnly bool
		want      []string
	}{
		{"", false, []string{"scancel", "42"}},
		{"INT", false, []string{"scancel", "--signal=INT", "--full", "42"}},
		{"SIGTERM", true, []string{"scancel", "--signal=SIGTERM", "--batch", "42"}},
		{"10", false, []string{"scancel", "--signal=10", "--full", "42"}},
	} {
		f := &fakeRunner{answers: map[string]func([]string) ([]byte, error){
			"scancel":  answer(""),
			"scontrol": answer(readFixture(t, "scontrol-running.txt")),
		}}
		if err := cancel(context.Background(), "42", tc.signal, tc.batchOnly, f.run); err != nil {
			t.Fatal(err)
		}
		last := f.calls[len(f.calls)-1]
		if !reflect.DeepEqual(last, tc.want) {
			t.Errorf("signal %q batchOnly %v: got %q, want %q", tc.signal, tc.batchOnly, last, tc.want)
		}
		if tc.signal != "" && (len(f.calls) != 2 || f.calls[0][0] != "scontrol") {
			t.Errorf("signal %q: got calls %q, want scontrol, then scancel", tc.signal, f.calls)
		}
	}
	f := &fakeRunner{answers: map[string]func([]string) ([]byte, error){
		"scancel":  failWith("scancel: error: Kill job error on job id 42: Access/permission denied"),
		"scontrol": answer(readFixture(t, "scontrol-running.txt")),
	}}
	if err := cancel(context.Background(), "42", "INT", false, f.run); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("got %v, want scancel's stderr", err)
	}
	if err := cancel(context.Background(), "42", "INT; rm", false, f.run); err == nil {
		t.Error("a bad signal name was accepted")
	}
}

// A signal is not sent to a job that is not running: scancel would retry for
// 95 s on a pending one.
func TestCancelWithSignalNeedsARunningJob(t *testing.T) {
	for _, fixture := range []string{"scontrol-pending-resources.txt", "scontrol-completed.txt", "scontrol-completing.txt"} {
		f := &fakeRunner{answers: map[string]func([]string) ([]byte, error){
			"scancel":  answer(""),
			"scontrol": answer(readFixture(t, fixture)),
		}}
		err := cancel(context.Background(), "42", "INT", false, f.run)
		if !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s: got %v, want ErrNotRunning", fixture, err)
		}
		if len(f.calls) != 1 {
			t.Errorf("%s: got calls %q, want scontrol only", fixture, f.calls)
		}
	}
}

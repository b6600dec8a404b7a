package config

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// config is a leaf: it imports no package of trainbot (what the values
// mean to them is checked in cmd/trainbot).
func TestConfigImportsNoPackageOfTrainbot(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/trainbot/trainbot/") && p != "github.com/trainbot/trainbot/config" {
			t.Errorf("config imports %s", p)
		}
	}
}

func parse(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	c := DefaultConfig()
	if err := c.Parse("test.toml", strings.NewReader(doc)); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestErrorsNameKeyAndLine(t *testing.T) {
	doc := `data_dir = "/tmp/x"
log_level = "loud"

[[jobs]]
name = "a"
comand = ["python3"]

[[jobs]]
name = "b"
command = ["python3", "t.py"]
stop_grace = 30

[jobs.params.bs]
type = "int"
max = "big"

[plots]
smoothing = 1.5
`
	_, err := parse(t, doc)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want Errors", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Error("errors do not wrap ErrInvalid")
	}
	want := []string{
		`test.toml:6: jobs[0].comand: unknown key (did you mean "command"?)`,
		`test.toml:11: jobs[1].stop_grace: want a duration string like "30s", got integer 30`,
		`test.toml:15: jobs[1].params.bs.max: want a number, got string "big"`,
	}
	text := err.Error()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("errors lack %q:\n%s", w, text)
		}
	}
}

func TestValidationErrorsHaveLines(t *testing.T) {
	doc := `log_level = "loud"

[plots]
smoothing = 1.5

[[jobs]]
name = "a"

[[jobs]]
name = "a"
command = ["x", "{missing}"]
`
	_, err := parse(t, doc)
	text := err.Error()
	for _, w := range []string{
		`test.toml:1: log_level: want debug, info, warn or error, got "loud"`,
		`test.toml:4: plots.smoothing: want a number in [0, 1), got 1.5`,
		`test.toml:6: jobs[0].command: a job needs a command`,
		`test.toml:10: jobs[1].name: job "a" is already defined at jobs[0]`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("errors lack %q:\n%s", w, text)
		}
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, err := parse(t, "data_dir = \"x\"\n\n[jobs\nname = 1\n")
	if err == nil || !strings.Contains(err.Error(), "test.toml:3") || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("got %v, want a syntax error on line 3", err)
	}
}

// The flags are applied over the environment by cmd/trainbot (configFlags.load):
// TestFlagsOverrideEnvironmentOverridesFile there.
func TestEnvironmentOverridesFile(t *testing.T) {
	c, err := parse(t, "data_dir = \"/from/file\"\nlog_level = \"warn\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv([]string{"TRAINBOT_DATA_DIR=/from/env", "TRAINBOT_RUN_ID=7", "PATH=/bin", "TRAINBOT_PLOTS_SMOOTHING=0.9"}); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/env" || c.LogLevel != "warn" || c.Plots.Smoothing != 0.9 {
		t.Fatalf("got %+v", c)
	}
	err = c.ApplyEnv([]string{"TRAINBOT_PLOTS_SMOOTHING=lots"})
	if err == nil || !strings.HasPrefix(err.Error(), "TRAINBOT_PLOTS_SMOOTHING (environment): plots.smoothing: ") {
		t.Fatalf("got %v, want an error naming the variable and the key", err)
	}
}

// A value the environment gave is reported at its variable, not at the
// line of the file that has the key or its table (the file's value was
// replaced): check used to print "test.toml:2: log_level: …".
func TestAnErrorInAValueFromTheEnvironmentNamesTheVariable(t *testing.T) {
	c, err := parse(t, "# the file\nlog_level = \"warn\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv([]string{"TRAINBOT_LOG_LEVEL=loud"}); err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("Validate = %v, want one error", err)
	}
	if got := errs[0].Error(); !strings.HasPrefix(got, "TRAINBOT_LOG_LEVEL (environment): log_level: ") || strings.Contains(got, "test.toml") {
		t.Errorf("got %q, want it to name TRAINBOT_LOG_LEVEL (environment) and no line of the file", got)
	}
	if name, ok := c.FromEnv("log_level"); !ok || name != "TRAINBOT_LOG_LEVEL" {
		t.Errorf("FromEnv(log_level) = %q, %v", name, ok)
	}
	// The same key from the file keeps its line.
	c, _ = parse(t, "# the file\nlog_level = \"loud\"\n")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), ":2: log_level: ") {
		t.Errorf("from the file: %v, want its line", err)
	}
}

func TestDefaultDataDirFollowsXDG(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg/state")
	if got := DefaultDataDir(); got != "/xdg/state/trainbot" {
		t.Errorf("got %s", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultDataDir(); got != "/home/u/.local/state/trainbot" {
		t.Errorf("got %s", got)
	}
}

func TestParamsAndSizes(t *testing.T) {
	dir := t.TempDir()
	doc := `[[jobs]]
name = "t"
command = ["python3", "t.py", "{opt}"]
dir = "` + dir + `"
max_log_size = "512MiB"
stall_after = "1d"
[jobs.params.opt]
type = "string"
choices = ["adam", "sgd"]
default = "adam"
[jobs.params.lr]
type = "float"
default = 0.001
`
	c, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	j := c.Jobs[0]
	if j.MaxLogSize != 512<<20 || time.Duration(j.StallAfter) != 24*time.Hour || j.Dir != dir {
		t.Errorf("got %d %s %s", j.MaxLogSize, time.Duration(j.StallAfter), j.Dir)
	}
	if d, ok := j.Params["lr"].DefaultText(); !ok || d != "0.001" || strings.Join(j.Params["opt"].ChoicesText(), ",") != "adam,sgd" {
		t.Errorf("params %+v", j.Params)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want not-exist", err)
	}
}

func TestRetention(t *testing.T) {
	c, err := parse(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Store.RetentionText(); !strings.Contains(got, "samples kept 30 days, the audit 365 days") {
		t.Errorf("defaults: %s", got)
	}
	c, err = parse(t, "[store]\nkeep_samples = \"7d\"\nkeep_audit = \"0\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Store.RetentionText(); !strings.Contains(got, "samples kept 7 days, the audit forever") {
		t.Errorf("7d and 0: %s", got)
	}
}

// What Validate would say of a value that could not be decoded (the zero
// the failure left) is not another problem: a name that is not a string is
// one error, not also "a job needs a name", and a command with an item
// that is not a string is one error, not also "a job needs a command".
func TestDecodeFailuresAreToldOnce(t *testing.T) {
	doc := `data_dir = "/tmp/x"

[[jobs]]
name = 5
command = ["python3"]

[[jobs]]
name = "b"
command = [7]
`
	c := DefaultConfig()
	perr := c.Parse("test.toml", strings.NewReader(doc))
	verr := c.Validate()
	if perr == nil {
		t.Fatal("parse: got nil, want the two values that are not strings")
	}
	text := perr.Error()
	for _, w := range []string{`test.toml:4: jobs[0].name: `, `test.toml:9: jobs[1].command[0]: `} {
		if !strings.Contains(text, w) {
			t.Errorf("parse errors lack %q:\n%s", w, text)
		}
	}
	if verr != nil {
		t.Errorf("validate: %v, want nothing more than what could not be decoded", verr)
	}
}

// A job's gpus is a number or a list of indices; gpu_memory a size; the
// Slurm runner takes a number only, and not twice.
func TestJobGPUs(t *testing.T) {
	base := "[[jobs]]\nname = \"a\"\ncommand = [\"true\"]\n"
	for _, tc := range []struct {
		doc     string
		count   int
		indices []int
		memory  int64
		err     string
	}{
		{doc: "gpus = 2\ngpu_memory = \"20GiB\"", count: 2, memory: 20 << 30},
		{doc: "gpus = [0, 3]", count: 2, indices: []int{0, 3}},
		{doc: "gpu_memory = \"8GiB\"", memory: 8 << 30},
		{doc: "", count: 0},
		{doc: "gpus = 0", err: "test.toml:4: jobs[0].gpus: want a number of GPUs from 1 to 64"},
		{doc: "gpus = [1, 1]", err: "jobs[0].gpus: GPU 1 is listed twice"},
		{doc: "gpus = [\"a\"]", err: `jobs[0].gpus: want GPU indices like [0, 3]`},
		{doc: "gpus = \"two\"", err: `jobs[0].gpus: want a number of GPUs (gpus = 2) or their indices (gpus = [0, 3]), got string "two"`},
		{doc: "gpus = []", err: "want 1 to 64 GPU indices"},
		{doc: "runner = \"slurm\"\ngpus = [0]", err: "jobs[0].gpus: Slurm allocates the GPUs itself"},
		{doc: "runner = \"slurm\"\ngpus = 2\n[jobs.slurm]\ngpus = 2", err: "give only one of gpus and slurm.gpus"},
		{doc: "runner = \"slurm\"\ngpu_memory = \"1GiB\"", err: "jobs[0].gpu_memory: Slurm chooses the GPUs"},
		{doc: "gpuz = 2", err: `jobs[0].gpuz: unknown key (did you mean "gpus"?)`},
	} {
		c, err := parse(t, base+tc.doc+"\n")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want %q", tc.doc, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.doc, err)
			continue
		}
		g := c.Jobs[0].GPUs
		if g.Count != tc.count || !slices.Equal(g.Indices, tc.indices) || int64(c.Jobs[0].GPUMemory) != tc.memory {
			t.Errorf("%q: got %+v %d", tc.doc, g, c.Jobs[0].GPUMemory)
		}
	}
}

// A job's host names one [[hosts]] entry, its hosts several or "any";
// each error names the key and what is wrong.
func TestJobHosts(t *testing.T) {
	hosts := "[[hosts]]\nname = \"gpu1\"\naddress = \"g1\"\n[[hosts]]\nname = \"gpu2\"\naddress = \"g2\"\n"
	job := "[[jobs]]\nname = \"a\"\ncommand = [\"true\"]\n"
	for _, tc := range []struct {
		doc, want, err string
	}{
		{doc: hosts + job + "host = \"gpu2\"", want: "gpu2"},
		{doc: hosts + job + "hosts = [\"gpu2\", \"gpu1\"]", want: "gpu2,gpu1"},
		{doc: hosts + job + "hosts = \"any\"", want: "any"},
		{doc: job + "host = \"gpu2\"", err: `jobs[0].host: "gpu2" is not a [[hosts]] name (there is no [[hosts]] entry)`},
		{doc: hosts + job + "hosts = [\"gpu1\", \"gpu9\"]", err: `jobs[0].hosts[1]: "gpu9" is not a [[hosts]] name (the hosts are gpu1, gpu2)`},
		{doc: hosts + job + "hosts = \"gpu1\"", err: `jobs[0].hosts: want "any" or a list of [[hosts]] names, got "gpu1" (one host is host = "gpu1")`},
		{doc: hosts + job + "hosts = []", err: `jobs[0].hosts: want "any" or a list of [[hosts]] names, got an empty list`},
		{doc: hosts + job + "host = \"gpu1\"\nhosts = [\"gpu2\"]", err: "jobs[0].hosts: give host (one) or hosts (several), not both"},
		{doc: hosts + job + "host = \"gpu1\"\nrunner = \"slurm\"", err: `jobs[0].runner: a Slurm job runs where Slurm puts it`},
	} {
		c, err := parse(t, tc.doc+"\n")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want %q", tc.doc, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.doc, err)
			continue
		}
		got := c.Jobs[0].Host
		if got == "" {
			got = strings.Join(c.Jobs[0].Hosts, ",")
		}
		if got != tc.want {
			t.Errorf("%q: hosts %q, want %q", tc.doc, got, tc.want)
		}
	}
}

// One typo is one error: "comand" is an unknown key (did you mean
// "command"?), and the job's missing command that follows from it is not
// told as a second problem.
func TestATypoIsOneError(t *testing.T) {
	c := DefaultConfig()
	err := c.Parse("test.toml", strings.NewReader("[[jobs]]\nname = \"train\"\ncomand = [\"python3\", \"train.py\"]\n"))
	var all Errors
	errors.As(err, &all)
	if verr := c.Validate(); verr != nil {
		var more Errors
		errors.As(verr, &more)
		all = append(all, more...)
	}
	if len(all) != 1 || !strings.Contains(all[0].Error(), `test.toml:3: jobs[0].comand: unknown key (did you mean "command"?)`) {
		t.Errorf("got %d errors: %v", len(all), all)
	}
	// Without the typo the missing command is told.
	_, err = parse(t, "[[jobs]]\nname = \"train\"\n")
	if err == nil || !strings.Contains(err.Error(), "a job needs a command") {
		t.Errorf("a job without a command: %v", err)
	}
}

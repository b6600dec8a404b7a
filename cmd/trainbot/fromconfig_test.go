package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/config"
)

// convert parses doc as a config file and converts it as load does: the
// config's own errors and the conversion's, sorted, at once.
func convert(t *testing.T, doc string, environ ...string) (*botConfig, error) {
	t.Helper()
	c := config.DefaultConfig()
	declareTransports(c)
	var all config.Errors
	collect := func(err error) {
		var errs config.Errors
		if errors.As(err, &errs) {
			all = append(all, errs...)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	collect(c.Parse("test.toml", strings.NewReader(doc)))
	collect(c.ApplyEnv(environ))
	collect(c.Validate())
	bc, errs := fromConfig(c, all)
	all = append(all, errs...)
	if len(all) > 0 {
		return bc, all.Sorted()
	}
	return bc, nil
}

func TestExampleConfigConverts(t *testing.T) {
	c, err := config.Load(filepath.Join("..", "..", "config.example.toml"), declareTransports)
	if err != nil {
		t.Fatal(err)
	}
	bc, errs := fromConfig(c, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	j := bc.jobs[0]
	if j.Name != "mnist" || j.StopGrace != 30*time.Second || j.Params["batch_size"].Default != "64" || j.Params["lr"].Env != "LEARNING_RATE" {
		t.Errorf("unexpected job %+v", j)
	}
}

func TestJobsConvert(t *testing.T) {
	dir := t.TempDir()
	bc, err := convert(t, `[[jobs]]
name = "t"
command = ["python3", "t.py", "{opt}", "{batch_size}"]
dir = "`+dir+`"
max_log_size = "512MiB"
stall_after = "1d"
on_oom = { retry = 2, halve = "batch_size" }
[jobs.params.opt]
type = "string"
choices = ["adam", "sgd"]
default = "adam"
[jobs.params.batch_size]
type = "int"
default = 64
[jobs.params.lr]
type = "float"
default = 0.001

[[schedules]]
name = "nightly"
spec = "30 2 * * *"
action = "start"
params = { batch_size = 128 }
`)
	if err != nil {
		t.Fatal(err)
	}
	j := bc.jobs[0]
	if j.MaxLogBytes != 512<<20 || j.StallAfter != 24*time.Hour || j.Dir != dir {
		t.Errorf("got %d %s %s", j.MaxLogBytes, j.StallAfter, j.Dir)
	}
	if j.Params["lr"].Default != "0.001" || len(j.Params["opt"].Choices) != 2 {
		t.Errorf("params %+v", j.Params)
	}
	if o := j.OnOOM; o == nil || o.Retry != 2 || o.Halve != "batch_size" {
		t.Errorf("on_oom %+v", j.OnOOM)
	}
	ss := bc.schedules
	if len(ss) != 1 || ss[0].Job != "t" || ss[0].Params["batch_size"] != "128" || ss[0].Action != config.ActionStart {
		t.Errorf("schedules %+v", ss)
	}
}

func TestJobErrorsHaveLines(t *testing.T) {
	_, err := convert(t, `[[jobs]]
name = "a"

[[jobs]]
name = "b"
command = ["x", "{missing}"]
patterns = ["loss=(?P<loss"]
on_oom = { retry = 0, halve = "bs" }
[jobs.params.bs]
type = "int"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:1: jobs[0].command: a job needs a command`,
		`test.toml:7: jobs[1].patterns[0]: `,
		`test.toml:8: jobs[1].on_oom.retry: want 1..10 retries, got 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	_, err = convert(t, "[[jobs]]\nname = \"b\"\ncommand = [\"x\", \"{missing}\"]\n")
	if text := errText(err); !strings.Contains(text, `test.toml:3: jobs[0].command: "{missing}" refers to {missing}`) {
		t.Errorf("errors lack the command's placeholder:\n%s", text)
	}
}

// Every config error is told at its own key's line, once: nothing that
// follows from a value that could not be read.
func TestConfigErrorsDoNotCascade(t *testing.T) {
	_, err := convert(t, `[auth]
operators = ["me", 5]

[[jobs]]
name = 3
command = "x"

[[jobs]]
name = "b"
command = ["x"]
[jobs.params.bs]
type = "int"
default = "abc"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:2: auth.operators[0]: want an integer, got string "me"`,
		`test.toml:5: jobs[0].name: want a string, got integer 3`,
		`test.toml:6: jobs[0].command: want an array, got string "x"`,
		`test.toml:13: jobs[1].params.bs.default: "abc": not an integer`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	for _, not := range []string{"is not a user id", "a job needs a name", "a job needs a command"} {
		if strings.Contains(text, not) {
			t.Errorf("errors cascade (%q):\n%s", not, text)
		}
	}
	if n := strings.Count(text, "\n") + 1; n != 4 {
		t.Errorf("%d errors, want 4:\n%s", n, text)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPushEntriesConvert(t *testing.T) {
	bc, err := convert(t, `
[[push]]
kind = "wecom"
name = "lab"
key = "693a91f6-7xxx"
alerts = ["oom", "failed"]
quiet_hours = "23:00-08:00"
quiet_min_severity = "critical"

[[push]]
kind = "feishu"
url = "https://open.feishu.cn/open-apis/bot/v2/hook/tok-123"
secret = "s3cret"
progress = true

[[push]]
kind = "dingtalk"
key = "dt-token"
secret = "SECabc"
per_minute = 10
timeout = "5s"

[[quiet]]
chat = "telegram:123456789"
quiet_hours = "22:30-07:00"
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(bc.channels) != 3 {
		t.Fatalf("%d channels", len(bc.channels))
	}
	w, f, d := bc.channels[0], bc.channels[1], bc.channels[2]
	if w.opts.Name != "lab" || w.opts.URL != "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx" || strings.Join(w.alerts, ",") != "oom,failed" ||
		w.quiet.String() != "23:00-08:00" || w.quiet.MinSeverity != chat.SeverityCritical || w.opts.Timeout != 10*time.Second {
		t.Errorf("wecom %+v", w)
	}
	if f.opts.Name != "feishu" || f.opts.Secret != "s3cret" || f.alerts != nil || !f.progress {
		t.Errorf("feishu %+v", f)
	}
	if d.opts.URL != "https://oapi.dingtalk.com/robot/send?access_token=dt-token" || d.opts.Secret != "SECabc" || d.opts.PerMinute != 10 || d.opts.Timeout != 5*time.Second {
		t.Errorf("dingtalk %+v", d)
	}
	q := bc.quiet[chat.ChatKey{Transport: "telegram", Chat: 123456789}]
	if q.String() != "22:30-07:00" || q.MinSeverity != chat.SeverityWarning {
		t.Errorf("quiet %+v", q)
	}
}

func TestPushErrorsNameTheEntryAndHideSecrets(t *testing.T) {
	_, err := convert(t, `
[[push]]
kind = "wechat"

[[push]]
kind = "wecom"
name = "ops"
key = "SECRETKEY2"
secret = "SECRETSECRET"
alerts = ["oom", "explosion"]
quiet_hours = "23:00-23:00"
per_minute = 50

[[push]]
kind = "webhook"
key = "SECRETKEY3"

[[push]]
kind = "dingtalk"
key = "tok"
quiet_hours = "23:00-08:00"
quiet_min_severity = "loud"

[[push]]
kind = "wecom"
name = "lab"
url = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=SECRETKEY1"
key = "SECRETKEY1"

[[quiet]]
chat = "telegram"
quiet_hours = "late"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:3: push[0]: kind: want wecom, feishu, dingtalk, webhook, slack, discord, email, ntfy, bark, serverchan or pushplus, got "wechat" (WeCom is "wecom")`,
		`test.toml:9: push[1] (ops): WeCom group robots do not sign messages`,
		`test.toml:28: push[4] (lab): give only one of url, key`,
		`push[1] (ops): alerts: unknown kind "explosion"`,
		`push[1] (ops): "23:00-23:00": the span starts and ends at the same time`,
		`push[1] (ops): per_minute: want 1..20 for wecom`,
		`push[2]: key: webhooks have no key: give the url`,
		`push[3]: quiet_min_severity: want info, warning or critical, got "loud"`,
		`quiet[0] (telegram): chat: want "transport:id"`,
		`quiet[0] (telegram): want a span of local time such as "23:00-08:00", got "late"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"SECRETKEY1", "SECRETKEY2", "SECRETKEY3", "SECRETSECRET"} {
		if strings.Contains(text, secret) {
			t.Errorf("errors show %s:\n%s", secret, text)
		}
	}
}

func TestScheduleSpecsAndParamsAreChecked(t *testing.T) {
	_, err := convert(t, `
[[jobs]]
name = "mnist"
command = ["python3", "train.py", "{bs}"]
[jobs.params.bs]
type = "int"
default = 64
min = 1

[[schedules]]
name = "morning"
spec = "CRON_TZ=Asia/Shanghai 0 9 * * *"
action = "report"

[[schedules]]
name = "nightly"
spec = "61 * * * *"
action = "start"
job = "mnist"
params = { bs = 0 }

[[schedules]]
name = "tz"
spec = "CRON_TZ="
action = "report"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:17: schedules[1] (nightly): spec "61 * * * *": end of range (61) above maximum (59): 61`,
		`test.toml:20: schedules[1] (nightly): params: bs: "0" is below the minimum 1`,
		`test.toml:24: schedules[2] (tz): spec "CRON_TZ=": CRON_TZ= names no time zone`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "schedules[0] (morning)") {
		t.Errorf("a good schedule was refused:\n%s", text)
	}
}

// The transports know nothing of the router: `go list -deps` of each
// transport package has no bot/command (nor notify, deliver, render).
func TestTransportsDoNotImportTheRouter(t *testing.T) {
	for _, pkg := range []string{"../../bot/telegram", "../../bot/push", "../../bot/console"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"/bot/command", "/bot/notify", "/bot/deliver", "/bot/render", "/trainer", "/store"} {
				if strings.HasPrefix(dep, "github.com/trainbot/trainbot") && strings.HasSuffix(dep, banned) {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}

func TestSlurmJobsConvert(t *testing.T) {
	bc, err := convert(t, `[[jobs]]
name = "big"
command = ["python3", "train.py", "--bs", "{bs}"]
runner = "slurm"
[jobs.params.bs]
type = "int"
default = 64
[jobs.slurm]
partition = "gpu"
time = "1-00:00:00"
nodes = 1
ntasks_per_node = 4
cpus_per_task = 8
gpus = 4
mem = "64G"
account = "lab"
qos = "normal"
extra_args = ["--constraint=a100", "--exclusive"]
`)
	if err != nil {
		t.Fatal(err)
	}
	j := bc.jobs[0]
	o := j.Slurm
	if j.Runner != "slurm" || o.Partition != "gpu" || o.Time != "1-00:00:00" || o.Nodes != 1 || o.NtasksPerNode != 4 ||
		o.CPUsPerTask != 8 || o.GPUs != "4" || o.Mem != "64G" || o.Account != "lab" || o.QOS != "normal" || len(o.ExtraArgs) != 2 {
		t.Errorf("got runner %q, %+v", j.Runner, o)
	}

	_, err = convert(t, `[[jobs]]
name = "a"
command = ["x"]
runner = "cluster"

[[jobs]]
name = "b"
command = ["x"]
[jobs.slurm]
partition = "gpu"

[[jobs]]
name = "c"
command = ["x"]
runner = "slurm"
[jobs.slurm]
time = "2 hours"
extra_args = ["--output=/tmp/x"]
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:4: jobs[0].runner: "cluster": want "local" (this host) or "slurm" (sbatch)`,
		`test.toml:9: jobs[1].slurm: Slurm options apply to a job with runner = "slurm"`,
		`test.toml:17: jobs[2].slurm.time: "2 hours": want Slurm's [D-]HH:MM:SS`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

func TestAlertRulesConvert(t *testing.T) {
	bc, err := convert(t, `[[alerts]]
metric = "loss"
when = "no_improvement"
for = "20 steps"

[[jobs]]
name = "a"
command = ["x"]
[[jobs.alerts]]
metric = "gpu_util"
when = "below"
value = 10
for = "10m"
message = "GPU idles"
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(bc.alerts) != 1 || bc.alerts[0].ForSteps != 20 || len(bc.jobs[0].Alerts) != 1 || bc.jobs[0].Alerts[0].ForTime != 10*time.Minute || bc.jobs[0].Alerts[0].Message != "GPU idles" {
		t.Errorf("alerts %+v, job alerts %+v", bc.alerts, bc.jobs[0].Alerts)
	}
	_, err = convert(t, `[[alerts]]
metric = "loss"
when = "above"

[[alerts]]
metric = "tokens"
when = "rate_below"
value = 5
for = "3 steps"

[[alerts]]
when = "below"
value = 1
for = "often"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:1: alerts[0]: value: above needs a value to compare with`,
		`test.toml:9: alerts[1].for: rate_below needs a time window`,
		`test.toml:14: alerts[2].for: "often": want a number of steps`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

// The layers of load, each over the one before: the file, then the
// environment, then the flags --data and --log-level.
func TestFlagsOverrideEnvironmentOverridesFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trainbot.toml")
	doc := fmt.Sprintf("data_dir = %q\nlog_level = \"warn\"\n", filepath.Join(dir, "file"))
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := []string{"TRAINBOT_DATA_DIR=" + filepath.Join(dir, "env"), "TRAINBOT_LOG_LEVEL=error"}
	for _, c := range []struct {
		name          string
		environ, args []string
		data, level   string
	}{
		{"file", nil, nil, "file", "warn"},
		{"environment over file", environ, nil, "env", "error"},
		{"flags over environment", environ, []string{"--data", filepath.Join(dir, "flag"), "--log-level", "debug"}, "flag", "debug"},
		{"one flag, the other from the environment", environ, []string{"--log-level", "info"}, "env", "info"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cf configFlags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cf.register(fs, false)
			if err := fs.Parse(append([]string{"--config", path}, c.args...)); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cfg, _, code := cf.load(env{stdout: io.Discard, stderr: &stderr, environ: c.environ})
			if cfg == nil {
				t.Fatalf("load: exit %d: %s", code, stderr.String())
			}
			if want := filepath.Join(dir, c.data); cfg.DataDir != want {
				t.Errorf("data_dir: got %s, want %s", cfg.DataDir, want)
			}
			if cfg.LogLevel != c.level {
				t.Errorf("log_level: got %s, want %s", cfg.LogLevel, c.level)
			}
		})
	}
}

// on_failure, checkpoint and resume become the job's; their errors are at
// their keys' lines.
func TestOnFailureFromConfig(t *testing.T) {
	bc, err := convert(t, `[[jobs]]
name = "t"
command = ["python3", "train.py"]
dir = "/tmp"
checkpoint = "ckpt/*.pt"
resume = ["--resume", "{checkpoint}"]
on_failure = { retry = 3, when = ["crashed", "preempted"], backoff = "1m", require_checkpoint = true }
`)
	if err != nil {
		t.Fatal(err)
	}
	j := bc.jobs[0]
	if o := j.OnFailure; o == nil || o.Retry != 3 || len(o.When) != 2 || o.Backoff != time.Minute || !o.RequireCheckpoint || j.Checkpoint != "ckpt/*.pt" || len(j.Resume) != 2 {
		t.Errorf("job %+v on_failure %+v", j, j.OnFailure)
	}
	_, err = convert(t, `[[jobs]]
name = "t"
command = ["python3", "train.py"]
checkpoint = "ckpt/*.pt"
on_failure = { retry = 0, when = ["reboot"] }
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:5: jobs[0].on_failure.retry: want 1..100, got 0`,
		`test.toml:5: jobs[0].on_failure.when: "reboot": want some of crashed, preempted, node_failure, host_reboot, host_oom_killed, timeout, interrupted`,
		`jobs[0].resume: say how the script is given its checkpoint`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

package config

import (
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

func withEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	t.Cleanup(func() { lookupEnv = old })
}

func TestPushEntries(t *testing.T) {
	withEnv(t, map[string]string{"FEISHU_URL": "https://open.feishu.cn/open-apis/bot/v2/hook/tok-123", "FEISHU_SECRET": "s3cret"})
	doc := `
[[push]]
kind = "wecom"
name = "lab"
key = "693a91f6-7xxx"
alerts = ["oom", "failed"]
quiet_hours = "23:00-08:00"
quiet_min_severity = "critical"

[[push]]
kind = "feishu"
url_env = "FEISHU_URL"
secret_env = "FEISHU_SECRET"
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
`
	c, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	chs, err := c.PushChannels()
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 3 {
		t.Fatalf("%d channels", len(chs))
	}
	w, f, d := chs[0], chs[1], chs[2]
	if w.Name != "lab" || w.URL != "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx" || strings.Join(w.Alerts, ",") != "oom,failed" ||
		w.Quiet.String() != "23:00-08:00" || w.Quiet.MinSeverity != chat.SeverityCritical || w.Timeout != 10*time.Second {
		t.Errorf("wecom %+v", w)
	}
	if f.Name != "feishu" || f.URL != "https://open.feishu.cn/open-apis/bot/v2/hook/tok-123" || f.Secret != "s3cret" || f.Alerts != nil || !f.Progress {
		t.Errorf("feishu %+v", f)
	}
	if d.URL != "https://oapi.dingtalk.com/robot/send?access_token=dt-token" || d.Secret != "SECabc" || d.PerMinute != 10 || d.Timeout != 5*time.Second {
		t.Errorf("dingtalk %+v", d)
	}
	q := c.QuietChats()[chat.ChatKey{Transport: "telegram", Chat: 123456789}]
	if q.String() != "22:30-07:00" || q.MinSeverity != chat.SeverityWarning {
		t.Errorf("quiet %+v", q)
	}
}

func TestPushErrorsNameTheEntryAndHideSecrets(t *testing.T) {
	withEnv(t, map[string]string{})
	doc := `
[[push]]
kind = "wechat"

[[push]]
kind = "wecom"
name = "lab"
url = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=SECRETKEY1"
key = "SECRETKEY1"

[[push]]
kind = "feishu"
url_env = "NOT_SET_URL"

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
url = "ftp://SECRETHOST/x"

[[push]]
kind = "dingtalk"
key = "tok"
quiet_min_severity = "loud"

[[push]]
kind = "dingtalk"
key = "tok2"

[[quiet]]
chat = "telegram"
quiet_hours = "late"
`
	_, err := parse(t, doc)
	if err == nil {
		t.Fatal("no error")
	}
	text := err.Error()
	for _, want := range []string{
		`test.toml:3: push[0]: kind: want wecom, feishu, dingtalk or webhook, got "wechat" (WeCom is "wecom")`,
		`test.toml:9: push[1] (lab): give only one of url, key`,
		`test.toml:13: push[2]: url_env: the environment variable NOT_SET_URL is not set`,
		`test.toml:19: push[3] (ops): WeCom group robots do not sign messages`,
		`push[3] (ops): alerts: unknown kind "explosion"`,
		`push[3] (ops): "23:00-23:00": the span starts and ends at the same time`,
		`push[3] (ops): per_minute: want 1..20 for wecom`,
		`push[4]: url: want an http(s):// webhook URL (the value is not shown: it is a secret)`,
		`push[5]: quiet_min_severity: want info, warning or critical, got "loud"`,
		`push[6]: channel dingtalk:dingtalk is already defined by push[5]`,
		`quiet[0] (telegram): chat: want "transport:id"`,
		`quiet[0] (telegram): want a span of local time such as "23:00-08:00", got "late"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"SECRETKEY1", "SECRETKEY2", "SECRETSECRET", "SECRETHOST"} {
		if strings.Contains(text, secret) {
			t.Errorf("errors show %s:\n%s", secret, text)
		}
	}
}

func TestScheduleErrorsNameTheSchedule(t *testing.T) {
	doc := `
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

[[schedules]]
name = "other"
spec = "@daily"
action = "start"
job = "resnet"

[[schedules]]
name = "odd"
spec = "@hourly"
action = "reboot"

[[schedules]]
name = "morning"
spec = "@hourly"
action = "report"
job = "mnist"
`
	_, err := parse(t, doc)
	if err == nil {
		t.Fatal("no error")
	}
	text := err.Error()
	for _, want := range []string{
		`test.toml:17: schedules[1] (nightly): spec "61 * * * *": end of range (61) above maximum (59): 61`,
		`test.toml:20: schedules[1] (nightly): params: parameter bs="0": below the minimum 1`,
		`test.toml:24: schedules[2] (tz): spec "CRON_TZ=": CRON_TZ= names no time zone`,
		`test.toml:31: schedules[3] (other): job: no job named "resnet"; the jobs are mnist`,
		`test.toml:36: schedules[4] (odd): action: want "report" or "start", got "reboot"`,
		`schedules[5] (morning): name "morning" is already used by schedules[0]`,
		`schedules[5] (morning): job and params apply to action = "start"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "schedules[0] (morning): spec") {
		t.Errorf("a good spec was refused:\n%s", text)
	}
}

func TestSchedulesAndOnOOMConvert(t *testing.T) {
	doc := `
[[jobs]]
name = "mnist"
command = ["python3", "train.py", "{batch_size}"]
on_oom = { retry = 2, halve = "batch_size" }
[jobs.params.batch_size]
type = "int"
default = 64

[[schedules]]
name = "nightly"
spec = "30 2 * * *"
action = "start"
params = { batch_size = 128 }
`
	c, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.ScheduleEntries()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Job != "mnist" || ss[0].Params["batch_size"] != "128" || ss[0].Action != ActionStart {
		t.Errorf("schedules %+v", ss)
	}
	jobs, err := c.TrainerJobs()
	if err != nil {
		t.Fatal(err)
	}
	if o := jobs[0].OnOOM; o == nil || o.Retry != 2 || o.Halve != "batch_size" {
		t.Errorf("on_oom %+v", jobs[0].OnOOM)
	}
}

func TestOnOOMErrors(t *testing.T) {
	doc := `
[[jobs]]
name = "a"
command = ["x"]
on_oom = { retry = 0, halve = "lr" }
[jobs.params.lr]
type = "float"
default = 0.1

[[jobs]]
name = "b"
command = ["x"]
on_oom = { retry = 2, halve = "batch" }
`
	_, err := parse(t, doc)
	text := err.Error()
	for _, want := range []string{
		`test.toml:5: jobs[0].on_oom.retry: want 1..10 retries, got 0`,
		`test.toml:5: jobs[0].on_oom.halve: parameter lr is "float"; only an int parameter can be halved`,
		`test.toml:13: jobs[1].on_oom.halve: "batch" is not a parameter of this job`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

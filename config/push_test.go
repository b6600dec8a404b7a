package config

import (
	"strings"
	"testing"
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
	var eps []PushEndpoint
	for i := range c.Push {
		ep, errs := c.PushEndpoint(i)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		eps = append(eps, ep)
	}
	if ep := eps[0]; ep.Key != "693a91f6-7xxx" || ep.KeyField != "key" || ep.URL != "" || c.Push[0].ChannelName() != "wecom:lab" {
		t.Errorf("wecom %+v", ep)
	}
	if ep := eps[1]; ep.URL != "https://open.feishu.cn/open-apis/bot/v2/hook/tok-123" || ep.Secret != "s3cret" || c.Push[1].ChannelName() != "feishu:feishu" {
		t.Errorf("feishu %+v", ep)
	}
	if ep := eps[2]; ep.Key != "dt-token" || ep.Secret != "SECabc" {
		t.Errorf("dingtalk %+v", ep)
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
	// What kinds, alert kinds, rate limits and quiet hours mean is checked
	// in cmd/trainbot (fromconfig_test.go).
	for _, want := range []string{
		`test.toml:13: push[2]: url_env: the environment variable NOT_SET_URL is not set`,
		`push[4]: url: want an http(s):// webhook URL (the value is not shown: it is a secret)`,
		`push[6]: channel dingtalk:dingtalk is already defined by push[5]`,
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

[[schedules]]
name = "morning"
spec = "0 9 * * *"
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
		`test.toml:15: schedules[1] (other): job: no job named "resnet"; the jobs are mnist`,
		`test.toml:20: schedules[2] (odd): action: want "report" or "start", got "reboot"`,
		`schedules[3] (morning): name "morning" is already used by schedules[0]`,
		`schedules[3] (morning): job and params apply to action = "start"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

func TestOnOOMErrors(t *testing.T) {
	doc := `
[[jobs]]
name = "a"
command = ["x"]
on_oom = { retry = 2, halve = "lr" }
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
		`test.toml:5: jobs[0].on_oom.halve: parameter lr is "float"; only an int parameter can be halved`,
		`test.toml:13: jobs[1].on_oom.halve: "batch" is not a parameter of this job`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/config"

	"github.com/trainbot/trainbot/bot/command"
)

// [auth] reaches the router: the Telegram ids, and each messenger's
// members (an operator listed as a viewer too is an operator), from the
// sections the transports declare; serve opens the sections that are on,
// in the order of bot/messengers.
func TestAccessAndTransportsFromConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`data_dir = "`+dir+`"
[wecom]
bot_id = "aib"
secret = "s"
[feishu]
app_id = "cli_a"
app_secret = "s"
[dingtalk]
client_id = "d"
client_secret = "s"
[auth]
operators = [5]
wecom_operators = ["zhangsan"]
wecom_viewers = ["zhangsan", "lisi"]
feishu_viewers = ["ou_1"]
dingtalk_operators = ["manager1"]
`), 0o600)
	cfg, bc, err := parseConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := accessFromConfig(cfg)
	for _, c := range []struct {
		transport, id string
		want          command.Role
	}{
		{"wecom", "zhangsan", command.RoleOperator}, // operator wins over viewer
		{"wecom", "lisi", command.RoleViewer},
		{"feishu", "ou_1", command.RoleViewer},
		{"dingtalk", "manager1", command.RoleOperator},
		{"dingtalk", "zhangsan", command.RoleNone},
	} {
		if got := a.Members[c.transport][c.id]; got != c.want {
			t.Errorf("%s %s: got %d, want %d", c.transport, c.id, got, c.want)
		}
	}
	if len(a.Operators) != 1 {
		t.Errorf("telegram operators %v", a.Operators)
	}
	ts, err := openTransports(cfg, a, nil, bc.langs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ts {
		names = append(names, m.Name())
	}
	if len(names) != 3 || names[0] != "wecom" || names[1] != "feishu" || names[2] != "dingtalk" {
		t.Errorf("transports %q", names)
	}
	if !served(cfg, "feishu") || served(cfg, "telegram") {
		t.Errorf("served: feishu %v, telegram %v", served(cfg, "feishu"), served(cfg, "telegram"))
	}
}

// check says, for each messenger section, what the console must enable,
// and a bad section is an error at its key.
func TestCheckSaysWhatTheMessengersNeed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`data_dir = "`+dir+`"
[feishu]
app_id = "cli_abc"
app_secret_env = "TEST_FEISHU_SECRET_UNSET"
`), 0o600)
	code, _, stderr := trainbot(t, "", "check", "--config", path)
	if code != 1 || !strings.Contains(stderr, "feishu.app_secret_env: app_secret_env: the environment variable TEST_FEISHU_SECRET_UNSET is not set") {
		t.Errorf("check: %d\n%s", code, stderr)
	}
	os.WriteFile(path, []byte(`data_dir = "`+dir+`"
[feishu]
app_id = "cli_abc"
app_secret = "s"
[wecom]
bot_id = "aib"
secret = "s"
`), 0o600)
	code, out, stderr := trainbot(t, "", "check", "--config", path)
	if code != 0 || !strings.Contains(out, "[feishu] is on; the app needs") || !strings.Contains(out, "card.action.trigger") ||
		!strings.Contains(out, "[wecom] is on") || strings.Contains(out, "[dingtalk]") {
		t.Errorf("check: %d\n%s\n%s", code, out, stderr)
	}
}

// A reload names the sections that changed and take effect at the
// restart: any transport's, [http], [gpu].
func TestRestartSections(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) *config.Config {
		t.Helper()
		path := filepath.Join(dir, "c.toml")
		os.WriteFile(path, []byte(`data_dir = "`+dir+`"`+"\n"+body), 0o600)
		cfg, _, err := parseConfig(path, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	was := load("[wecom]\nbot_id = \"a\"\nsecret = \"s\"\n")
	if got := restartSections(was, load("[wecom]\nbot_id = \"a\"\nsecret = \"s\"\n[auth]\nwecom_operators = [\"x\"]\n")); len(got) != 0 {
		t.Errorf("only [auth] changed: %q", got)
	}
	got := restartSections(was, load("[wecom]\nbot_id = \"b\"\nsecret = \"s\"\n[gpu]\ninterval = \"5s\"\n"))
	if strings.Join(got, ", ") != "[wecom], [gpu]" {
		t.Errorf("got %q, want [wecom], [gpu]", got)
	}
}

// check says what a job asks of the shared GPUs, and refuses a bad request
// at its key and line.
func TestCheckSaysWhatAJobAsksOfTheGPUs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`data_dir = "`+dir+`"
[[jobs]]
name = "train"
command = ["true"]
gpus = [0, 3]
gpu_memory = "20GiB"
`), 0o600)
	code, out, stderr := trainbot(t, "", "check", "--config", path)
	if code != 0 || !strings.Contains(out, "job train asks for GPUs 0,3 with 20.0 GiB free: each start gets free ones (quiet for [gpu] free_for 1m0s") {
		t.Errorf("check: %d\n%s\n%s", code, out, stderr)
	}
	os.WriteFile(path, []byte(`data_dir = "`+dir+`"
[[jobs]]
name = "train"
command = ["true"]
gpus = 0
`), 0o600)
	if code, _, stderr := trainbot(t, "", "check", "--config", path); code != 1 || !strings.Contains(stderr, "c.toml:5: jobs[0].gpus: want a number of GPUs from 1 to 64") {
		t.Errorf("check of gpus = 0: %d\n%s", code, stderr)
	}
}

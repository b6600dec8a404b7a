package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/config"
)

func TestAccessFromConfig(t *testing.T) {
	a := accessFromConfig(config.AuthConfig{Operators: []int64{5}, WeComOperators: []string{"zhangsan"}, WeComViewers: []string{"zhangsan", "lisi"},
		FeishuViewers: []string{"ou_1"}, DingTalkOperators: []string{"manager1"}})
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
}

func TestMessengersFromConfig(t *testing.T) {
	c := config.DefaultConfig()
	c.WeCom = config.WeComConfig{BotID: "aib", Secret: "s", URL: config.DefaultWeComURL}
	c.Feishu = config.FeishuConfig{AppID: "cli_a", AppSecret: "s"}
	c.DingTalk = config.DingTalkConfig{ClientID: "d", ClientSecret: "s", APIURL: config.DefaultDingTalkAPIURL, OAPIURL: config.DefaultDingTalkOAPIURL}
	ms, err := messengers(c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name())
	}
	if len(names) != 3 || names[0] != "wecom" || names[1] != "feishu" || names[2] != "dingtalk" {
		t.Errorf("transports %q", names)
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

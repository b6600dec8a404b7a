package config

import (
	"slices"
	"strings"
	"testing"
)

func TestMessengerSections(t *testing.T) {
	withEnv(t, map[string]string{"WECOM_BOT_SECRET": "w-secret", "DT_SECRET": "d-secret"})
	c, err := parse(t, `
[wecom]
bot_id = "aib123"
secret_env = "WECOM_BOT_SECRET"
[feishu]
app_id = "cli_abc"
app_secret = "f-secret"
domain = "lark"
[dingtalk]
client_id = "dingabc"
client_secret_env = "DT_SECRET"
[auth]
wecom_operators = ["zhangsan"]
feishu_viewers = ["ou_7d8a6e6df7621556ce0d21922b676706"]
dingtalk_operators = ["manager4220"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.WeCom.Secret != "w-secret" || c.WeCom.URL != DefaultWeComURL {
		t.Errorf("wecom: %+v", c.WeCom)
	}
	if c.DingTalk.ClientSecret != "d-secret" || c.DingTalk.RobotCode != "dingabc" || c.DingTalk.APIURL != DefaultDingTalkAPIURL {
		t.Errorf("dingtalk: %+v", c.DingTalk)
	}
	if got := c.SecretsInFile(); !slices.Contains(got, "feishu.app_secret") || slices.Contains(got, "wecom.secret") {
		t.Errorf("secrets in the file: %q", got)
	}
	if env := c.SecretEnv(); !slices.Contains(env, "WECOM_BOT_SECRET") || !slices.Contains(env, "DT_SECRET") {
		t.Errorf("the secrets' variables are not kept from runs: %q", env)
	}
	if len(c.Messengers()) != 3 {
		t.Errorf("check's capabilities: %v", c.Messengers())
	}
}

func TestMessengerSectionErrors(t *testing.T) {
	withEnv(t, map[string]string{})
	for _, tc := range []struct{ doc, want string }{
		{"[wecom]\nbot_id = \"aib\"", "test.toml:1: wecom: [wecom] needs secret"},
		{"[wecom]\nsecret = \"x\"", "wecom.secret: secret is set but bot_id is not"},
		{"[wecom]\nbot_id = \"a\"\nsecret_env = \"NOPE\"", "secret_env: the environment variable NOPE is not set"},
		{"[wecom]\nbot_id = \"a\"\nsecret = \"x\"\nurl = \"https://x\"", `wecom.url: want a URL like wss://host, got "https://x"`},
		{"[feishu]\napp_id = \"abc\"\napp_secret = \"x\"", `starts with cli_, got "abc"`},
		{"[feishu]\napp_id = \"cli_a\"\napp_secret = \"x\"\ndomain = \"larksuite\"", `feishu.domain: want a URL like https://host, got "larksuite"`},
		{"[dingtalk]\nclient_id = \"d\"\nclient_secret = \"x\"\nclient_secret_env = \"Y\"", "give only one of client_secret, client_secret_env"},
		{"[auth]\nfeishu_operators = [\"ou x\"]", `auth.feishu_operators: "ou x" is not a user id`},
	} {
		_, err := parse(t, tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.doc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\"x\"") {
			t.Errorf("%q: a secret is in the error: %v", tc.doc, err)
		}
	}
}

package messengers_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/dingtalk"
	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/bot/wecom"
	"github.com/trainbot/trainbot/config"
)

// withEnv sets variables for the test (not parallel: the environment is
// the process's).
func withEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

func declared() *config.Config {
	c := config.DefaultConfig()
	transport.Declare(c, messengers.All())
	return c
}

func parse(t *testing.T, doc string) (*config.Config, error) {
	t.Helper()
	c := declared()
	if err := c.Parse("test.toml", strings.NewReader(doc)); err != nil {
		return c, err
	}
	return c, c.Validate()
}

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
	if w := c.Section("wecom").(*wecom.Section); w.Secret != "w-secret" || w.URL != wecom.DefaultURL {
		t.Errorf("wecom: %+v", w)
	}
	if d := c.Section("dingtalk").(*dingtalk.Section); d.ClientSecret != "d-secret" || d.RobotCode != "dingabc" || d.APIURL != dingtalk.DefaultAPIURL {
		t.Errorf("dingtalk: %+v", d)
	}
	if got := c.SecretsInFile(); !slices.Contains(got, "feishu.app_secret") || slices.Contains(got, "wecom.secret") {
		t.Errorf("secrets in the file: %q", got)
	}
	if env := c.SecretEnv(); !slices.Contains(env, "WECOM_BOT_SECRET") || !slices.Contains(env, "DT_SECRET") || !slices.Contains(env, "TRAINBOT_TELEGRAM_TOKEN") {
		t.Errorf("the secrets' variables are not kept from runs: %q", env)
	}
	if m := c.Members("feishu"); len(m.Viewers) != 1 || len(m.Operators) != 0 {
		t.Errorf("feishu members %+v", m)
	}
	var on []string
	for _, k := range messengers.All() {
		if s := transport.SectionOf(c, k.Name); s.On() && s.Setup() != "" {
			on = append(on, k.Name)
		}
	}
	if !slices.Equal(on, []string{"wecom", "feishu", "dingtalk"}) {
		t.Errorf("check's capabilities: %q", on)
	}
}

func TestMessengerSectionErrors(t *testing.T) {
	withEnv(t, map[string]string{})
	os.Unsetenv("NOPE")
	for _, tc := range []struct{ doc, want string }{
		{"[wecom]\nbot_id = \"aib\"", "test.toml:1: wecom: [wecom] needs secret"},
		{"[wecom]\nsecret = \"x\"", "wecom.secret: secret is set but bot_id is not"},
		{"[wecom]\nbot_id = \"a\"\nsecret_env = \"NOPE\"", "secret_env: the environment variable NOPE is not set"},
		{"[wecom]\nbot_id = \"a\"\nsecret = \"x\"\nurl = \"https://x\"", `wecom.url: want a URL like wss://host, got "https://x"`},
		{"[feishu]\napp_id = \"abc\"\napp_secret = \"x\"", `starts with cli_, got "abc"`},
		{"[feishu]\napp_id = \"cli_a\"\napp_secret = \"x\"\ndomain = \"larksuite\"", `feishu.domain: want a URL like https://host, got "larksuite"`},
		{"[dingtalk]\nclient_id = \"d\"\nclient_secret = \"x\"\nclient_secret_env = \"Y\"", "give only one of client_secret, client_secret_env"},
		{"[auth]\nfeishu_operators = [\"ou x\"]", `auth.feishu_operators: "ou x" is not a user id (the bot tells a stranger their id: a Feishu open_id ou_…)`},
		{"[dingtalk]\nclient_idd = \"d\"", `test.toml:2: dingtalk.client_idd: unknown key (did you mean "client_id"?)`},
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

const goodToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"

func TestTelegramFromEnvironment(t *testing.T) {
	c := declared()
	err := c.ApplyEnv([]string{"TRAINBOT_TELEGRAM_TOKEN=" + goodToken, "TRAINBOT_AUTH_OPERATORS=11,22", "TRAINBOT_TELEGRAM_PROGRESS_INTERVAL=30s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tg := c.Section("telegram").(*telegram.Section)
	if tg.Token != goodToken || len(c.Auth.Operators) != 2 || c.Auth.Operators[1] != 22 || c.ProgressInterval() != 30*time.Second || !tg.On() {
		t.Errorf("got %+v %+v, progress %v", tg, c.Auth, c.ProgressInterval())
	}
	if got := c.SecretsInFile(); len(got) != 0 {
		t.Errorf("a token from the environment is not in the file: %q", got)
	}
}

func TestTelegramValidation(t *testing.T) {
	tests := []struct {
		name, toml, key, msg string
	}{
		{"bad token", "[telegram]\ntoken = \"not-a-token-SECRET\"\n", "telegram.token", "does not look like a bot token"},
		{"endpoint scheme", "[telegram]\napi_endpoint = \"api.telegram.org\"\n", "telegram.api_endpoint", "base URL"},
		{"endpoint path", "[telegram]\napi_endpoint = \"https://api.telegram.org/bot%s/%s\"\n", "telegram.api_endpoint", "base URL"},
		{"poll timeout", "[telegram]\npoll_timeout = \"500ms\"\n", "telegram.poll_timeout", "whole seconds"},
		{"progress interval", "[telegram]\nprogress_interval = \"1s\"\n", "telegram.progress_interval", "2s or more"},
		{"chat progress interval", "[chat]\nprogress_interval = \"1s\"\n", "chat.progress_interval", "2s or more"},
		{"operator id", "[auth]\noperators = [0]\n", "auth.operators", "not a user id"},
		{"viewer id", "[auth]\nviewers = [-5]\n", "auth.viewers", "not a user id"},
		{"chat id", "[auth]\nchats = [0]\n", "auth.chats", "not a chat id"},
		{"unknown key", "[telegram]\ntokn = \"x\"\n", "telegram.tokn", "did you mean \"token\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.toml)
			var errs config.Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("got %v, want one error", err)
			}
			if errs[0].Key != tt.key || !strings.Contains(errs[0].Msg, tt.msg) || errs[0].Line == 0 {
				t.Errorf("got %v, want %s: …%s… with a line", errs[0], tt.key, tt.msg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the token is repeated: %v", err)
			}
		})
	}
	c, err := parse(t, "[telegram]\napi_endpoint = \"http://127.0.0.1:8081/\"\nprogress_interval = \"0s\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if tg := c.Section("telegram").(*telegram.Section); tg.APIEndpoint != "http://127.0.0.1:8081" || c.ProgressInterval() != 0 {
		t.Errorf("endpoint: got %q, progress %v", tg.APIEndpoint, c.ProgressInterval())
	}
	// [chat] progress_interval wins over the deprecated key.
	c, err = parse(t, "[telegram]\nprogress_interval = \"20s\"\n[chat]\nprogress_interval = \"5s\"\n")
	if err != nil || c.ProgressInterval() != 5*time.Second {
		t.Errorf("[chat] over [telegram]: %v, %v", err, c.ProgressInterval())
	}
}

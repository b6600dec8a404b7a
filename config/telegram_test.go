package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExampleTelegramSection(t *testing.T) {
	c := parseExample(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tg := c.Telegram
	if tg.Token != "" || tg.APIEndpoint != "https://api.telegram.org" || time.Duration(tg.PollTimeout) != 30*time.Second || time.Duration(tg.ProgressInterval) != 10*time.Second {
		t.Errorf("telegram: %+v", tg)
	}
	if len(c.Auth.Operators) != 1 || c.Auth.Operators[0] != 123456789 || len(c.Auth.Viewers) != 0 {
		t.Errorf("auth: %+v", c.Auth)
	}
}

const goodToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"

func TestTelegramFromEnvironment(t *testing.T) {
	c := DefaultConfig()
	err := c.ApplyEnv([]string{"TRAINBOT_TELEGRAM_TOKEN=" + goodToken, "TRAINBOT_AUTH_OPERATORS=11,22", "TRAINBOT_TELEGRAM_PROGRESS_INTERVAL=30s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Telegram.Token != goodToken || len(c.Auth.Operators) != 2 || c.Auth.Operators[1] != 22 || time.Duration(c.Telegram.ProgressInterval) != 30*time.Second {
		t.Errorf("got %+v %+v", c.Telegram, c.Auth)
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
		{"operator id", "[auth]\noperators = [0]\n", "auth.operators", "not a user id"},
		{"viewer id", "[auth]\nviewers = [-5]\n", "auth.viewers", "not a user id"},
		{"chat id", "[auth]\nchats = [0]\n", "auth.chats", "not a chat id"},
		{"unknown key", "[telegram]\ntokn = \"x\"\n", "telegram.tokn", "did you mean \"token\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Parse("t.toml", strings.NewReader(tt.toml))
			if err == nil {
				err = c.Validate()
			}
			var errs Errors
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
	c := DefaultConfig()
	if err := c.Parse("t.toml", strings.NewReader("[telegram]\napi_endpoint = \"http://127.0.0.1:8081/\"\nprogress_interval = \"0s\"\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Telegram.APIEndpoint != "http://127.0.0.1:8081" {
		t.Errorf("endpoint: got %q", c.Telegram.APIEndpoint)
	}
}

package wecom

import (
	"strings"

	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// Kind is WeCom's two-way transport, on when [wecom] has a bot_id. Its
// users are [auth] wecom_operators and wecom_viewers (WeCom userids).
var Kind = transport.Kind{Name: Name, Chinese: true, Section: func() transport.Section { return &Section{} }}

// Section is the [wecom] section: a WeCom 智能机器人 (AI bot) in API mode
// over its long connection, on when bot_id is set.
type Section struct {
	BotID string `toml:"bot_id"`
	// Secret is the bot's long-connection secret (not the webhook token);
	// SecretEnv names a variable that holds it.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
	// URL is the WebSocket endpoint (DefaultURL).
	URL string `toml:"url"`
	// Lang overrides [chat] language for WeCom (default "zh").
	Lang string `toml:"language"`
}

// Check validates [wecom] and reads its secret from the environment.
func (s *Section) Check(ck *config.Checker) {
	s.BotID = strings.TrimSpace(s.BotID)
	ck.Secret("secret", &s.Secret, "secret_env", s.SecretEnv)
	ck.Need(s.On(), [2]string{"bot_id", s.BotID}, [2]string{"secret", s.Secret})
	if s.URL == "" {
		s.URL = DefaultURL
	}
	ck.BaseURL("url", s.URL, "wss", "ws")
}

// Secrets: the long connection's secret.
func (s *Section) Secrets() []string { return []string{"secret"} }

// MemberIDs: what [auth] wecom_operators lists.
func (s *Section) MemberIDs() string { return "a WeCom userid" }

// On reports whether [wecom] has a bot_id.
func (s *Section) On() bool { return s.BotID != "" }

// Language is [wecom] language.
func (s *Section) Language() string { return s.Lang }

// Setup is what WeCom's admin console must enable.
func (s *Section) Setup() string {
	return "WeCom admin → 应用管理 → 智能机器人: create the bot in API mode with 长连接 (long connection); bot_id and secret are on its page. Only one trainbot may use a bot_id at a time."
}

// Open makes the WeCom transport.
func (s *Section) Open(d transport.Deps) (transport.Transport, error) {
	return New(Options{BotID: s.BotID, Secret: s.Secret, URL: s.URL, State: d.State, Logger: d.Logger, Lang: d.Lang})
}

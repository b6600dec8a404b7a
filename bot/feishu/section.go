package feishu

import (
	"strings"

	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// Kind is Feishu's (Lark's) two-way transport, on when [feishu] has an
// app_id. Its users are [auth] feishu_operators and feishu_viewers (open_ids).
var Kind = transport.Kind{Name: Name, Chinese: true, Section: func() transport.Section { return &Section{} }}

// Section is the [feishu] section: a Feishu/Lark enterprise self-built
// app's bot over the long connection, on when app_id is set.
type Section struct {
	AppID        string `toml:"app_id"`
	AppSecret    string `toml:"app_secret"`
	AppSecretEnv string `toml:"app_secret_env"`
	// Domain is "feishu" (default), "lark" (Lark international), or a
	// base URL ("http://127.0.0.1:8080") for both the long connection's
	// discovery and the REST API.
	Domain string `toml:"domain"`
	// Lang overrides [chat] language for Feishu (default "zh").
	Lang string `toml:"language"`
}

// Check validates [feishu] and reads its secret from the environment.
func (s *Section) Check(ck *config.Checker) {
	s.AppID = strings.TrimSpace(s.AppID)
	ck.Secret("app_secret", &s.AppSecret, "app_secret_env", s.AppSecretEnv)
	ck.Need(s.On(), [2]string{"app_id", s.AppID}, [2]string{"app_secret", s.AppSecret})
	if s.AppID != "" && !strings.HasPrefix(s.AppID, "cli_") {
		ck.Errorf("app_id", "want the App ID of the app's credentials page, which starts with cli_, got %q", s.AppID)
	}
	switch s.Domain {
	case "", "feishu", "lark":
	default:
		ck.BaseURL("domain", s.Domain, "https", "http")
	}
}

// Secrets: the app secret.
func (s *Section) Secrets() []string { return []string{"app_secret"} }

// MemberIDs: what [auth] feishu_operators lists.
func (s *Section) MemberIDs() string { return "a Feishu open_id ou_…" }

// On reports whether [feishu] has an app_id.
func (s *Section) On() bool { return s.AppID != "" }

// Language is [feishu] language.
func (s *Section) Language() string { return s.Lang }

// Setup is what Feishu's developer console must enable.
func (s *Section) Setup() string {
	return "Feishu/Lark developer console → your enterprise self-built app: add the Bot capability; Events & callbacks → use long connection, add im.message.receive_v1 and the card.action.trigger callback; scopes im:message, im:message.group_at_msg:readonly, im:message.p2p_msg:readonly, im:resource; publish a version."
}

// Open makes the Feishu transport.
func (s *Section) Open(d transport.Deps) (transport.Transport, error) {
	return New(Options{AppID: s.AppID, AppSecret: s.AppSecret, Domain: s.Domain, State: d.State, Logger: d.Logger, Lang: d.Lang})
}

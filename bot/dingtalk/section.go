package dingtalk

import (
	"strings"

	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// Kind is DingTalk's two-way transport (Stream mode), on when [dingtalk]
// has a client_id. Its users are [auth] dingtalk_operators and
// dingtalk_viewers (staffIds).
var Kind = transport.Kind{Name: Name, Chinese: true, Section: func() transport.Section { return &Section{} }}

// Section is the [dingtalk] section: an internal app's robot in Stream
// mode, on when client_id is set.
type Section struct {
	ClientID        string `toml:"client_id"`
	ClientSecret    string `toml:"client_secret"`
	ClientSecretEnv string `toml:"client_secret_env"`
	// RobotCode is the robot's code for pushes (usually the client_id,
	// the default).
	RobotCode string `toml:"robot_code"`
	// APIURL is the new OpenAPI and the stream's gateway
	// (DefaultAPIURL); OAPIURL the old one, for media uploads
	// (DefaultOAPIURL).
	APIURL  string `toml:"api_url"`
	OAPIURL string `toml:"oapi_url"`
	// Lang overrides [chat] language for DingTalk (default "zh").
	Lang string `toml:"language"`
}

// Check validates [dingtalk] and reads its secret from the environment.
func (s *Section) Check(ck *config.Checker) {
	s.ClientID = strings.TrimSpace(s.ClientID)
	ck.Secret("client_secret", &s.ClientSecret, "client_secret_env", s.ClientSecretEnv)
	ck.Need(s.On(), [2]string{"client_id", s.ClientID}, [2]string{"client_secret", s.ClientSecret})
	if s.RobotCode == "" {
		s.RobotCode = s.ClientID
	}
	if s.APIURL == "" {
		s.APIURL = DefaultAPIURL
	}
	if s.OAPIURL == "" {
		s.OAPIURL = DefaultOAPIURL
	}
	ck.BaseURL("api_url", s.APIURL, "https", "http")
	ck.BaseURL("oapi_url", s.OAPIURL, "https", "http")
	s.APIURL, s.OAPIURL = strings.TrimRight(s.APIURL, "/"), strings.TrimRight(s.OAPIURL, "/")
}

// Secrets: the client secret.
func (s *Section) Secrets() []string { return []string{"client_secret"} }

// MemberIDs: what [auth] dingtalk_operators lists.
func (s *Section) MemberIDs() string { return "a DingTalk staffId" }

// On reports whether [dingtalk] has a client_id.
func (s *Section) On() bool { return s.ClientID != "" }

// Language is [dingtalk] language.
func (s *Section) Language() string { return s.Lang }

// Setup is what DingTalk's developer console must enable.
func (s *Section) Setup() string {
	return "DingTalk developer console → your internal app: add the Robot capability with message receiving mode Stream; permissions qyapi_robot_sendmsg (robot sends messages) and the media upload; publish the app."
}

// Open makes the DingTalk transport.
func (s *Section) Open(d transport.Deps) (transport.Transport, error) {
	return New(Options{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RobotCode: s.RobotCode,
		APIURL: s.APIURL, OAPIURL: s.OAPIURL, State: d.State, Logger: d.Logger, Lang: d.Lang})
}

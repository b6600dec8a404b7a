package telegram

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// Kind is the Telegram transport of `trainbot serve`, on when [telegram]
// has a token. Its users are [auth] operators and viewers (Telegram user
// ids), and [auth] chats limits it to some chats.
var Kind = transport.Kind{Name: Name, Section: func() transport.Section { return DefaultSection() },
	Enable: "[telegram] token (or TRAINBOT_TELEGRAM_TOKEN)"}

// Section is the [telegram] section.
type Section struct {
	// Token is the bot token from @BotFather ("123456789:AA…"); also
	// TRAINBOT_TELEGRAM_TOKEN. Empty: no Telegram.
	Token string `toml:"token"`
	// APIEndpoint is the Bot API server's base URL: Telegram's, or a local
	// Bot API server's.
	APIEndpoint string `toml:"api_endpoint"`
	// PollTimeout is how long one getUpdates long poll waits.
	PollTimeout config.Duration `toml:"poll_timeout"`
	// ProgressInterval is the deprecated spelling of [chat]
	// progress_interval: it applies to every transport, not only
	// Telegram. config.Config.ProgressInterval reads the one in force.
	ProgressInterval config.Duration `toml:"progress_interval"`
	// Lang overrides [chat] language for Telegram.
	Lang string `toml:"language"`
}

// DefaultSection is [telegram] before the file.
func DefaultSection() *Section {
	return &Section{
		APIEndpoint:      "https://api.telegram.org",
		PollTimeout:      config.Duration(30 * time.Second),
		ProgressInterval: config.Duration(config.DefaultProgressInterval),
	}
}

// tokenPattern is the shape of a bot token: the bot's id, a colon, a secret.
var tokenPattern = regexp.MustCompile(`^[0-9]{3,20}:[A-Za-z0-9_-]{20,100}$`)

// Check validates [telegram]. A bad token is never repeated in the
// message.
func (s *Section) Check(ck *config.Checker) {
	s.Token = strings.TrimSpace(s.Token)
	if s.Token != "" && !tokenPattern.MatchString(s.Token) {
		ck.Errorf("token", "does not look like a bot token (digits, a colon, then 20 or more letters, digits, '-' or '_', as @BotFather gives it); the value is not shown")
	}
	if u, err := url.Parse(s.APIEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Contains(s.APIEndpoint, "%") {
		ck.Errorf("api_endpoint", "want the server's base URL like \"https://api.telegram.org\" or \"http://127.0.0.1:8081\", got %q", s.APIEndpoint)
	} else if u.Path != "" && u.Path != "/" {
		ck.Errorf("api_endpoint", "want the base URL without a path (trainbot adds /bot<token>/<method>), got %q", s.APIEndpoint)
	}
	s.APIEndpoint = strings.TrimRight(s.APIEndpoint, "/")
	if d := time.Duration(s.PollTimeout); d < time.Second || d > 5*time.Minute || d%time.Second != 0 {
		ck.Errorf("poll_timeout", "want whole seconds from 1s to 5m, got %s", d)
	}
	if d := time.Duration(s.ProgressInterval); d != 0 && d < 2*time.Second {
		ck.Errorf("progress_interval", "want 2s or more (Telegram limits edits), or 0s for no live progress; got %s", d)
	} else if d != config.DefaultProgressInterval {
		ck.LegacyProgressInterval(d)
	}
}

// Secrets: the token.
func (s *Section) Secrets() []string { return []string{"token"} }

// On reports whether [telegram] has a token.
func (s *Section) On() bool { return s.Token != "" }

// Language is [telegram] language.
func (s *Section) Language() string { return s.Lang }

// Setup: a token from @BotFather is all Telegram needs.
func (s *Section) Setup() string { return "" }

// Open makes the Telegram transport.
func (s *Section) Open(d transport.Deps) (transport.Transport, error) {
	return New(Options{Token: s.Token, APIEndpoint: s.APIEndpoint, PollTimeout: time.Duration(s.PollTimeout),
		State: d.State, Logger: d.Logger, Lang: d.Lang})
}

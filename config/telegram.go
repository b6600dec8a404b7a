package config

import (
	"net/url"
	"regexp"
	"strings"
	"time"
)

// TelegramConfig is the [telegram] section: the Telegram transport of
// `trainbot serve`, on when Token is set.
type TelegramConfig struct {
	// Token is the bot token from @BotFather ("123456789:AA…"); also
	// TRAINBOT_TELEGRAM_TOKEN. Empty: no Telegram.
	Token string `toml:"token"`
	// APIEndpoint is the Bot API server's base URL: Telegram's, or a local
	// Bot API server's.
	APIEndpoint string `toml:"api_endpoint"`
	// PollTimeout is how long one getUpdates long poll waits.
	PollTimeout Duration `toml:"poll_timeout"`
	// ProgressInterval is the deprecated spelling of [chat]
	// progress_interval: it applies to every transport, not only
	// Telegram. Config.ProgressInterval reads the one in force.
	ProgressInterval Duration `toml:"progress_interval"`
	// Language overrides [chat] language for Telegram.
	Language string `toml:"language"`
}

// DefaultTelegramConfig is the [telegram] section before the file.
func DefaultTelegramConfig() TelegramConfig {
	return TelegramConfig{
		APIEndpoint:      "https://api.telegram.org",
		PollTimeout:      Duration(30 * time.Second),
		ProgressInterval: Duration(10 * time.Second),
	}
}

// tokenPattern is the shape of a bot token: the bot's id, a colon, a secret.
var tokenPattern = regexp.MustCompile(`^[0-9]{3,20}:[A-Za-z0-9_-]{20,100}$`)

// validateTelegram checks [telegram] (and [chat] progress_interval). A bad token is never
// repeated in the message.
func (c *Config) validateTelegram() Errors {
	var errs Errors
	tg := &c.Telegram
	tg.Token = strings.TrimSpace(tg.Token)
	if tg.Token != "" && !tokenPattern.MatchString(tg.Token) {
		errs = append(errs, c.ErrorAt("telegram.token", "does not look like a bot token (digits, a colon, then 20 or more letters, digits, '-' or '_', as @BotFather gives it); the value is not shown"))
	}
	if u, err := url.Parse(tg.APIEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Contains(tg.APIEndpoint, "%") {
		errs = append(errs, c.ErrorAt("telegram.api_endpoint", "want the server's base URL like \"https://api.telegram.org\" or \"http://127.0.0.1:8081\", got %q", tg.APIEndpoint))
	} else if u.Path != "" && u.Path != "/" {
		errs = append(errs, c.ErrorAt("telegram.api_endpoint", "want the base URL without a path (trainbot adds /bot<token>/<method>), got %q", tg.APIEndpoint))
	}
	tg.APIEndpoint = strings.TrimRight(tg.APIEndpoint, "/")
	if d := time.Duration(tg.PollTimeout); d < time.Second || d > 5*time.Minute || d%time.Second != 0 {
		errs = append(errs, c.ErrorAt("telegram.poll_timeout", "want whole seconds from 1s to 5m, got %s", d))
	}
	if d := time.Duration(tg.ProgressInterval); d != 0 && d < 2*time.Second {
		errs = append(errs, c.ErrorAt("telegram.progress_interval", "want 2s or more (Telegram limits edits), or 0s for no live progress; got %s", d))
	}
	if p := c.Chat.ProgressInterval; p != nil && time.Duration(*p) != 0 && time.Duration(*p) < 2*time.Second {
		errs = append(errs, c.ErrorAt("chat.progress_interval", "want 2s or more (the messengers limit edits), or 0s for no live progress; got %s", time.Duration(*p)))
	}
	return errs
}

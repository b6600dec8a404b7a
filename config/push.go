package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// PushConfig is one [[push]] entry: a group robot or webhook that gets
// alerts (and, with progress, reports).
type PushConfig struct {
	// Kind is one of push.Kinds: wecom, feishu, dingtalk, webhook, slack,
	// discord, email, ntfy, bark, serverchan, pushplus.
	Kind string `toml:"kind"`
	// Name tells entries of one kind apart ("lab" → channel "wecom:lab");
	// default: the kind.
	Name string `toml:"name"`
	// URL is the webhook URL; or Key, the robot's key (WeCom), access_token
	// (DingTalk) or hook token (Feishu), from which the URL is made. Either
	// may come from an environment variable instead: URLEnv, KeyEnv. A
	// service reached through its API (ntfy, Bark, ServerChan, PushPlus)
	// takes its key (ntfy: an access token) and optionally URL, the API
	// base of a self-hosted or test server. What each kind takes is
	// checked in cmd/trainbot, from push.Specs.
	URL    string `toml:"url"`
	URLEnv string `toml:"url_env"`
	Key    string `toml:"key"`
	KeyEnv string `toml:"key_env"`
	// Secret is the signing secret (Feishu "签名校验", DingTalk "加签",
	// webhook HMAC); SecretEnv names a variable that holds it.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
	// Topic is an ntfy topic; Template a PushPlus template (markdown,
	// html, txt or json; default markdown).
	Topic    string `toml:"topic"`
	Template string `toml:"template"`
	// Email: SMTP is the server ("host:port"), From the sender, To the
	// recipients; Username and Password (or PasswordEnv) authenticate;
	// TLS is "starttls" (default), "tls" (implicit) or "none".
	SMTP        string   `toml:"smtp"`
	From        string   `toml:"from"`
	To          []string `toml:"to"`
	Username    string   `toml:"username"`
	Password    string   `toml:"password"`
	PasswordEnv string   `toml:"password_env"`
	TLS         string   `toml:"tls"`
	// Alerts are the alert kinds pushed here (default: all of them).
	Alerts []string `toml:"alerts"`
	// Progress also pushes started notices and scheduled reports.
	Progress bool `toml:"progress"`
	// QuietHours ("23:00-08:00", local time): only alerts of
	// QuietMinSeverity (info, warning, critical; default warning) or above
	// go out; others wait for the end, progress is dropped.
	QuietHours       string `toml:"quiet_hours"`
	QuietMinSeverity string `toml:"quiet_min_severity"`
	// PerMinute lowers the channel's rate limit (default: the channel's
	// own); a webhook's may be raised.
	PerMinute int `toml:"per_minute"`
	// Timeout bounds one request (default 10s).
	Timeout Duration `toml:"timeout"`
	// Language overrides [chat] language for this channel (default "zh"
	// for WeCom, Feishu and DingTalk robots, "zh+en" for a webhook).
	Language string `toml:"language"`
}

// QuietConfig is one [[quiet]] entry: quiet hours for a chat of a chat
// transport.
type QuietConfig struct {
	// Chat is "transport:id", e.g. "telegram:123456789" or "console:0".
	Chat             string `toml:"chat"`
	QuietHours       string `toml:"quiet_hours"`
	QuietMinSeverity string `toml:"quiet_min_severity"`
}

// ChannelName is the entry's channel name: "kind:name", the name
// defaulting to the kind.
func (p PushConfig) ChannelName() string {
	name := p.Name
	if name == "" {
		name = p.Kind
	}
	return p.Kind + ":" + name
}

// PushEndpoint is where a [[push]] entry sends, read from the environment
// where the entry says so: a whole URL, or a key that the channel's kind
// turns into one; and the signing secret. It holds secrets: never print it.
type PushEndpoint struct {
	URL, Key, Secret, Password string
	// URLField and KeyField are the keys they came from ("url",
	// "url_env"; "key", "key_env"), for errors about them; "" when not
	// given.
	URLField, KeyField string
}

var pushName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)

// lookupEnv reads the environment (a variable for tests).
var lookupEnv = os.LookupEnv

// EntryErrorAt is ErrorAt for a key inside the i-th entry of a [[section]]
// array (sub is ".timeout", or "" for the entry), shown with the entry's
// name: "push[1] (lab): …".
func (c *Config) EntryErrorAt(section string, i int, name, sub, format string, args ...any) *FieldError {
	key := fmt.Sprintf("%s[%d]", section, i)
	fe := c.ErrorAt(key+sub, format, args...)
	fe.Key = key
	if name != "" {
		fe.Key += " (" + name + ")"
	}
	return fe
}

// validatePush checks the shape of [[push]] and [[quiet]]: what kinds,
// alert kinds, rate limits and quiet hours mean is checked where the
// channels are made (cmd/trainbot).
func (c *Config) validatePush() Errors {
	var errs Errors
	seen := map[string]int{}
	for i, p := range c.Push {
		add := func(sub, format string, args ...any) {
			errs = append(errs, c.EntryErrorAt("push", i, p.Name, sub, format, args...))
		}
		if p.Name != "" && !pushName.MatchString(p.Name) {
			add(".name", "name: want letters, digits, '-', '_' or '.', got %q", p.Name)
		}
		if p.Kind != "" {
			name := p.ChannelName()
			if prev, dup := seen[name]; dup {
				add(".name", "channel %s is already defined by push[%d]: give each a different name", name, prev)
			}
			seen[name] = i
		}
		_, perrs := c.PushEndpoint(i)
		errs = append(errs, perrs...)
		if p.QuietMinSeverity != "" && p.QuietHours == "" {
			add(".quiet_hours", "quiet_min_severity is set but quiet_hours is not")
		}
		if d := time.Duration(p.Timeout); d != 0 && (d < time.Second || d > 2*time.Minute) {
			add(".timeout", "timeout: want 1s..2m, got %s", d)
		}
	}
	chats := map[string]int{}
	for i, q := range c.Quiet {
		if prev, dup := chats[q.Chat]; dup {
			errs = append(errs, c.EntryErrorAt("quiet", i, q.Chat, ".chat", "chat %s already has quiet hours at quiet[%d]", q.Chat, prev))
		}
		chats[q.Chat] = i
		if q.QuietHours == "" {
			errs = append(errs, c.EntryErrorAt("quiet", i, q.Chat, "", "quiet_hours is missing, e.g. quiet_hours = \"23:00-08:00\""))
		}
	}
	return errs
}

// PushEndpoint reads where push entry i sends. Errors never show a URL,
// key or secret.
func (c *Config) PushEndpoint(i int) (PushEndpoint, Errors) {
	p := c.Push[i]
	var errs Errors
	add := func(sub, format string, args ...any) {
		errs = append(errs, c.EntryErrorAt("push", i, p.Name, sub, format, args...))
	}
	var ep PushEndpoint
	// At most one of url and url_env, one of key and key_env: which a kind
	// needs is checked in cmd/trainbot, from push.Specs.
	// A URL or key from the environment is trimmed; a password or a
	// secret is taken as it is.
	read := func(field, v, envField, env string, trim bool) (string, string) {
		switch {
		case v != "" && env != "":
			add("."+envField, "give only one of %s, %s", field, envField)
			return "", ""
		case v != "":
			return v, field
		case env != "":
			val, ok := lookupEnv(env)
			if trim {
				val = strings.TrimSpace(val)
			}
			if !ok || strings.TrimSpace(val) == "" {
				add("."+envField, "%s: the environment variable %s is not set", envField, env)
				return "", ""
			}
			return val, envField
		}
		return "", ""
	}
	ep.URL, ep.URLField = read("url", p.URL, "url_env", p.URLEnv, true)
	ep.Key, ep.KeyField = read("key", p.Key, "key_env", p.KeyEnv, true)
	if ep.URLField != "" {
		u, err := url.Parse(ep.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("."+ep.URLField, "%s: want an http(s):// webhook URL (the value is not shown: it is a secret)", ep.URLField)
		}
	}
	if ep.KeyField != "" && strings.ContainsAny(ep.Key, "/?&# ") {
		add("."+ep.KeyField, "%s: a key has no '/', '?', '&', '#' or space; give a whole URL as url", ep.KeyField)
	}
	ep.Password, _ = read("password", p.Password, "password_env", p.PasswordEnv, false)
	ep.Secret, _ = read("secret", p.Secret, "secret_env", p.SecretEnv, false)
	return ep, errs
}

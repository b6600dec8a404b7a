package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
)

// PushConfig is one [[push]] entry: a group robot or webhook that gets
// alerts (and, with progress, reports).
type PushConfig struct {
	// Kind is wecom, feishu, dingtalk or webhook.
	Kind string `toml:"kind"`
	// Name tells entries of one kind apart ("lab" → channel "wecom:lab");
	// default: the kind.
	Name string `toml:"name"`
	// URL is the webhook URL; or Key, the robot's key (WeCom), access_token
	// (DingTalk) or hook token (Feishu), from which the URL is made. Either
	// may come from an environment variable instead: URLEnv, KeyEnv.
	URL    string `toml:"url"`
	URLEnv string `toml:"url_env"`
	Key    string `toml:"key"`
	KeyEnv string `toml:"key_env"`
	// Secret is the signing secret (Feishu "签名校验", DingTalk "加签",
	// webhook HMAC); SecretEnv names a variable that holds it.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
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
	// own); a webhook's may be raised to 600 (default 60).
	PerMinute int `toml:"per_minute"`
	// Timeout bounds one request (default 10s).
	Timeout Duration `toml:"timeout"`
}

// QuietConfig is one [[quiet]] entry: quiet hours for a chat of a chat
// transport.
type QuietConfig struct {
	// Chat is "transport:id", e.g. "telegram:123456789" or "console:0".
	Chat             string `toml:"chat"`
	QuietHours       string `toml:"quiet_hours"`
	QuietMinSeverity string `toml:"quiet_min_severity"`
}

// PushChannel is a [[push]] entry resolved: URL and secret read (from the
// environment too), defaults filled in. It holds secrets: never print it.
type PushChannel struct {
	Kind, Name  string
	URL, Secret string
	Alerts      []string // nil: all
	Progress    bool
	Quiet       deliver.QuietHours
	PerMinute   int
	Timeout     time.Duration
}

// Where a key alone becomes a URL.
var pushKeyURL = map[string]string{
	"wecom":    "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=",
	"dingtalk": "https://oapi.dingtalk.com/robot/send?access_token=",
	"feishu":   "https://open.feishu.cn/open-apis/bot/v2/hook/",
}

var pushKinds = []string{"wecom", "feishu", "dingtalk", "webhook"}

// pushMaxPerMinute is each kind's documented limit.
var pushMaxPerMinute = map[string]int{"wecom": 20, "feishu": 100, "dingtalk": 20, "webhook": 600}

var pushName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)

// lookupEnv reads the environment (a variable for tests).
var lookupEnv = os.LookupEnv

// entryError is an error on an entry of an array of tables: shown names
// the entry ("push[1] (lab)"), lineKey finds the line.
func (c *Config) entryError(lineKey, shown, format string, args ...any) *FieldError {
	fe := c.errorAt(lineKey, format, args...)
	fe.Key = shown
	return fe
}

// entryKey names the i-th entry of a [[section]] array: its key for the
// line ("push[1]") and how errors show it ("push[1] (lab)").
func entryKey(section string, i int, name string) (key, shown string) {
	key = fmt.Sprintf("%s[%d]", section, i)
	shown = key
	if name != "" {
		shown += " (" + name + ")"
	}
	return key, shown
}

// validatePush checks [[push]] and [[quiet]].
func (c *Config) validatePush() Errors {
	var errs Errors
	seen := map[string]int{}
	for i, p := range c.Push {
		key, shown := entryKey("push", i, p.Name)
		_, perrs := c.pushChannel(i)
		errs = append(errs, perrs...)
		if slices.Contains(pushKinds, p.Kind) {
			name := p.Kind + ":" + def(p.Name, p.Kind)
			if prev, dup := seen[name]; dup {
				errs = append(errs, c.entryError(key+".name", shown, "channel %s is already defined by push[%d]: give each a different name", name, prev))
			}
			seen[name] = i
		}
	}
	chats := map[string]int{}
	for i, q := range c.Quiet {
		key, shown := entryKey("quiet", i, q.Chat)
		if _, ok := parseChat(q.Chat); !ok {
			errs = append(errs, c.entryError(key+".chat", shown, "chat: want \"transport:id\", e.g. \"telegram:123456789\", got %q", q.Chat))
		} else if prev, dup := chats[q.Chat]; dup {
			errs = append(errs, c.entryError(key+".chat", shown, "chat %s already has quiet hours at quiet[%d]", q.Chat, prev))
		} else {
			chats[q.Chat] = i
		}
		if q.QuietHours == "" {
			errs = append(errs, c.entryError(key, shown, "quiet_hours is missing, e.g. quiet_hours = \"23:00-08:00\""))
			continue
		}
		if _, err := quietHours(q.QuietHours, q.QuietMinSeverity); err != nil {
			errs = append(errs, c.entryError(key+".quiet_hours", shown, "%v", err))
		}
	}
	return errs
}

func def(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func parseChat(s string) (chat.ChatKey, bool) {
	t, id, ok := strings.Cut(s, ":")
	if !ok || t == "" {
		return chat.ChatKey{}, false
	}
	var n int64
	if _, err := fmt.Sscan(id, &n); err != nil || fmt.Sprint(n) != id {
		return chat.ChatKey{}, false
	}
	return chat.ChatKey{Transport: t, Chat: n}, true
}

func quietHours(span, min string) (deliver.QuietHours, error) {
	sev := chat.SeverityWarning
	if min != "" {
		s, err := chat.ParseSeverity(min)
		if err != nil {
			return deliver.QuietHours{}, fmt.Errorf("quiet_min_severity: %v", err)
		}
		sev = s
	}
	if span == "" {
		if min != "" {
			return deliver.QuietHours{}, fmt.Errorf("quiet_min_severity is set but quiet_hours is not")
		}
		return deliver.QuietHours{}, nil
	}
	return deliver.ParseQuietHours(span, sev)
}

// pushChannel resolves and checks one [[push]] entry. Errors never show
// a URL, key or secret.
func (c *Config) pushChannel(i int) (PushChannel, Errors) {
	p := c.Push[i]
	key, shown := entryKey("push", i, p.Name)
	var errs Errors
	add := func(k, format string, args ...any) {
		errs = append(errs, c.entryError(key+k, shown, format, args...))
	}
	ch := PushChannel{Kind: p.Kind, Name: def(p.Name, p.Kind), Progress: p.Progress, PerMinute: p.PerMinute, Timeout: time.Duration(p.Timeout)}
	if !slices.Contains(pushKinds, p.Kind) {
		hint := ""
		switch strings.ToLower(p.Kind) {
		case "wechat", "weixin", "wxwork", "qywx", "企业微信":
			hint = " (WeCom is \"wecom\")"
		case "lark", "飞书":
			hint = " (Lark is \"feishu\")"
		case "dingding", "钉钉":
			hint = " (DingTalk is \"dingtalk\")"
		}
		add(".kind", "kind: want wecom, feishu, dingtalk or webhook, got %q%s", p.Kind, hint)
		return ch, errs
	}
	if p.Name != "" && !pushName.MatchString(p.Name) {
		add(".name", "name: want letters, digits, '-', '_' or '.', got %q", p.Name)
	}
	// Where the URL comes from: exactly one of url, url_env, key, key_env.
	var from []string
	for _, f := range []struct{ name, v string }{{"url", p.URL}, {"url_env", p.URLEnv}, {"key", p.Key}, {"key_env", p.KeyEnv}} {
		if f.v != "" {
			from = append(from, f.name)
		}
	}
	switch {
	case len(from) == 0:
		add("", "give the webhook as url, url_env, key or key_env")
	case len(from) > 1:
		add("."+from[1], "give only one of %s", strings.Join(from, ", "))
	default:
		v, field := "", from[0]
		switch field {
		case "url":
			v = p.URL
		case "key":
			v = p.Key
		default:
			name := p.URLEnv + p.KeyEnv
			val, ok := lookupEnv(name)
			if !ok || strings.TrimSpace(val) == "" {
				add("."+field, "%s: the environment variable %s is not set", field, name)
				return ch, errs
			}
			v = strings.TrimSpace(val)
		}
		if field == "url" || field == "url_env" {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				add("."+field, "%s: want an http(s):// webhook URL (the value is not shown: it is a secret)", field)
			}
			ch.URL = v
		} else {
			base, ok := pushKeyURL[p.Kind]
			if !ok {
				add("."+field, "%s: a webhook has no key: give its url", field)
			}
			if strings.ContainsAny(v, "/?&# ") {
				add("."+field, "%s: a key has no '/', '?', '&', '#' or space; give a whole URL as url", field)
			}
			ch.URL = base + v
		}
	}
	if p.Secret != "" && p.SecretEnv != "" {
		add(".secret_env", "give only one of secret, secret_env")
	}
	ch.Secret = p.Secret
	if p.SecretEnv != "" {
		val, ok := lookupEnv(p.SecretEnv)
		if !ok || val == "" {
			add(".secret_env", "secret_env: the environment variable %s is not set", p.SecretEnv)
		}
		ch.Secret = val
	}
	if ch.Secret != "" && p.Kind == "wecom" {
		add(".secret", "WeCom group robots do not sign messages: remove the secret")
	}
	if p.Alerts != nil {
		ch.Alerts = []string{}
		for j, a := range p.Alerts {
			if !slices.Contains(chat.AlertKinds, a) {
				add(fmt.Sprintf(".alerts[%d]", j), "alerts: unknown kind %q; the kinds are %s", a, strings.Join(chat.AlertKinds, ", "))
				continue
			}
			ch.Alerts = append(ch.Alerts, a)
		}
	}
	q, err := quietHours(p.QuietHours, p.QuietMinSeverity)
	if err != nil {
		add(".quiet_hours", "%v", err)
	}
	ch.Quiet = q
	if max := pushMaxPerMinute[p.Kind]; p.PerMinute < 0 || p.PerMinute > max {
		add(".per_minute", "per_minute: want 1..%d for %s (0: the default), got %d", max, p.Kind, p.PerMinute)
	}
	if d := time.Duration(p.Timeout); d != 0 && (d < time.Second || d > 2*time.Minute) {
		add(".timeout", "timeout: want 1s..2m, got %s", d)
	}
	if ch.Timeout == 0 {
		ch.Timeout = 10 * time.Second
	}
	return ch, errs
}

// PushChannels returns the [[push]] entries resolved. Call after Validate.
func (c *Config) PushChannels() ([]PushChannel, error) {
	var out []PushChannel
	for i := range c.Push {
		ch, errs := c.pushChannel(i)
		if len(errs) > 0 {
			return nil, errs
		}
		out = append(out, ch)
	}
	return out, nil
}

// QuietChats returns the quiet hours of the [[quiet]] chats. Call after
// Validate.
func (c *Config) QuietChats() map[chat.ChatKey]deliver.QuietHours {
	out := map[chat.ChatKey]deliver.QuietHours{}
	for _, q := range c.Quiet {
		k, ok := parseChat(q.Chat)
		qh, err := quietHours(q.QuietHours, q.QuietMinSeverity)
		if ok && err == nil && !qh.IsZero() {
			out[k] = qh
		}
	}
	return out
}

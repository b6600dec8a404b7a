package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/i18n"
)

// Every kind of push.Specs is configured from its own keys, gets its
// language default, and becomes a channel.
func TestEveryPushKindFromConfig(t *testing.T) {
	t.Setenv("SLACK_URL", "https://hooks.slack.com/services/T1/B2/xyz")
	t.Setenv("MAIL_PASSWORD", "app-password")
	t.Setenv("NTFY_TOKEN", "tk_abc")
	t.Setenv("SENDKEY", "SCT123abc")
	bc, err := convert(t, `
[[push]]
kind = "slack"
url_env = "SLACK_URL"

[[push]]
kind = "discord"
url = "https://discord.com/api/webhooks/123/tok-abc"

[[push]]
kind = "email"
smtp = "smtp.gmail.com:587"
from = "trainbot@example.org"
to = ["a@example.org", "Bo <b@example.org>"]
username = "trainbot@example.org"
password_env = "MAIL_PASSWORD"

[[push]]
kind = "ntfy"
topic = "trainbot-lab-x7q2"
key_env = "NTFY_TOKEN"

[[push]]
kind = "ntfy"
name = "home"
url = "https://ntfy.example.org"
topic = "runs"

[[push]]
kind = "bark"
key = "devkey123"
url = "https://bark.example.org"

[[push]]
kind = "serverchan"
key_env = "SENDKEY"

[[push]]
kind = "pushplus"
key = "pptoken"
template = "html"
`)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]push.Options{}
	for _, c := range bc.channels {
		byName[c.opts.Kind+":"+c.opts.Name] = c.opts
	}
	want := []struct {
		name string
		ok   func(o push.Options) bool
		lang i18n.Lang
	}{
		{"slack:slack", func(o push.Options) bool { return o.URL == "https://hooks.slack.com/services/T1/B2/xyz" }, i18n.ZhEn},
		{"discord:discord", func(o push.Options) bool { return o.URL == "https://discord.com/api/webhooks/123/tok-abc" }, i18n.ZhEn},
		{"email:email", func(o push.Options) bool {
			m := o.Mail
			return m.SMTP == "smtp.gmail.com:587" && m.From == "trainbot@example.org" && strings.Join(m.To, ",") == "a@example.org,Bo <b@example.org>" &&
				m.Username == "trainbot@example.org" && m.Password == "app-password" && m.TLS == push.MailSTARTTLS && o.URL == ""
		}, i18n.ZhEn},
		{"ntfy:ntfy", func(o push.Options) bool { return o.URL == "" && o.Topic == "trainbot-lab-x7q2" && o.Key == "tk_abc" }, i18n.ZhEn},
		{"ntfy:home", func(o push.Options) bool {
			return o.URL == "https://ntfy.example.org" && o.Topic == "runs" && o.Key == ""
		}, i18n.ZhEn},
		{"bark:bark", func(o push.Options) bool { return o.URL == "https://bark.example.org" && o.Key == "devkey123" }, i18n.ZhEn},
		{"serverchan:serverchan", func(o push.Options) bool { return o.URL == "" && o.Key == "SCT123abc" }, i18n.Zh},
		{"pushplus:pushplus", func(o push.Options) bool { return o.Key == "pptoken" && o.Template == "html" }, i18n.Zh},
	}
	for _, w := range want {
		o, ok := byName[w.name]
		if !ok {
			t.Errorf("no channel %s among %v", w.name, bc.channels)
			continue
		}
		if !w.ok(o) {
			t.Errorf("%s: options %+v", w.name, o)
		}
		if o.Lang != w.lang {
			t.Errorf("%s: language %v, want %v", w.name, o.Lang, w.lang)
		}
	}
	pushed, err := pushChannels(bc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed.senders) != len(want) {
		t.Errorf("%d senders, want %d", len(pushed.senders), len(want))
	}
}

// What one kind takes and another does not is an error at its key, with
// its line; no error shows a key or a password.
func TestPushKindKeysAreChecked(t *testing.T) {
	_, err := convert(t, `
[[push]]
kind = "ntfy"
key = "SECRETTOKEN"

[[push]]
kind = "serverchan"
name = "nokey"

[[push]]
kind = "bark"
key = "SECRETDEVICE"
secret = "SECRETSIGN"

[[push]]
kind = "slack"
key = "SECRETSLACK"

[[push]]
kind = "email"
url = "https://mail.example.org"

[[push]]
kind = "email"
name = "plain"
smtp = "localhost"
from = "not an address"
to = ["ok@example.org", "also not"]
username = "u"
password = "SECRETPASSWORD"
tls = "none"

[[push]]
kind = "wecom"
key = "k"
topic = "t"
smtp = "smtp.example.org:25"

[[push]]
kind = "pushplus"
key = "k2"
template = "fancy"

[[push]]
kind = "email"
name = "half"
smtp = "smtp.example.org:587"
from = "a@example.org"
to = ["b@example.org"]
tls = "ssl"
username = "b@example.org"
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:2: push[0]: give the topic, e.g. topic = "trainbot-lab-x7q2"`,
		`test.toml:6: push[1] (nokey): give the SendKey as key or key_env`,
		`test.toml:13: push[2]: Bark devices do not sign messages: remove the secret`,
		`test.toml:17: push[3]: key: Slack webhooks have no key: give the url`,
		`test.toml:21: push[4]: url: email sends over SMTP: give smtp = "host:port", from and to`,
		`push[4]: give the mail server as smtp = "host:port"`,
		`test.toml:26: push[5] (plain): smtp: want "host:port"`,
		`test.toml:27: push[5] (plain): from: "not an address" is not an email address`,
		`test.toml:28: push[5] (plain): to: "also not" is not an email address`,
		`test.toml:31: push[5] (plain): tls = "none" would send the password in plain text`,
		`test.toml:36: push[6]: topic: WeCom group robots take no topic`,
		`test.toml:37: push[6]: smtp: only email takes smtp`,
		`test.toml:42: push[7]: template: want markdown, html, txt, json, got "fancy"`,
		`test.toml:50: push[8] (half): tls: want starttls, tls, none, got "ssl"`,
		`test.toml:51: push[8] (half): a username without a password: give password_env too`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"SECRETTOKEN", "SECRETDEVICE", "SECRETSIGN", "SECRETSLACK", "SECRETPASSWORD"} {
		if strings.Contains(text, secret) {
			t.Errorf("errors show %s:\n%s", secret, text)
		}
	}
}

// The example config's commented push blocks are valid once uncommented.
func TestExamplePushBlocksConvert(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	kinds := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "# [[push]]":
			in = true
		case in && (line == "#" || !strings.HasPrefix(line, "# ")):
			in = false
			doc.WriteString("\n")
			continue
		}
		if in {
			l := strings.TrimPrefix(line, "# ")
			doc.WriteString(l + "\n")
			if k, ok := strings.CutPrefix(l, `kind = "`); ok {
				kinds[k[:strings.IndexByte(k, '"')]] = true
			}
		}
	}
	for _, v := range []string{"SLACK_WEBHOOK_URL", "DISCORD_WEBHOOK_URL"} {
		t.Setenv(v, "https://example.org/hook/abc")
	}
	for _, v := range []string{"SMTP_PASSWORD", "NTFY_TOKEN", "BARK_KEY", "SERVERCHAN_SENDKEY", "PUSHPLUS_TOKEN"} {
		t.Setenv(v, "k123")
	}
	bc, err := convert(t, doc.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	for _, k := range push.Kinds {
		if !kinds[k] && !slices.Contains([]string{push.WeCom, push.Feishu, push.DingTalk, push.Webhook}, k) {
			t.Errorf("config.example.toml has no block of kind %s", k)
		}
	}
	if len(bc.channels) != len(kinds) {
		t.Errorf("%d channels of %d blocks", len(bc.channels), len(kinds))
	}
}

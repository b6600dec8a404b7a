package main

import (
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
)

// languagesFromConfig reads [chat] language and each transport's own
// language key into the language of every transport and push channel:
// its own key, else [chat] language, else its default ("zh" for WeCom,
// Feishu and DingTalk and the push kinds of push.Spec.Chinese, "zh+en"
// for Telegram, the terminal and the other push kinds).
// Errors name the key and its line.
func languagesFromConfig(c *config.Config) (i18n.Languages, config.Errors) {
	var errs config.Errors
	at := func(key string) func(error) *config.FieldError {
		return func(err error) *config.FieldError { return c.ErrorAt(key, "language: %v", err) }
	}
	read := func(bad func(error) *config.FieldError, value string) (i18n.Lang, bool) {
		if value == "" {
			return 0, false
		}
		l, err := i18n.Parse(value)
		if err != nil {
			errs = append(errs, bad(err))
			return 0, false
		}
		return l, true
	}
	chatLang, chatSet := read(at("chat.language"), c.Chat.Language)
	pick := func(chinese bool, bad func(error) *config.FieldError, value string) i18n.Lang {
		if l, ok := read(bad, value); ok {
			return l
		}
		if chatSet {
			return chatLang
		}
		if chinese {
			return i18n.Zh
		}
		return i18n.ZhEn
	}
	out := i18n.Languages{Default: i18n.ZhEn, ByTransport: map[string]i18n.Lang{}}
	if chatSet {
		out.Default = chatLang
	}
	out.ByTransport[console.Name] = pick(false, at("console.language"), c.Console.Language)
	for _, k := range transports {
		value := ""
		if s := transport.SectionOf(c, k.Name); s != nil {
			value = s.Language()
		}
		out.ByTransport[k.Name] = pick(k.Chinese, at(k.Name+".language"), value)
	}
	for i, p := range c.Push {
		bad := func(err error) *config.FieldError {
			return c.EntryErrorAt("push", i, p.Name, ".language", "language: %v", err)
		}
		spec, _ := push.SpecOf(p.Kind)
		out.ByTransport[p.ChannelName()] = pick(spec.Chinese, bad, p.Language)
	}
	return out, errs
}

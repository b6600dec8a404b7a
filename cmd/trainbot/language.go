package main

import (
	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/dingtalk"
	"github.com/trainbot/trainbot/bot/feishu"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/wecom"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
)

// chineseFirst are the transports and push kinds whose chats default to
// Chinese: the messengers of teams in mainland China.
var chineseFirst = map[string]bool{wecom.Name: true, feishu.Name: true, dingtalk.Name: true}

// languagesFromConfig reads [chat] language and each transport's own
// language key into the language of every transport and push channel:
// its own key, else [chat] language, else its default ("zh" for WeCom,
// Feishu and DingTalk, "zh+en" for Telegram, the terminal and webhooks).
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
	pick := func(kind string, bad func(error) *config.FieldError, value string) i18n.Lang {
		if l, ok := read(bad, value); ok {
			return l
		}
		if chatSet {
			return chatLang
		}
		if chineseFirst[kind] {
			return i18n.Zh
		}
		return i18n.ZhEn
	}
	out := i18n.Languages{Default: i18n.ZhEn, ByTransport: map[string]i18n.Lang{}}
	if chatSet {
		out.Default = chatLang
	}
	out.ByTransport[console.Name] = pick(console.Name, at("console.language"), c.Console.Language)
	out.ByTransport[telegram.Name] = pick(telegram.Name, at("telegram.language"), c.Telegram.Language)
	out.ByTransport[wecom.Name] = pick(wecom.Name, at("wecom.language"), c.WeCom.Language)
	out.ByTransport[feishu.Name] = pick(feishu.Name, at("feishu.language"), c.Feishu.Language)
	out.ByTransport[dingtalk.Name] = pick(dingtalk.Name, at("dingtalk.language"), c.DingTalk.Language)
	for i, p := range c.Push {
		bad := func(err error) *config.FieldError {
			return c.EntryErrorAt("push", i, p.Name, ".language", "language: %v", err)
		}
		out.ByTransport[p.ChannelName()] = pick(p.Kind, bad, p.Language)
	}
	return out, errs
}

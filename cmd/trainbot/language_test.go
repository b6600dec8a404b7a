package main

import (
	"strings"
	"testing"

	"github.com/trainbot/trainbot/i18n"
)

func TestLanguagesFromConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		bc, err := convert(t, `[[push]]
kind = "wecom"
name = "lab"
key = "k"
[[push]]
kind = "webhook"
url = "https://example.org/hook"
`)
		if err != nil {
			t.Fatal(err)
		}
		for tr, want := range map[string]i18n.Lang{"console": i18n.ZhEn, "telegram": i18n.ZhEn, "wecom": i18n.Zh, "feishu": i18n.Zh,
			"dingtalk": i18n.Zh, "wecom:lab": i18n.Zh, "webhook:webhook": i18n.ZhEn} {
			if got := bc.langs.For(tr); got != want {
				t.Errorf("%s: got %v, want %v", tr, got, want)
			}
		}
		if bc.channels[0].opts.Lang != i18n.Zh || bc.channels[1].opts.Lang != i18n.ZhEn {
			t.Errorf("push channels speak %v and %v, want zh and zh+en", bc.channels[0].opts.Lang, bc.channels[1].opts.Lang)
		}
	})
	t.Run("chat and overrides", func(t *testing.T) {
		bc, err := convert(t, `[chat]
language = "en"
[telegram]
language = "zh"
[wecom]
language = "zh+en"
[[push]]
kind = "feishu"
url = "https://open.feishu.cn/open-apis/bot/v2/hook/x"
language = "zh"
`)
		if err != nil {
			t.Fatal(err)
		}
		for tr, want := range map[string]i18n.Lang{"console": i18n.En, "telegram": i18n.Zh, "wecom": i18n.ZhEn, "feishu": i18n.En,
			"dingtalk": i18n.En, "feishu:feishu": i18n.Zh, "elsewhere": i18n.En} {
			if got := bc.langs.For(tr); got != want {
				t.Errorf("%s: got %v, want %v", tr, got, want)
			}
		}
	})
	t.Run("bad values name key and line", func(t *testing.T) {
		_, err := convert(t, `[chat]
language = "fr"

[dingtalk]
language = "cn-tw"
[[push]]
kind = "wecom"
key = "k"
language = "jp"
`)
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{`test.toml:2: chat.language: language: "fr" is not a language: want "zh", "en" or "zh+en"`,
			`test.toml:5: dingtalk.language: language: "cn-tw"`, `test.toml:9: push[0]: language: "jp"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got\n%v\nwant it to say %s", err, want)
			}
		}
	})
}

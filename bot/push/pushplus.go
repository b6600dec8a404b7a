package push

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// PushPlus limits (https://www.pushplus.plus/doc/help/limit.html): a
// verified user's title "100个字", content "2万个字".
const (
	pushplusAPI        = "https://www.pushplus.plus"
	pushplusTitleMax   = 100    // bytes: never more characters than that
	pushplusContentMax = 20_000 // characters
)

// pushplus is the PushPlus (推送加) API: POST https://www.pushplus.plus/send
// (or BASE/send) with {"token","title","content","template","channel":
// "wechat"}, answered {"code":200,"msg":"请求成功","data":"<message id>"}.
// The answer only says the message was taken: PushPlus sends it after.
type pushplus struct {
	url, token, template string
	lang                 i18n.Lang
}

func newPushPlus(o Options) (dialect, error) {
	t := o.Template
	if t == "" {
		t = "markdown"
	}
	if !slices.Contains(PushPlusTemplates, t) {
		return nil, fmt.Errorf("template: want %s, got %q", strings.Join(PushPlusTemplates, ", "), t)
	}
	return &pushplus{url: o.URL + "/send", token: o.Key, template: t, lang: o.Lang}, nil
}

type pushplusMsg struct {
	Token    string `json:"token"`
	Title    string `json:"title"`
	Content  string `json:"content"`
	Template string `json:"template"`
	Channel  string `json:"channel"`
}

// messages writes the reply's text in the channel's template, split so
// that each content stays under 20,000 characters once written.
func (p *pushplus) messages(r chat.Reply) ([]any, error) {
	why := p.lang.T(i18n.PushNoPushPlus)
	notes := imagesNotSent(p.lang, r, why)
	text := textOf(p.lang, r, notes)
	title := firstLine(text, pushplusTitleMax)
	for limit := pushplusContentMax; ; limit /= 2 {
		var out []any
		fits := true
		for _, part := range splitText(text, limit, p.lang) {
			content, err := p.content(r, part)
			if err != nil {
				return nil, err
			}
			if utf8.RuneCountInString(content) > pushplusContentMax {
				fits = false
				break
			}
			out = append(out, pushplusMsg{Token: p.token, Title: title, Content: content, Template: p.template, Channel: "wechat"})
		}
		if fits || limit < 1000 {
			return out, nil
		}
	}
}

// content is one part of the text in the template: markdown and txt as
// they are, html escaped with <br> for line breaks, json the webhook's
// object (without charts) with the part as its text.
func (p *pushplus) content(r chat.Reply, part string) (string, error) {
	switch p.template {
	case "html":
		return strings.ReplaceAll(html.EscapeString(part), "\n", "<br>"), nil
	case "json":
		m := webhookMessageOf(r)
		m.Text = part
		b, err := encodeJSON(m)
		return string(b), err
	}
	return part, nil
}

func (p *pushplus) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	return postJSON(ctx, p.url, msg)
}

// result reads the documented codes
// (https://www.pushplus.plus/doc/guide/code.html): 200 is success; 900
// (用户账号使用受限: the day's 200 requests are used, or the account is
// held for days) is tried again an hour later: the service asks to stop
// for the day, and 24 requests a day stay far from the 2,000 that hold an
// account for 7 days; 500 (系统异常) is
// temporary; an answer that says 频繁 (too frequent) is tried again a
// minute later; 903 (a bad token), 905 (no real-name verification), 999
// (the message refused) and the others are permanent.
func (p *pushplus) result(status int, h http.Header, body []byte) *Error {
	return codeResult(status, h, body, 200, func(code int, msg string) (bool, time.Duration) {
		switch {
		case code == 900:
			return true, time.Hour
		case code == 500:
			return true, 0
		case strings.Contains(msg, "频繁"):
			return true, time.Minute
		}
		return false, 0
	})
}

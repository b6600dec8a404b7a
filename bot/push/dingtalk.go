package push

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// dingtalkTextMax is the most bytes of a DingTalk robot message
// ("message too long, exceed 20000 bytes").
const dingtalkTextMax = 20000 - 1000

// dingtalk is the DingTalk (钉钉) custom robot API: POST
// https://oapi.dingtalk.com/robot/send?access_token=TOKEN, with
// &timestamp=MS&sign=SIGN added when the robot has a signing secret. It
// answers {"errcode":0,"errmsg":"ok"}.
type dingtalk struct {
	url, secret string
	lang        i18n.Lang
}

type dingtalkMsg struct {
	MsgType  string           `json:"msgtype"`
	Markdown dingtalkMarkdown `json:"markdown"`
}

type dingtalkMarkdown struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

func (d *dingtalk) messages(r chat.Reply) ([]any, error) {
	text := textOf(d.lang, r, imagesNotSent(d.lang, r, d.lang.T(i18n.PushNoDingTalk)))
	// Markdown joins lines without two trailing spaces: they count against
	// the limit too, so the text is split with them.
	var out []any
	for _, part := range splitText(strings.ReplaceAll(text, "\n", "  \n"), dingtalkTextMax, d.lang) {
		plain := strings.ReplaceAll(part, "  \n", "\n")
		plain = strings.TrimSuffix(plain, "  ") // a line break the split took
		md := strings.ReplaceAll(plain, "\n", "  \n")
		out = append(out, dingtalkMsg{MsgType: "markdown", Markdown: dingtalkMarkdown{Title: firstLine(plain, 64), Text: md}})
	}
	return out, nil
}

// DingTalkSign is the signature of a DingTalk robot: the base64 of an
// HMAC-SHA256 keyed with the secret over timestamp+"\n"+secret (before URL
// escaping).
func DingTalkSign(secret string, timestampMS int64) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(timestampMS, 10) + "\n" + secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (d *dingtalk) request(ctx context.Context, msg any, now time.Time) (*http.Request, error) {
	body, err := encodeJSON(msg)
	if err != nil {
		return nil, err
	}
	u := d.url
	if d.secret != "" {
		ts := now.UnixMilli()
		q := url.Values{}
		q.Set("timestamp", strconv.FormatInt(ts, 10))
		q.Set("sign", DingTalkSign(d.secret, ts))
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + q.Encode()
	}
	return jsonRequest(ctx, u, body)
}

func (d *dingtalk) result(status int, h http.Header, body []byte) *Error {
	return errcodeResult(status, h, body, map[int]time.Duration{
		-1:     0,           // 系统繁忙 system busy
		130101: time.Minute, // send too fast, exceed 20 times per minute
		410100: time.Minute, // 发送速度太快而限流
	})
}

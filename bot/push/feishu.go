package push

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// feishuBodyMax is the largest request body a Feishu custom bot takes
// ("请求体大小不能超过 20 K"), less room for the signature.
const feishuBodyMax = 20<<10 - 256

// feishu is the Feishu (飞书) / Lark custom bot API: POST
// https://open.feishu.cn/open-apis/bot/v2/hook/TOKEN with
// {"msg_type":"text"|"post","content":…} and, when the bot has a signing
// secret, "timestamp" (seconds, a string) and "sign" in the same object.
// It answers {"code":0,"msg":"success"} (older bots: "StatusCode").
type feishu struct {
	url, secret string
	lang        i18n.Lang
}

type feishuMsg struct {
	Timestamp string `json:"timestamp,omitempty"`
	Sign      string `json:"sign,omitempty"`
	MsgType   string `json:"msg_type"`
	Content   any    `json:"content"`
}

type feishuTextContent struct {
	Text string `json:"text"`
}

type feishuPostContent struct {
	Post map[string]feishuPost `json:"post"`
}

type feishuPost struct {
	Title   string              `json:"title"`
	Content [][]feishuPostBlock `json:"content"`
}

type feishuPostBlock struct {
	Tag  string `json:"tag"`
	Text string `json:"text"`
}

func (f *feishu) messages(r chat.Reply) ([]any, error) {
	text := textOf(f.lang, r, imagesNotSent(f.lang, r, f.lang.T(i18n.PushNoFeishu)))
	for limit := 12000; ; limit /= 2 {
		var out []any
		fits := true
		for _, part := range splitText(text, limit, f.lang) {
			m := feishuMessage(part)
			b, err := encodeJSON(m)
			if err != nil {
				return nil, err
			}
			if len(b) > feishuBodyMax {
				fits = false
				break
			}
			out = append(out, m)
		}
		if fits || limit < 1000 {
			return out, nil
		}
	}
}

// feishuMessage is a text message for one line, else a post whose title is
// the first line and whose paragraphs are the others.
func feishuMessage(text string) feishuMsg {
	title, rest, ok := strings.Cut(text, "\n")
	if !ok {
		return feishuMsg{MsgType: "text", Content: feishuTextContent{Text: text}}
	}
	var blocks [][]feishuPostBlock
	for _, line := range strings.Split(rest, "\n") {
		blocks = append(blocks, []feishuPostBlock{{Tag: "text", Text: line}})
	}
	return feishuMsg{MsgType: "post", Content: feishuPostContent{Post: map[string]feishuPost{
		"zh_cn": {Title: title, Content: blocks},
	}}}
}

// FeishuSign is the signature of a Feishu custom bot: the base64 of an
// HMAC-SHA256 keyed with timestamp+"\n"+secret over an empty message.
func FeishuSign(secret string, timestamp int64) string {
	mac := hmac.New(sha256.New, []byte(strconv.FormatInt(timestamp, 10)+"\n"+secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (f *feishu) request(ctx context.Context, msg any, now time.Time) (*http.Request, error) {
	m := msg.(feishuMsg)
	if f.secret != "" {
		ts := now.Unix()
		m.Timestamp, m.Sign = strconv.FormatInt(ts, 10), FeishuSign(f.secret, ts)
	}
	body, err := encodeJSON(m)
	if err != nil {
		return nil, err
	}
	return jsonRequest(ctx, f.url, body)
}

// Feishu codes that may be retried.
var feishuTemporary = map[int]time.Duration{
	11232:    10 * time.Second, // frequency limited
	99991400: 10 * time.Second, // request trigger frequency limit
	-1:       0,
}

func (f *feishu) result(status int, h http.Header, body []byte) *Error {
	var res struct {
		Code          *int   `json:"code"`
		Msg           string `json:"msg"`
		StatusCode    *int   `json:"StatusCode"`
		StatusMessage string `json:"StatusMessage"`
	}
	if json.Unmarshal(body, &res) != nil || (res.Code == nil && res.StatusCode == nil) {
		if e := httpError(status, h, body); e != nil {
			return e
		}
		return &Error{Op: "reply", Status: status, Msg: "unreadable answer: " + snippet(body), Temporary: true}
	}
	code, msg := 0, ""
	switch {
	case res.Code != nil && *res.Code != 0:
		code, msg = *res.Code, res.Msg
	case res.StatusCode != nil && *res.StatusCode != 0:
		code, msg = *res.StatusCode, res.StatusMessage
	default:
		return nil
	}
	e := &Error{Op: "reply", Status: status, Code: code, Msg: msg}
	if after, ok := feishuTemporary[code]; ok {
		e.Temporary, e.After = true, after
	}
	return e
}

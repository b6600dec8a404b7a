package push

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// WeCom group robot limits
// (https://developer.work.weixin.qq.com/document/path/91770).
const (
	wecomMarkdownMax = 4096    // bytes of markdown content
	wecomImageMax    = 2 << 20 // bytes of an image before base64
)

// wecom is the WeCom (企业微信) group robot API: POST
// https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=KEY, answered with
// {"errcode":0,"errmsg":"ok"}.
type wecom struct {
	url  string
	lang i18n.Lang
}

type wecomMsg struct {
	MsgType  string      `json:"msgtype"`
	Markdown *wecomText  `json:"markdown,omitempty"`
	Image    *wecomImage `json:"image,omitempty"`
}

type wecomText struct {
	Content string `json:"content"`
}

type wecomImage struct {
	Base64 string `json:"base64"`
	MD5    string `json:"md5"` // of the raw image bytes, hex
}

func (w *wecom) messages(r chat.Reply) ([]any, error) {
	var images []any
	var notes []string
	for _, im := range r.Images {
		data, err := fitImage(im.PNG, wecomImageMax)
		if err != nil {
			notes = append(notes, w.lang.T(i18n.PushChartNotSent, im.Name, err))
			continue
		}
		sum := md5.Sum(data)
		images = append(images, wecomMsg{MsgType: "image", Image: &wecomImage{
			Base64: base64.StdEncoding.EncodeToString(data), MD5: hex.EncodeToString(sum[:]),
		}})
		if im.Caption != "" {
			notes = append(notes, "📈 "+im.Caption)
		}
	}
	var out []any
	for _, part := range splitText(wecomColor(r, textOf(w.lang, r, notes)), wecomMarkdownMax, w.lang) {
		out = append(out, wecomMsg{MsgType: "markdown", Markdown: &wecomText{Content: part}})
	}
	return append(out, images...), nil
}

// wecomColor colours the first line of an alert: WeCom markdown knows
// <font color="info|comment|warning">.
func wecomColor(r chat.Reply, text string) string {
	color := ""
	switch sev := chat.SeverityOf(r); {
	case sev >= chat.SeverityWarning:
		color = "warning"
	case sev == chat.SeverityInfo:
		color = "info"
	}
	if color == "" || text == "" {
		return text
	}
	first, rest, _ := strings.Cut(text, "\n")
	out := `<font color="` + color + `">` + first + `</font>`
	if rest != "" {
		out += "\n" + rest
	}
	return out
}

func (w *wecom) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	return postJSON(ctx, w.url, msg)
}

func (w *wecom) result(status int, h http.Header, body []byte) *Error {
	return errcodeResult(status, h, body, map[int]time.Duration{
		-1:    0,           // 系统繁忙 system busy
		45009: time.Minute, // api freq out of limit: 20 messages a minute
		45033: time.Minute, // too many concurrent calls
	})
}

// errcodeResult reads {"errcode":N,"errmsg":"…"} (WeCom, DingTalk): 0 is
// success; the codes in temporary may be retried (after the pause given).
func errcodeResult(status int, h http.Header, body []byte, temporary map[int]time.Duration) *Error {
	var res struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if json.Unmarshal(body, &res) != nil || res.ErrCode == nil {
		if e := httpError(status, h, body); e != nil {
			return e
		}
		return &Error{Op: "reply", Status: status, Msg: "unreadable answer: " + snippet(body), Temporary: true}
	}
	if *res.ErrCode == 0 {
		return nil
	}
	e := &Error{Op: "reply", Status: status, Code: *res.ErrCode, Msg: res.ErrMsg}
	if after, ok := temporary[*res.ErrCode]; ok {
		e.Temporary, e.After = true, after
	}
	return e
}

package push

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// barkMax bounds a push's title, body and URL together: APNs takes a
// payload of 4 KB, which also holds Bark's own fields.
const barkMax = 3500

// bark is the Bark (iOS app) server's push API
// (https://github.com/Finb/bark-server/blob/master/docs/API_V2.md): POST
// {base}/push with {"device_key":…,"title":…,"body":…,"level":…}, answered
// with {"code":200,"message":"success","timestamp":…}; a failure carries
// the same code as the HTTP status (400 "failed to get device token" for
// an unknown key, 500 "push failed: …" when APNs refused).
type bark struct {
	base, key string
	lang      i18n.Lang
}

// barkMsg is one push; Volume is a string, as the API documents it.
type barkMsg struct {
	DeviceKey string `json:"device_key"`
	Title     string `json:"title,omitempty"`
	Body      string `json:"body"`
	Level     string `json:"level"`
	Volume    string `json:"volume,omitempty"`
	Group     string `json:"group"`
	URL       string `json:"url,omitempty"`
}

// barkLevels are iOS interruption levels by severity: critical rings
// through silent mode and focus (at Volume), timeSensitive through focus,
// passive does not light the screen.
var barkLevels = map[chat.Severity]string{
	chat.SeverityCritical: "critical",
	chat.SeverityWarning:  "timeSensitive",
	chat.SeverityInfo:     "active",
	chat.SeverityProgress: "passive",
}

// barkNoImages is why a chart is left out, in the channel's language (the
// note around it is i18n.PushNotShown).
func barkNoImages(l i18n.Lang) string { return l.T(i18n.PushNoBark) }

func (b *bark) messages(r chat.Reply) ([]any, error) {
	text := textOf(b.lang, r, imagesNotSent(b.lang, r, barkNoImages(b.lang)))
	m := barkMsg{DeviceKey: b.key, Level: barkLevels[chat.SeverityOf(r)], Group: "trainbot"}
	if m.Level == "critical" {
		m.Volume = "5"
	}
	for _, row := range r.Buttons {
		for _, btn := range row {
			if btn.URL != "" && m.URL == "" {
				m.URL = btn.URL
			}
		}
	}
	title, body, _ := strings.Cut(text, "\n")
	if body == "" || len(title) > 200 {
		title, body = "", text
	}
	m.Title = title
	m.Body = chat.SplitText(body, barkMax-len(m.Title)-len(m.URL), 1, b.lang)[0]
	return []any{m}, nil
}

func (b *bark) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	return postJSON(ctx, b.base+"/push", msg)
}

// APNs reasons (in a 500's message) that say the device key will never
// work again: the app was removed or the token is bad.
var barkGone = []string{"BadDeviceToken", "Unregistered", "DeviceTokenNotForTopic"}

// result reads Bark's answer: code 200 is success; 400 (an unknown device
// key, a bad request) is permanent; 429, 408 and 5xx may be retried,
// except a 500 in which APNs said the device is gone.
func (b *bark) result(status int, h http.Header, body []byte) *Error {
	var res struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &res) != nil || res.Code == 0 {
		if e := httpError(status, h, body); e != nil {
			return e
		}
		return &Error{Op: "reply", Status: status, Msg: "unreadable answer: " + snippet(body), Temporary: true}
	}
	if res.Code == http.StatusOK && status >= 200 && status < 300 {
		return nil
	}
	code := res.Code
	if status >= 300 {
		code = status
	}
	e := httpError(code, h, nil)
	if e == nil { // a 2xx code other than 200: taken
		return nil
	}
	e.Status, e.Code, e.Msg = status, res.Code, res.Message
	for _, gone := range barkGone {
		if strings.Contains(res.Message, gone) {
			e.Temporary = false
		}
	}
	return e
}

package push

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// webhookBodyMax bounds one generic webhook request; charts beyond it are
// left out with a note.
const webhookBodyMax = 8 << 20

// webhook posts one JSON object per reply (WebhookMessage) to any URL.
// With a secret, X-Trainbot-Timestamp and X-Trainbot-Signature headers
// let the receiver check it (WebhookSignature). 2xx is success; 408, 429
// and 5xx may be retried; other statuses are permanent.
type webhook struct{ url, secret string }

// WebhookMessage is the body of a generic webhook push.
type WebhookMessage struct {
	Source   string          `json:"source"`          // "trainbot"
	Kind     string          `json:"kind"`            // alert, progress, notice, reply
	Alert    string          `json:"alert,omitempty"` // oom, failed, nan, stalled, finished, stopped, gpu, xid, schedule
	Severity string          `json:"severity"`        // progress, info, warning, critical
	RunID    int64           `json:"run_id,omitempty"`
	Key      string          `json:"key,omitempty"` // the same key is the same alert: de-duplicate on it
	Text     string          `json:"text"`
	Images   []WebhookImage  `json:"images"`
	Buttons  []WebhookButton `json:"buttons"`
}

// WebhookImage is a chart.
type WebhookImage struct {
	Name      string `json:"name"`
	Caption   string `json:"caption,omitempty"`
	PNGBase64 string `json:"png_base64"`
}

// WebhookButton is a command the reply suggests.
type WebhookButton struct {
	Label string `json:"label"`
	Data  string `json:"data"` // the text to send to the bot
}

var kindNames = map[chat.Kind]string{chat.KindReply: "reply", chat.KindAlert: "alert", chat.KindProgress: "progress", chat.KindNotice: "notice"}

// webhookMessageOf is the reply as a WebhookMessage, without its charts.
func webhookMessageOf(r chat.Reply) WebhookMessage {
	m := WebhookMessage{
		Source: "trainbot", Kind: kindNames[r.Kind], Alert: r.Alert, Severity: chat.SeverityOf(r).String(),
		RunID: r.RunID, Key: r.Key, Text: r.Text, Images: []WebhookImage{}, Buttons: []WebhookButton{},
	}
	for _, row := range r.Buttons {
		for _, b := range row {
			m.Buttons = append(m.Buttons, WebhookButton{Label: b.Label, Data: b.Data})
		}
	}
	return m
}

func (w *webhook) messages(r chat.Reply) ([]any, error) {
	m := webhookMessageOf(r)
	size := len(r.Text) + 1024
	left := 0
	for _, im := range r.Images {
		enc := base64.StdEncoding.EncodeToString(im.PNG)
		if size+len(enc) > webhookBodyMax {
			left++
			continue
		}
		size += len(enc) + len(im.Caption) + 64
		m.Images = append(m.Images, WebhookImage{Name: im.Name, Caption: im.Caption, PNGBase64: enc})
	}
	if left > 0 {
		m.Text += fmt.Sprintf("\n(%d chart(s) left out: over %d bytes)", left, webhookBodyMax)
	}
	return []any{m}, nil
}

// WebhookSignature is the X-Trainbot-Signature of a generic webhook push:
// "sha256=" and the hex HMAC-SHA256, keyed with the secret, of the
// X-Trainbot-Timestamp value, ".", and the body.
func WebhookSignature(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (w *webhook) request(ctx context.Context, msg any, now time.Time) (*http.Request, error) {
	body, err := encodeJSON(msg)
	if err != nil {
		return nil, err
	}
	req, err := jsonRequest(ctx, w.url, body)
	if err != nil {
		return nil, err
	}
	if w.secret != "" {
		ts := strconv.FormatInt(now.Unix(), 10)
		req.Header.Set("X-Trainbot-Timestamp", ts)
		req.Header.Set("X-Trainbot-Signature", WebhookSignature(w.secret, ts, body))
	}
	return req, nil
}

func (w *webhook) result(status int, h http.Header, body []byte) *Error {
	return httpError(status, h, body)
}

package dingtalk

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// DingTalk's limits.
const (
	maxText  = 20000 - 1000 // bytes of a markdown text (the body's limit is 20 000)
	maxParts = 4
	maxImage = 10 << 20
)

// Send makes one attempt to deliver r to a chat (chat.Sender): its text
// as markdown (split at DingTalk's limit, buttons as links under the last
// part), then each chart uploaded and sent as an image. The first skip
// messages went out before.
func (t *Transport) Send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	ref, ok := t.ids.Ref(ctx, to)
	if !ok {
		return skip, chat.Permanent("unknown DingTalk chat", fmt.Errorf("dingtalk: chat %d has never written to the bot", to))
	}
	var steps []func(context.Context) error
	text := strings.TrimSpace(r.Text)
	parts := chat.SplitText(text, maxText-len(links(r)), maxParts, t.opts.Lang)
	for i, part := range parts {
		if i == len(parts)-1 {
			part += links(r)
		}
		steps = append(steps, func(ctx context.Context) error { return t.markdown(ctx, to, ref, part) })
	}
	for _, im := range r.Images {
		steps = append(steps, func(ctx context.Context) error {
			if len(im.PNG) == 0 || len(im.PNG) > maxImage {
				return t.markdown(ctx, to, ref, t.opts.Lang.T(i18n.ChartNotSentNote, im.Name, len(im.PNG), im.Command))
			}
			id, err := t.api.upload(ctx, im.Name, im.PNG)
			if err != nil {
				return err
			}
			return t.api.robot(ctx, ref, "sampleImageMsg", map[string]string{"photoURL": id})
		})
	}
	for i := skip; i < len(steps); i++ {
		if err := steps[i](ctx); err != nil {
			return i, sendError(err)
		}
	}
	return len(steps), nil
}

// markdown sends one markdown message: through the chat's session webhook
// while it is valid, else through the robot OpenAPI.
func (t *Transport) markdown(ctx context.Context, to int64, ref, text string) error {
	title, _, _ := strings.Cut(text, "\n")
	title = firstRunes(title, 30)
	body := strings.ReplaceAll(text, "\n", "  \n") // a markdown line break
	if hook, ok := t.webhook(to); ok {
		err := t.api.postJSON(ctx, "reply", hook, map[string]any{"msgtype": "markdown",
			"markdown": map[string]string{"title": title, "text": body}}, nil, nil)
		var ae *apiError
		if err == nil || (errors.As(err, &ae) && ae.after > 0) {
			return err
		}
		// The webhook expired or was refused: the OpenAPI can still send.
		t.log.Debug("session webhook failed; sending through the OpenAPI", "err", err)
		t.forgetWebhook(to)
	}
	return t.api.robot(ctx, ref, "sampleMarkdown", map[string]string{"title": title, "text": body})
}

// links are r's buttons as markdown links that send the command when
// tapped; "" when it has none.
func links(r chat.Reply) string {
	var out []string
	for _, row := range r.Buttons {
		for _, b := range row {
			data := chat.ButtonData(b.Data, r.RunID)
			out = append(out, fmt.Sprintf("[%s](dtmd://dingtalkclient/sendMessage?content=%s)", b.Label, url.QueryEscape(data)))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "\n\n" + strings.Join(out, " · ")
}

func firstRunes(s string, n int) string {
	if rs := []rune(s); len(rs) > n {
		return string(rs[:n-1]) + "…"
	}
	if s == "" {
		return "trainbot"
	}
	return s
}

// sendError says what a failed attempt means for bot/deliver.
func sendError(err error) error {
	if _, ok := errors.AsType[*chat.SendError](err); ok {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.after > 0:
			return chat.RetryAfter(ae.after, "DingTalk is throttling", err)
		case ae.status >= 500 || ae.status == 401:
			return &chat.SendError{Reason: "DingTalk answered " + fmt.Sprint(ae.status), Err: err}
		case ae.status >= 400:
			return chat.Permanent(fmt.Sprintf("DingTalk refused it (HTTP %d %s)", ae.status, ae.code), err)
		}
		// An errcode with HTTP 200: a refusal of this message.
		return chat.Permanent("DingTalk refused it ("+ae.code+")", err)
	}
	return &chat.SendError{Reason: "DingTalk did not answer", Err: err, After: time.Second}
}

package feishu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/trainbot/trainbot/bot/chat"
)

// Feishu's limits.
const (
	maxText     = 100 << 10 // bytes of a text message's text (150 KB for the whole body)
	maxCardText = 20 << 10  // bytes of a card's markdown (30 KB for the card)
	maxParts    = 4
	maxImage    = 10 << 20
	maxProgress = 256 // progress cards remembered
)

// throttleCodes are codes that mean "too many requests".
var throttleCodes = map[int]bool{99991400: true, 230020: true, 11232: true}

// Send makes one attempt to deliver r to a chat (chat.Sender). The first
// skip messages went out before.
func (t *Transport) Send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	chatID, ok := t.ids.Ref(ctx, to)
	if !ok {
		return skip, chat.Permanent("unknown Feishu chat", fmt.Errorf("feishu: chat %d has never written to the bot", to))
	}
	if r.Kind == chat.KindProgress {
		return 0, sendError(t.sendProgress(ctx, to, chatID, r))
	}
	var steps []func(context.Context) error
	text := strings.TrimSpace(r.Text)
	if hasButtons(r) {
		steps = append(steps, func(ctx context.Context) error {
			_, err := t.create(ctx, chatID, "interactive", card(r), uuid(chatID, r.Key, "card"))
			return err
		})
	} else {
		for i, part := range chat.SplitText(text, maxText, maxParts) {
			content, _ := json.Marshal(map[string]string{"text": part})
			steps = append(steps, func(ctx context.Context) error {
				_, err := t.create(ctx, chatID, "text", string(content), uuid(chatID, r.Key, "text"+strconv.Itoa(i)))
				return err
			})
		}
	}
	for i, im := range r.Images {
		steps = append(steps, func(ctx context.Context) error {
			if len(im.PNG) == 0 || len(im.PNG) > maxImage {
				content, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("(chart %s not sent: %d bytes; on the host: %s)", im.Name, len(im.PNG), im.Command)})
				_, err := t.create(ctx, chatID, "text", string(content), "")
				return err
			}
			key, err := t.uploadImage(ctx, im.PNG)
			if err != nil {
				return err
			}
			content, _ := json.Marshal(map[string]string{"image_key": key})
			_, err = t.create(ctx, chatID, "image", string(content), uuid(chatID, r.Key, "image"+strconv.Itoa(i)))
			return err
		})
	}
	for i := skip; i < len(steps); i++ {
		if err := steps[i](ctx); err != nil {
			return i, sendError(err)
		}
	}
	return len(steps), nil
}

// apiError is an answer with a non-zero code, or an HTTP error status.
type apiError struct {
	op     string
	status int
	code   int
	msg    string
	after  time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("feishu %s: HTTP %d, code %d: %s", e.op, e.status, e.code, e.msg)
}

// check turns an SDK answer into an error.
func (t *Transport) check(op string, resp *larkcore.ApiResp, ce larkcore.CodeError, err error) error {
	if err != nil {
		return fmt.Errorf("feishu %s: %w", op, redactURL(err))
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if ce.Code == 0 && status/100 == 2 {
		return nil
	}
	e := &apiError{op: op, status: status, code: ce.Code, msg: ce.Msg}
	if status == 429 || throttleCodes[ce.Code] {
		e.after = t.opts.ThrottlePause
		if resp != nil {
			if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s > 0 {
				e.after = time.Duration(s) * time.Second
			}
		}
	}
	return e
}

// uuid names one message of a reply to a chat: Feishu sends a message
// with a given uuid once an hour, so an attempt that timed out after
// Feishu took it is not shown twice. "" when the reply has no key.
func uuid(chatID, key, part string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(chatID + "\x00" + key + "\x00" + part))
	return hex.EncodeToString(sum[:16])
}

// create sends a message to a chat and returns its id; a uuid (when not
// empty) makes Feishu drop a repeat of the same send within an hour.
func (t *Transport) create(ctx context.Context, chatID, msgType, content, uuid string) (string, error) {
	body := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(chatID).MsgType(msgType).Content(content)
	if uuid != "" {
		body.Uuid(uuid)
	}
	req := larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(body.Build()).Build()
	resp, err := t.rest.Im.V1.Message.Create(ctx, req)
	if resp == nil {
		return "", t.check("send", nil, larkcore.CodeError{}, orNoAnswer(err))
	}
	if err := t.check("send", resp.ApiResp, resp.CodeError, err); err != nil {
		return "", err
	}
	if resp.Data == nil || resp.Data.MessageId == nil {
		return "", nil
	}
	return *resp.Data.MessageId, nil
}

// uploadImage uploads a chart and returns its image_key.
func (t *Transport) uploadImage(ctx context.Context, png []byte) (string, error) {
	req := larkim.NewCreateImageReqBuilder().Body(larkim.NewCreateImageReqBodyBuilder().
		ImageType("message").Image(bytes.NewReader(png)).Build()).Build()
	resp, err := t.rest.Im.V1.Image.Create(ctx, req)
	if resp == nil {
		return "", t.check("upload a chart", nil, larkcore.CodeError{}, orNoAnswer(err))
	}
	if err := t.check("upload a chart", resp.ApiResp, resp.CodeError, err); err != nil {
		return "", err
	}
	if resp.Data == nil || resp.Data.ImageKey == nil {
		return "", errors.New("feishu upload a chart: no image_key in the answer")
	}
	return *resp.Data.ImageKey, nil
}

func orNoAnswer(err error) error {
	if err == nil {
		return errors.New("no answer")
	}
	return err
}

// sendProgress updates the run's progress card in place, or sends it.
func (t *Transport) sendProgress(ctx context.Context, to int64, chatID string, r chat.Reply) error {
	k := progressKey{chat: to, run: r.RunID}
	t.mu.Lock()
	id := t.progress[k]
	t.mu.Unlock()
	c := card(r)
	if id != "" {
		req := larkim.NewPatchMessageReqBuilder().MessageId(id).Body(larkim.NewPatchMessageReqBodyBuilder().Content(c).Build()).Build()
		resp, err := t.rest.Im.V1.Message.Patch(ctx, req)
		if resp == nil {
			err = t.check("update the progress", nil, larkcore.CodeError{}, orNoAnswer(err))
		} else {
			err = t.check("update the progress", resp.ApiResp, resp.CodeError, err)
		}
		var ae *apiError
		if err == nil || !errors.As(err, &ae) || ae.after > 0 {
			return err
		}
		t.log.Debug("progress card cannot be updated; sending a new one", "run", r.RunID, "err", err)
	}
	id, err := t.create(ctx, chatID, "interactive", c, "")
	if err != nil {
		return err
	}
	t.mu.Lock()
	if len(t.progress) >= maxProgress {
		clear(t.progress)
	}
	t.progress[k] = id
	t.mu.Unlock()
	return nil
}

func hasButtons(r chat.Reply) bool {
	for _, row := range r.Buttons {
		if len(row) > 0 {
			return true
		}
	}
	return false
}

// card is r as an interactive card: its text as markdown, its buttons
// (callbacks whose value carries the command) below.
func card(r chat.Reply) string {
	text := strings.TrimSpace(r.Text)
	if len(text) > maxCardText {
		text = text[:chat.RuneCut(text, maxCardText-len("…"))] + "…"
	}
	elements := []any{map[string]any{"tag": "markdown", "content": text}}
	for _, row := range r.Buttons {
		var actions []any
		for i, b := range row {
			kind := "default"
			if i == 0 {
				kind = "primary"
			}
			actions = append(actions, map[string]any{"tag": "button", "type": kind,
				"text":  map[string]string{"tag": "plain_text", "content": b.Label},
				"value": map[string]string{"cmd": chat.ButtonData(b.Data, r.RunID)}})
		}
		if len(actions) > 0 {
			elements = append(elements, map[string]any{"tag": "action", "actions": actions})
		}
	}
	out, _ := json.Marshal(map[string]any{"config": map[string]bool{"wide_screen_mode": true, "update_multi": true}, "elements": elements})
	return string(out)
}

// sendError says what a failed attempt means for bot/deliver.
func sendError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*chat.SendError](err); ok {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.after > 0:
			return chat.RetryAfter(ae.after, "Feishu is throttling", err)
		case ae.status >= 500 || ae.status == 401 || ae.code == 99991663 || ae.code == 99991661:
			return &chat.SendError{Reason: fmt.Sprintf("Feishu answered %d (code %d)", ae.status, ae.code), Err: err}
		}
		return chat.Permanent(fmt.Sprintf("Feishu refused it (code %d %s)", ae.code, ae.msg), err)
	}
	return &chat.SendError{Reason: "Feishu did not answer", Err: err, After: time.Second}
}

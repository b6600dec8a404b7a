package feishu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Feishu's limits.
const (
	maxText     = 100 << 10 // bytes of a text message's text (150 KB for the whole body)
	maxCardText = 20 << 10  // bytes of a card's markdown (30 KB for the card)
	maxParts    = 4
	maxImage    = 10 << 20
	maxProgress = 256 // progress cards remembered
)

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
		for i, part := range chat.SplitText(text, maxText, maxParts, t.opts.Lang) {
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
				content, _ := json.Marshal(map[string]string{"text": t.opts.Lang.T(i18n.ChartNotSentNote, im.Name, len(im.PNG), im.Command)})
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
	body, _ := json.Marshal(struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
		UUID      string `json:"uuid,omitempty"`
	}{chatID, msgType, content, uuid})
	var out struct {
		MessageID string `json:"message_id"`
	}
	err := t.rest.call(ctx, "send", http.MethodPost, "/open-apis/im/v1/messages?receive_id_type=chat_id", jsonType, body, &out)
	return out.MessageID, err
}

// jsonType is the Content-Type of a JSON request.
const jsonType = "application/json; charset=utf-8"

// uploadImage uploads a chart (im/v1/images, image_type=message) and
// returns its image_key.
func (t *Transport) uploadImage(ctx context.Context, png []byte) (string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("image_type", "message")
	part, _ := w.CreateFormFile("image", "chart.png")
	_, _ = part.Write(png)
	_ = w.Close()
	var out struct {
		ImageKey string `json:"image_key"`
	}
	if err := t.rest.call(ctx, "upload a chart", http.MethodPost, "/open-apis/im/v1/images", w.FormDataContentType(), buf.Bytes(), &out); err != nil {
		return "", err
	}
	if out.ImageKey == "" {
		return "", errors.New("feishu upload a chart: no image_key in the answer")
	}
	return out.ImageKey, nil
}

// patch replaces the content of a card the bot sent.
func (t *Transport) patch(ctx context.Context, messageID, content string) error {
	body, _ := json.Marshal(map[string]string{"content": content})
	return t.rest.call(ctx, "update the progress", http.MethodPatch, "/open-apis/im/v1/messages/"+url.PathEscape(messageID), jsonType, body, nil)
}

// sendProgress updates the run's progress card in place, or sends it.
func (t *Transport) sendProgress(ctx context.Context, to int64, chatID string, r chat.Reply) error {
	k := progressKey{chat: to, run: r.RunID}
	t.mu.Lock()
	id := t.progress[k]
	t.mu.Unlock()
	c := card(r)
	if id != "" {
		err := t.patch(ctx, id, c)
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

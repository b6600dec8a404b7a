package wecom

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// WeCom's limits.
const (
	maxContent   = 20480     // bytes of a stream reply's or markdown's content
	maxParts     = 4         // messages one reply's text becomes at most
	maxItems     = 10        // images inline on a stream reply
	maxImage     = 10 << 20  // bytes of an image
	chunkSize    = 512 << 10 // bytes of an upload chunk before base64
	maxButtons   = 6         // buttons on a template card
	maxCardTitle = 36        // runes of a card's title (shown cut)
)

// throttleCodes are errcodes that mean "too many messages": the attempt
// is tried again after ThrottlePause. -1 is "system busy".
var throttleCodes = map[int]bool{-1: true, 45009: true, 45033: true, 846607: true}

// Send makes one attempt to deliver r to a chat (chat.Sender). The answer
// to a message goes as a stream reply on the message's req_id, charts
// inline; the rest is pushed (markdown, uploaded images); buttons are a
// template card. The first skip messages went out before.
func (t *Transport) Send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	c := t.current()
	if c == nil {
		return skip, chat.RetryAfter(2*time.Second, "not connected to WeCom", errors.New("wecom: not connected"))
	}
	ref, ok := t.ids.Ref(ctx, to)
	if !ok {
		return skip, chat.Permanent("unknown WeCom chat", fmt.Errorf("wecom: chat %d has never written to the bot", to))
	}
	steps := t.plan(c, to, ref, r)
	for i := skip; i < len(steps); i++ {
		if err := steps[i](ctx); err != nil {
			return i, t.sendError(err)
		}
	}
	return len(steps), nil
}

// plan is the messages of r, each a step that sends it.
func (t *Transport) plan(c *conn, to int64, ref string, r chat.Reply) []func(context.Context) error {
	text := strings.TrimSpace(r.Text)
	var notes []string
	var images [][]byte
	for _, im := range r.Images {
		if len(im.PNG) == 0 || len(im.PNG) > maxImage {
			notes = append(notes, t.opts.Lang.T(i18n.ChartNotSentNote, im.Name, len(im.PNG), im.Command))
			continue
		}
		images = append(images, im.PNG)
	}
	if len(notes) > 0 {
		text = strings.TrimSpace(text + "\n" + strings.Join(notes, "\n"))
	}
	parts := chat.SplitText(text, maxContent, maxParts, t.opts.Lang)
	var steps []func(context.Context) error
	p, stream := t.streamTo(to, r)
	if stream {
		first := ""
		if len(parts) > 0 {
			first, parts = parts[0], parts[1:]
		}
		inline := images
		if len(inline) > maxItems {
			inline, images = images[:maxItems], images[maxItems:]
		} else {
			images = nil
		}
		steps = append(steps, func(ctx context.Context) error {
			err := t.respond(ctx, c, p.reqID, first, inline)
			var ce *CodeError
			if err == nil || (errors.As(err, &ce) && !throttleCodes[ce.Code]) {
				t.donePending(to, p.reqID) // answered, or refused for good
			}
			return err
		})
	}
	for _, part := range parts {
		steps = append(steps, func(ctx context.Context) error {
			return t.push(ctx, c, ref, "markdown", map[string]any{"content": part})
		})
	}
	for i, png := range images {
		steps = append(steps, func(ctx context.Context) error {
			id, err := t.upload(ctx, c, fmt.Sprintf("chart-%d.png", i+1), png)
			if err != nil {
				return err
			}
			return t.push(ctx, c, ref, "image", map[string]any{"media_id": id})
		})
	}
	if card := buttonCard(r, t.seq.Add(1)); card != nil {
		steps = append(steps, func(ctx context.Context) error {
			return t.push(ctx, c, ref, "template_card", card)
		})
	}
	return steps
}

// streamTo is the callback r answers with a stream reply, when it is the
// answer to a message. A reply keeps the callback it was given, so that
// the messages of a later attempt are numbered as in the first.
func (t *Transport) streamTo(to int64, r chat.Reply) (pending, bool) {
	if r.Kind != chat.KindReply && r.Kind != chat.KindRefusal {
		return pending{}, false
	}
	t.mu.Lock()
	p, ok := t.claimed[r.Key]
	for k, old := range t.claimed {
		if time.Since(old.at) > 2*pendingMaxAge {
			delete(t.claimed, k)
		}
	}
	t.mu.Unlock()
	if ok && r.Key != "" {
		return p, true
	}
	p, ok = t.peekPending(to, r.ReplyTo)
	if ok && r.Key != "" {
		t.mu.Lock()
		t.claimed[r.Key] = p
		t.mu.Unlock()
	}
	return p, ok
}

// respond finishes the stream reply to a callback in one frame.
func (t *Transport) respond(ctx context.Context, c *conn, reqID, text string, images [][]byte) error {
	stream := map[string]any{"id": fmt.Sprintf("s%d", t.seq.Add(1)), "finish": true, "content": text}
	if len(images) > 0 {
		var items []any
		for _, png := range images {
			sum := md5.Sum(png)
			items = append(items, map[string]any{"msgtype": "image",
				"image": map[string]string{"base64": base64.StdEncoding.EncodeToString(png), "md5": hex.EncodeToString(sum[:])}})
		}
		stream["msg_item"] = items
	}
	f := frame{Cmd: cmdRespond, Headers: headers{ReqID: reqID}}
	f.Body, _ = json.Marshal(map[string]any{"msgtype": "stream", "stream": stream})
	_, err := c.request(ctx, f, t.opts.ReceiptTimeout)
	return err
}

// push sends a message of its own (aibot_send_msg) to a chat.
func (t *Transport) push(ctx context.Context, c *conn, chatRef, msgType string, content any) error {
	f := frame{Cmd: cmdSend, Headers: headers{ReqID: c.reqID(cmdSend)}}
	f.Body, _ = json.Marshal(map[string]any{"chatid": chatRef, "msgtype": msgType, msgType: content})
	_, err := c.request(ctx, f, t.opts.ReceiptTimeout)
	return err
}

// upload sends an image in chunks and returns its media_id.
func (t *Transport) upload(ctx context.Context, c *conn, name string, data []byte) (string, error) {
	chunks := (len(data) + chunkSize - 1) / chunkSize
	sum := md5.Sum(data)
	var init struct {
		UploadID string `json:"upload_id"`
	}
	if err := t.call(ctx, c, cmdUploadInit, map[string]any{"type": "image", "filename": name, "total_size": len(data),
		"total_chunks": chunks, "md5": hex.EncodeToString(sum[:])}, &init); err != nil {
		return "", err
	}
	if init.UploadID == "" {
		return "", errors.New("wecom upload: no upload_id in the answer")
	}
	for i := range chunks {
		part := data[i*chunkSize : min(len(data), (i+1)*chunkSize)]
		// chunk_index from 0, as the Node SDK's code sends it.
		if err := t.call(ctx, c, cmdUploadChunk, map[string]any{"upload_id": init.UploadID, "chunk_index": i,
			"base64_data": base64.StdEncoding.EncodeToString(part)}, nil); err != nil {
			return "", err
		}
	}
	var fin struct {
		MediaID string `json:"media_id"`
	}
	if err := t.call(ctx, c, cmdUploadFinish, map[string]any{"upload_id": init.UploadID}, &fin); err != nil {
		return "", err
	}
	if fin.MediaID == "" {
		return "", errors.New("wecom upload: no media_id in the answer")
	}
	return fin.MediaID, nil
}

// call makes a request and reads the receipt's body into out (may be nil).
func (t *Transport) call(ctx context.Context, c *conn, cmd string, body, out any) error {
	f := frame{Cmd: cmd, Headers: headers{ReqID: c.reqID(cmd)}}
	f.Body, _ = json.Marshal(body)
	r, err := c.request(ctx, f, t.opts.ReceiptTimeout)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		return fmt.Errorf("wecom %s: unreadable answer: %w", cmd, err)
	}
	return nil
}

// buttonCard is r's buttons as a button_interaction template card (at
// most six); nil when r has none. A button's key is its command text.
func buttonCard(r chat.Reply, n int64) map[string]any {
	var buttons []any
	for _, row := range r.Buttons {
		for _, b := range row {
			if len(buttons) < maxButtons && b.Data != "" {
				buttons = append(buttons, map[string]any{"text": b.Label, "style": 1, "key": chat.ButtonData(b.Data, r.RunID)})
			}
		}
	}
	if len(buttons) == 0 {
		return nil
	}
	title, _, _ := strings.Cut(strings.TrimSpace(r.Text), "\n")
	if rs := []rune(title); len(rs) > maxCardTitle {
		title = string(rs[:maxCardTitle-1]) + "…"
	}
	if title == "" {
		title = "trainbot"
	}
	return map[string]any{"card_type": "button_interaction", "main_title": map[string]string{"title": title},
		"button_list": buttons, "task_id": fmt.Sprintf("trainbot_%d_%d", time.Now().UnixMilli(), n)}
}

// sendError says what a failed attempt means for bot/deliver.
func (t *Transport) sendError(err error) error {
	var ce *CodeError
	switch {
	case errors.As(err, &ce) && throttleCodes[ce.Code]:
		return chat.RetryAfter(t.opts.ThrottlePause, fmt.Sprintf("WeCom is throttling (errcode %d)", ce.Code), err)
	case errors.As(err, &ce):
		return chat.Permanent(fmt.Sprintf("WeCom refused %s: errcode %d %s", ce.Cmd, ce.Code, ce.Msg), err)
	}
	return &chat.SendError{Reason: "WeCom did not answer: " + err.Error(), Err: err}
}

package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/trainbot/trainbot/bot/chat"
)

// Telegram's limits, counted in UTF-16 code units after entity parsing.
const (
	maxText     = 4096
	maxCaption  = 1024
	maxData     = 64 // bytes of a button's callback data
	maxMedia    = 10 // photos in one media group
	parseMode   = tgbotapi.ModeHTML
	maxProgress = 256 // progress messages remembered for editing
)

// Send makes one attempt to deliver a reply to a chat (chat.Sender): the
// text, split at Telegram's limit and escaped for HTML, with the buttons
// under its last part, then the charts, one photo by sendPhoto or several
// as one album by sendMediaGroup; the first skip of these messages went
// out in an earlier attempt and are left out. KindProgress replies edit
// the run's progress message in place. No call is tried again, and
// nothing waits for Telegram's pace: bot/deliver does both.
func (t *Transport) Send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	if r.Kind == chat.KindProgress {
		return 0, sendError(t.sendProgress(ctx, to, r))
	}
	n, err := t.send(ctx, to, r, skip)
	return n, sendError(err)
}

// UploadsCharts reports true: photos and albums are uploads of their own.
func (t *Transport) UploadsCharts() bool { return true }

// Pace is Telegram's flood limits (core.telegram.org/bots/faq): about one
// message a second in a chat, 20 a minute in a group, 30 a second in all.
func (t *Transport) Pace(to int64) (perChat, perSender []chat.Window) {
	if isGroup(to) {
		return t.opts.GroupPace, t.opts.GlobalPace
	}
	return t.opts.PrivatePace, t.opts.GlobalPace
}

// Telegram's limits as windows: a private chat gets bursts of 3 and then
// one a second; a group 3 in any 3 s and 20 in any minute; the bot 30 in
// any second.
var (
	DefaultPrivatePace = []chat.Window{{N: 3, Per: 3 * time.Second}}
	DefaultGroupPace   = []chat.Window{{N: 3, Per: 3 * time.Second}, {N: 20, Per: time.Minute}}
	DefaultGlobalPace  = []chat.Window{{N: 30, Per: time.Second}}
)

// isGroup: group, supergroup and channel ids are negative.
func isGroup(chat int64) bool { return chat < 0 }

// send sends the messages of r from the skip-th on and returns how many
// went out in all.
func (t *Transport) send(ctx context.Context, to int64, r chat.Reply, skip int) (int, error) {
	markup := t.keyboard(r)
	text := strings.TrimSpace(r.Text)
	if text == "" && len(r.Images) > 1 && markup != nil {
		// An album cannot carry buttons: they go under a line of text.
		text = fmt.Sprintf("%d charts", len(r.Images))
	}
	replyTo := int(r.ReplyTo)
	sent := 0
	if text != "" {
		parts := splitText(text, maxText)
		for i, part := range parts {
			if sent < skip {
				sent++
				continue
			}
			msg := tgbotapi.NewMessage(to, escape(part))
			msg.ParseMode = parseMode
			msg.DisableWebPagePreview = true
			if i == 0 && replyTo != 0 {
				msg.ReplyToMessageID = replyTo
				msg.AllowSendingWithoutReply = true
			}
			if i == len(parts)-1 && markup != nil {
				msg.ReplyMarkup = markup
			}
			if _, err := t.sendMessage(ctx, msg); err != nil {
				return sent, err
			}
			sent++
		}
		replyTo = 0
	}
	if len(r.Images) == 0 {
		return sent, nil
	}
	var photoMarkup *tgbotapi.InlineKeyboardMarkup
	if text == "" {
		photoMarkup = markup
	}
	n, err := t.sendImages(ctx, to, r.Images, photoMarkup, replyTo, max(skip-sent, 0))
	return sent + n, err
}

func (t *Transport) sendMessage(ctx context.Context, msg tgbotapi.MessageConfig) (tgbotapi.Message, error) {
	res, err := t.api.request(ctx, "sendMessage", msg)
	if err != nil {
		return tgbotapi.Message{}, err
	}
	var m tgbotapi.Message
	if err := json.Unmarshal(res, &m); err != nil {
		return tgbotapi.Message{}, fmt.Errorf("telegram sendMessage: read the answer: %w", err)
	}
	return m, nil
}

// sendImages sends one photo with sendPhoto, several as albums of up to
// ten with sendMediaGroup (a last single one with sendPhoto), leaving out
// the first skip of these messages. It returns how many of them went out,
// the skipped ones included.
func (t *Transport) sendImages(ctx context.Context, to int64, imgs []chat.Image, markup *tgbotapi.InlineKeyboardMarkup, replyTo, skip int) (int, error) {
	sent := 0
	for len(imgs) > 0 {
		n := min(len(imgs), maxMedia)
		if len(imgs)-n == 1 {
			n-- // never leave a single photo for an album
		}
		batch := imgs[:n]
		imgs = imgs[n:]
		if sent < skip {
			sent++
			continue
		}
		if len(batch) == 1 {
			img := batch[0]
			p := tgbotapi.NewPhoto(to, tgbotapi.FileBytes{Name: imageName(img), Bytes: img.PNG})
			p.Caption = escape(clipUTF16(img.Caption, maxCaption))
			p.ParseMode = parseMode
			p.ReplyToMessageID = replyTo
			p.AllowSendingWithoutReply = replyTo != 0
			if len(imgs) == 0 && markup != nil {
				p.ReplyMarkup = markup
			}
			if _, err := t.api.request(ctx, "sendPhoto", p); err != nil {
				return sent, err
			}
			sent++
			continue
		}
		media := make([]any, len(batch))
		for i, img := range batch {
			m := tgbotapi.NewInputMediaPhoto(tgbotapi.FileBytes{Name: imageName(img), Bytes: img.PNG})
			m.Caption = escape(clipUTF16(img.Caption, maxCaption))
			m.ParseMode = parseMode
			media[i] = m
		}
		g := tgbotapi.NewMediaGroup(to, media)
		g.ReplyToMessageID = replyTo
		if _, err := t.api.request(ctx, "sendMediaGroup", g); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

func imageName(img chat.Image) string {
	if img.Name != "" {
		return img.Name
	}
	return "chart.png"
}

type progressKey struct {
	chat int64
	run  int64
}

// sendProgress shows a run's progress as one message: sent the first time,
// edited in place afterwards (a message that can no longer be edited is
// replaced by a new one).
func (t *Transport) sendProgress(ctx context.Context, to int64, r chat.Reply) error {
	k := progressKey{chat: to, run: r.RunID}
	text := progressHTML(clipUTF16(strings.TrimSpace(r.Text), maxText))
	markup := t.keyboard(r)
	t.mu.Lock()
	id, ok := t.progress[k]
	t.mu.Unlock()
	if ok {
		edit := tgbotapi.NewEditMessageText(to, id, text)
		edit.ParseMode = parseMode
		edit.DisableWebPagePreview = true
		edit.ReplyMarkup = markup
		_, err := t.api.request(ctx, "editMessageText", edit)
		switch {
		case err == nil:
			return nil
		case strings.Contains(description(err), "message is not modified"):
			return nil
		case apiCode(err) != 400:
			return err
		}
		// The message is gone or too old to edit: start a new one.
		t.log.Debug("progress message cannot be edited; sending a new one", "chat", to, "run", r.RunID, "err", err)
	}
	msg := tgbotapi.NewMessage(to, text)
	msg.ParseMode = parseMode
	msg.DisableWebPagePreview = true
	msg.DisableNotification = true
	if markup != nil {
		msg.ReplyMarkup = markup
	}
	res, err := t.api.request(ctx, "sendMessage", msg)
	if err != nil {
		return err
	}
	var m tgbotapi.Message
	if err := json.Unmarshal(res, &m); err != nil {
		return fmt.Errorf("telegram sendMessage: read the answer: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.progress[k] = m.MessageID
	t.progressOrder = append(t.progressOrder, k)
	for len(t.progressOrder) > maxProgress {
		delete(t.progress, t.progressOrder[0])
		t.progressOrder = t.progressOrder[1:]
	}
	return nil
}

// progressHTML escapes a progress text and puts its first line in bold.
func progressHTML(s string) string {
	first, rest, found := strings.Cut(s, "\n")
	out := "<b>" + escape(first) + "</b>"
	if found {
		out += "\n" + escape(rest)
	}
	return out
}

// keyboard turns the reply's buttons into an inline keyboard. A button
// under a message about a run acts on that run ("停止" becomes "停止 12"),
// so pressing it on an old message never touches a newer run.
func (t *Transport) keyboard(r chat.Reply) *tgbotapi.InlineKeyboardMarkup {
	var rows [][]tgbotapi.InlineKeyboardButton
	for _, row := range r.Buttons {
		var out []tgbotapi.InlineKeyboardButton
		for _, b := range row {
			if b.URL != "" {
				out = append(out, tgbotapi.NewInlineKeyboardButtonURL(b.Label, b.URL))
				continue
			}
			data := buttonData(b.Data, r.RunID)
			if len(data) > maxData {
				t.log.Warn("button data too long for Telegram; button left out", "label", b.Label, "bytes", len(data))
				continue
			}
			out = append(out, tgbotapi.NewInlineKeyboardButtonData(b.Label, data))
		}
		if len(out) > 0 {
			rows = append(rows, out)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	m := tgbotapi.NewInlineKeyboardMarkup(rows...)
	return &m
}

// buttonData adds the run id to a bare command that takes a run
// (chat.ButtonData).
func buttonData(data string, runID int64) string { return chat.ButtonData(data, runID) }

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes text safe for Telegram's HTML parse mode.
func escape(s string) string { return htmlEscaper.Replace(s) }

func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// splitText cuts s into parts of at most limit UTF-16 code units, at a
// line break where there is one in the second half of a part, else at a
// space, else anywhere between two characters.
func splitText(s string, limit int) []string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var parts []string
	for s != "" {
		n, end := 0, len(s)
		for i, r := range s {
			if n+utf16Len(r) > limit {
				end = i
				break
			}
			n += utf16Len(r)
		}
		if end == len(s) {
			parts = append(parts, s)
			break
		}
		cut := end
		if i := strings.LastIndexByte(s[:end], '\n'); i > end/2 {
			cut = i
		} else if i := strings.LastIndexByte(s[:end], ' '); i > end/2 {
			cut = i
		}
		part := strings.TrimRight(s[:cut], " \n")
		if part != "" {
			parts = append(parts, part)
		}
		s = strings.TrimLeft(s[cut:], " \n")
	}
	return parts
}

// clipUTF16 shortens s to at most limit UTF-16 code units, ending in "…".
func clipUTF16(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(utf16.Encode([]rune(s))) <= limit {
		return s
	}
	n := 0
	for i, r := range s {
		if n+utf16Len(r) > limit-1 {
			return s[:i] + "…"
		}
		n += utf16Len(r)
	}
	return s
}

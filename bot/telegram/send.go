package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/trainbot/trainbot/bot"
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

// Send delivers a reply to a chat: the text (split at Telegram's limit,
// escaped for HTML) with the buttons under its last part, then the charts,
// one photo by sendPhoto or several as one album by sendMediaGroup. A chart
// that fails after the text went out is reported in the log and in a short
// note, and does not fail the reply, so a retry never repeats the text.
// When a reply with a Key fails part-way (its second part, an album), a
// later Send of it resumes after the messages that went out.
// KindProgress replies edit the run's progress message in place.
//
// Flood control is honoured: calls are paced per chat, a 429 holds the chat
// back for its retry_after, and temporary failures are retried with a
// growing pause (progress updates are tried once: the next one replaces
// them).
func (t *Transport) Send(ctx context.Context, chat int64, r bot.Reply) error {
	return t.send(ctx, chat, r, 0)
}

func (t *Transport) send(ctx context.Context, chat int64, r bot.Reply, replyTo int) error {
	if r.Kind == bot.KindProgress {
		return t.sendProgress(ctx, chat, r)
	}
	markup := t.keyboard(r)
	text := strings.TrimSpace(r.Text)
	if text == "" && len(r.Images) > 1 && markup != nil {
		// An album cannot carry buttons: they go under a line of text.
		text = fmt.Sprintf("%d charts", len(r.Images))
	}
	// A reply that failed part-way is resumed after the messages that went
	// out, so that the outbox's retry does not repeat them.
	skip := t.partsSent(chat, r.Key)
	sent := 0
	if text != "" {
		parts := splitText(text, maxText)
		for i, part := range parts {
			if sent < skip {
				sent++
				continue
			}
			msg := tgbotapi.NewMessage(chat, escape(part))
			msg.ParseMode = parseMode
			msg.DisableWebPagePreview = true
			if i == 0 && replyTo != 0 {
				msg.ReplyToMessageID = replyTo
				msg.AllowSendingWithoutReply = true
			}
			if i == len(parts)-1 && markup != nil {
				msg.ReplyMarkup = markup
			}
			if _, err := t.sendMessage(ctx, chat, msg); err != nil {
				t.notePartsSent(chat, r.Key, sent)
				return err
			}
			sent++
		}
	}
	if len(r.Images) == 0 {
		t.notePartsSent(chat, r.Key, 0)
		return nil
	}
	var photoMarkup *tgbotapi.InlineKeyboardMarkup
	if text == "" {
		photoMarkup = markup
	}
	batches, err := t.sendImages(ctx, chat, r.Images, photoMarkup, replyTo, max(skip-sent, 0))
	if err != nil && text == "" {
		t.notePartsSent(chat, r.Key, sent+batches)
		return err
	}
	t.notePartsSent(chat, r.Key, 0)
	if err == nil {
		return nil
	}
	t.log.Warn("chart not sent; the text was", "chat", chat, "run", r.RunID, "err", err)
	if ctx.Err() == nil {
		note := tgbotapi.NewMessage(chat, escape("(the chart could not be sent: "+clipUTF16(description(err), 200)+")"))
		note.ParseMode = parseMode
		if _, nerr := t.call(ctx, chat, "sendMessage", note, 1); nerr != nil {
			t.log.Debug("chart failure note not sent", "err", nerr)
		}
	}
	return nil
}

func (t *Transport) sendMessage(ctx context.Context, chat int64, msg tgbotapi.MessageConfig) (tgbotapi.Message, error) {
	res, err := t.call(ctx, chat, "sendMessage", msg, t.opts.Attempts)
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
func (t *Transport) sendImages(ctx context.Context, chat int64, imgs []bot.Image, markup *tgbotapi.InlineKeyboardMarkup, replyTo, skip int) (int, error) {
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
			p := tgbotapi.NewPhoto(chat, tgbotapi.FileBytes{Name: imageName(img), Bytes: img.PNG})
			p.Caption = escape(clipUTF16(img.Caption, maxCaption))
			p.ParseMode = parseMode
			p.ReplyToMessageID = replyTo
			p.AllowSendingWithoutReply = replyTo != 0
			if len(imgs) == 0 && markup != nil {
				p.ReplyMarkup = markup
			}
			if _, err := t.call(ctx, chat, "sendPhoto", p, t.opts.Attempts); err != nil {
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
		g := tgbotapi.NewMediaGroup(chat, media)
		g.ReplyToMessageID = replyTo
		if _, err := t.call(ctx, chat, "sendMediaGroup", g, t.opts.Attempts); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

// partKey names a reply to a chat.
type partKey struct {
	chat int64
	key  string
}

// maxPartial bounds the replies remembered as sent part-way.
const maxPartial = 1024

// partsSent is how many messages of the reply with this key went out
// before an earlier Send of it failed.
func (t *Transport) partsSent(chat int64, key string) int {
	if key == "" {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.partial[partKey{chat, key}]
}

// notePartsSent remembers that n messages of a reply went out (0: all of
// them, or none: nothing to resume).
func (t *Transport) notePartsSent(chat int64, key string, n int) {
	if key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := partKey{chat, key}
	if n == 0 {
		delete(t.partial, k)
		return
	}
	if len(t.partial) >= maxPartial { // replies given up on: forget them
		clear(t.partial)
	}
	t.partial[k] = n
}

func imageName(img bot.Image) string {
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
// edited in place afterwards. It is tried once: the next update replaces it.
func (t *Transport) sendProgress(ctx context.Context, chat int64, r bot.Reply) error {
	k := progressKey{chat: chat, run: r.RunID}
	text := progressHTML(clipUTF16(strings.TrimSpace(r.Text), maxText))
	markup := t.keyboard(r)
	t.mu.Lock()
	id, ok := t.progress[k]
	t.mu.Unlock()
	if ok {
		edit := tgbotapi.NewEditMessageText(chat, id, text)
		edit.ParseMode = parseMode
		edit.DisableWebPagePreview = true
		edit.ReplyMarkup = markup
		_, err := t.call(ctx, chat, "editMessageText", edit, 1)
		switch {
		case err == nil:
			return nil
		case strings.Contains(description(err), "message is not modified"):
			return nil
		case apiCode(err) != 400:
			return err
		}
		// The message is gone or too old to edit: start a new one.
		t.log.Debug("progress message cannot be edited; sending a new one", "chat", chat, "run", r.RunID, "err", err)
	}
	msg := tgbotapi.NewMessage(chat, text)
	msg.ParseMode = parseMode
	msg.DisableWebPagePreview = true
	msg.DisableNotification = true
	if markup != nil {
		msg.ReplyMarkup = markup
	}
	res, err := t.call(ctx, chat, "sendMessage", msg, 1)
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

// call makes one API call for a chat: it waits for the chat's pace, and
// tries a temporary failure again up to attempts times, after the wait a
// 429 asked for or a doubling pause.
func (t *Transport) call(ctx context.Context, chat int64, method string, c tgbotapi.Chattable, attempts int) (json.RawMessage, error) {
	pause := t.opts.RetryPause
	for attempt := 1; ; attempt++ {
		if chat != 0 { // calls that send nothing to a chat are not paced
			if err := t.pace.wait(ctx, chat); err != nil {
				return nil, fmt.Errorf("telegram %s: %w", method, err)
			}
		}
		res, err := t.api.request(ctx, method, c)
		if err == nil {
			return res, nil
		}
		var e *Error
		retry := time.Duration(0)
		if errors.As(err, &e) && e.Retry > 0 {
			retry = e.Retry
			t.pace.block(chat, time.Now(), retry)
		}
		if attempt >= attempts || !temporary(err) || ctx.Err() != nil {
			return nil, err
		}
		if retry > t.opts.MaxRetryWait {
			return nil, err // let the caller (the outbox) come back later
		}
		t.log.Debug("telegram call failed, retrying", "method", method, "chat", chat, "attempt", attempt, "err", err)
		wait := retry
		if retry == 0 {
			wait = pause
			pause = min(pause*2, 30*time.Second)
		} else if chat != 0 {
			wait = 0 // the pacer holds the chat until retry_after has passed
		}
		if wait > 0 {
			if err := bot.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("telegram %s: %w", method, err)
			}
		}
	}
}

// keyboard turns the reply's buttons into an inline keyboard. A button
// under a message about a run acts on that run ("停止" becomes "停止 12"),
// so pressing it on an old message never touches a newer run.
func (t *Transport) keyboard(r bot.Reply) *tgbotapi.InlineKeyboardMarkup {
	var rows [][]tgbotapi.InlineKeyboardButton
	for _, row := range r.Buttons {
		var out []tgbotapi.InlineKeyboardButton
		for _, b := range row {
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

// buttonData adds the run id to a bare command that takes a run.
func buttonData(data string, runID int64) string {
	if runID <= 0 || strings.ContainsAny(data, " \t\n") {
		return data
	}
	p := bot.Parse(data)
	if p.Cmd == nil || p.Start || len(p.Args) > 0 || !strings.HasPrefix(p.Cmd.Args, "[run]") {
		return data
	}
	return data + " " + strconv.FormatInt(runID, 10)
}

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

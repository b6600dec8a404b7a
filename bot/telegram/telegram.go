// Package telegram is trainbot's Telegram transport, on
// github.com/go-telegram-bot-api/telegram-bot-api/v5.
//
// It runs its own long-poll loop over getUpdates (not the library's
// GetUpdatesChan, which cannot be cancelled, ignores retry_after and logs
// URLs that contain the token): every call has a context, the HTTP client's
// timeout is longer than the poll, errors back off (reconnect.Loop, reset by
// an answered call) up to a cap or for the retry_after Telegram asked, and
// the offset is stored before an update is handled, so an update is never
// handled twice, not even across a restart.
//
// As a chat.Receiver, it turns messages and button presses into
// chat.Messages, one chat at a time in order. A press is answered
// (answerCallbackQuery) once its message is handled, off the chat's path:
// with the refusal as a toast only the presser sees when bot/deliver's
// refusal rule says so (chat.Press), else with nothing. An edited message
// and a channel post addressed to the bot are handed on marked as such
// (chat.Message Edited, Channel) for the router to audit; it carries
// neither out. As a chat.Sender, each Send
// is one attempt: text split at Telegram's limit and escaped for HTML,
// with inline buttons; charts as photos (several as one album), uploaded
// on the pipeline's side path (chat.ChartUploader); a run's live progress
// as one message edited in place. It never tries a call again and never
// waits for Telegram's flood limits: it tells bot/deliver the limits (Pace)
// and what each failure means (a 429's retry_after, a refusal for good).
// Every answer is read with a limit (maxAnswer). The token never appears
// in an error or a log line.
package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/bot/reconnect"
	"github.com/trainbot/trainbot/i18n"
)

// Name is the transport's name.
const Name = "telegram"

// DefaultEndpoint is Telegram's Bot API server.
const DefaultEndpoint = "https://api.telegram.org"

// KV keeps small values across restarts (the store's key-value table).
type KV interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Set(ctx context.Context, key, value string) error
}

// Options configure a Transport.
type Options struct {
	Token string
	// APIEndpoint is the Bot API server's base URL (DefaultEndpoint, or a
	// local Bot API server's).
	APIEndpoint string
	// PollTimeout is how long one getUpdates waits for news (default 30 s,
	// whole seconds).
	PollTimeout time.Duration
	// State keeps the update offset across restarts; nil keeps it in memory.
	State  KV
	Logger *slog.Logger
	// HTTPClient replaces the default client, whose timeout is PollTimeout
	// plus 15 s.
	HTTPClient *http.Client
	// Pace per private chat, per group, and for the whole bot (the Default…
	// limits when nil), kept by bot/deliver.
	PrivatePace, GroupPace, GlobalPace []chat.Window
	// RetryPause is the first pause after a failed getMe or getUpdates
	// (default 1 s; a longer retry_after of a 429 replaces it); it doubles
	// with each failure in a row up to MaxPollBackoff (default 60 s), and
	// an answered call starts over.
	RetryPause     time.Duration
	MaxPollBackoff time.Duration
	// MinPoll is the least time between two polls (default 1 s): a server
	// that answers getUpdates at once with nothing is not asked again and
	// again.
	MinPoll time.Duration
	// HandleGrace is how long messages being handled may take to finish
	// after Run is asked to stop (default 10 s).
	HandleGrace time.Duration
	// Lang is the language of the command menu: English descriptions in
	// "en", Chinese ones that name the Chinese word otherwise.
	Lang i18n.Lang
}

// Transport is the Telegram transport.
type Transport struct {
	opts Options
	log  *slog.Logger
	api  *api
	link chat.LinkState

	presses chan pressAnswer // answers of button presses, for pressWorkers

	mu            sync.Mutex
	self          tgbotapi.User
	seenChats     map[int64]bool      // chats logged since the start
	progress      map[progressKey]int // progress message per chat and run
	progressOrder []progressKey
}

var (
	_ chat.Receiver        = (*Transport)(nil)
	_ chat.Sender          = (*Transport)(nil)
	_ chat.ChartUploader   = (*Transport)(nil)
	_ chat.InPlaceProgress = (*Transport)(nil)
	_ chat.Paced           = (*Transport)(nil)
	_ chat.Linked          = (*Transport)(nil)
)

// New returns a transport. It makes no call: Run checks the token.
func New(opts Options) (*Transport, error) {
	if opts.Token == "" {
		return nil, errors.New("telegram: no token")
	}
	if opts.APIEndpoint == "" {
		opts.APIEndpoint = DefaultEndpoint
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 30 * time.Second
	}
	opts.PollTimeout = max(opts.PollTimeout.Round(time.Second), time.Second)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		// The default transport honours HTTPS_PROXY; a clone keeps its
		// connections to itself.
		var rt http.RoundTripper = http.DefaultTransport
		if tr, ok := rt.(*http.Transport); ok {
			rt = tr.Clone()
		}
		opts.HTTPClient = &http.Client{Transport: rt, Timeout: opts.PollTimeout + 15*time.Second}
	}
	if opts.HTTPClient.Timeout != 0 && opts.HTTPClient.Timeout <= opts.PollTimeout {
		return nil, fmt.Errorf("telegram: the HTTP client's timeout (%s) must be longer than the poll timeout (%s)", opts.HTTPClient.Timeout, opts.PollTimeout)
	}
	if opts.PrivatePace == nil {
		opts.PrivatePace = DefaultPrivatePace
	}
	if opts.GroupPace == nil {
		opts.GroupPace = DefaultGroupPace
	}
	if opts.GlobalPace == nil {
		opts.GlobalPace = DefaultGlobalPace
	}
	if opts.RetryPause <= 0 {
		opts.RetryPause = time.Second
	}
	if opts.MinPoll <= 0 {
		opts.MinPoll = time.Second
	}
	if opts.MaxPollBackoff <= 0 {
		opts.MaxPollBackoff = time.Minute
	}
	if opts.HandleGrace <= 0 {
		opts.HandleGrace = 10 * time.Second
	}
	return &Transport{
		opts:     opts,
		log:      opts.Logger.With("transport", Name),
		api:      newAPI(opts.Token, opts.APIEndpoint, opts.HTTPClient),
		progress: map[progressKey]int{},
		presses:  make(chan pressAnswer, maxPressesWaiting),
	}, nil
}

// Name returns "telegram".
func (t *Transport) Name() string { return Name }

// ProgressInPlace reports true: a run's progress is one message, edited.
func (t *Transport) ProgressInPlace() bool { return true }

// Self returns the bot's own user, known once Run has connected.
func (t *Transport) Self() tgbotapi.User {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.self
}

// Link says whether Telegram answered the last getMe or getUpdates, since
// when, and the cap of the pauses between tries (MaxPollBackoff).
func (t *Transport) Link() chat.Link { return t.link.Link() }

// Receive connects (checking the token, retrying while Telegram cannot be
// reached), registers the command menu, and delivers updates until ctx
// ends. It returns an error only when Telegram refuses the token: a
// chat.PermanentError (only a new config and a restart help). Messages
// being handled when ctx ends get HandleGrace to finish.
//
// getMe and getUpdates go through one reconnect.Loop: a failed call waits
// RetryPause, doubling up to MaxPollBackoff (jittered, shorter only), or
// the retry_after Telegram asked; an answered call starts over.
func (t *Transport) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	answered := t.answerPresses(hctx)
	q := inbound.NewQueue(t.log)
	d := func(u tgbotapi.Update) { q.Add(chatOf(u), func() { t.handleUpdate(hctx, deliver, u) }) }

	var (
		me       tgbotapi.User
		offset   int64
		news     time.Time
		menuDone chan struct{}
	)
	loop := reconnect.Loop{Log: t.log, Link: &t.link,
		Backoff: reconnect.Backoff{Initial: t.opts.RetryPause, Max: t.opts.MaxPollBackoff, Jitter: 0.2}}
	err := loop.Run(ctx, func(ctx context.Context, healthy func()) error {
		if menuDone == nil {
			u, err := t.getMe(ctx)
			if err != nil {
				return err
			}
			healthy()
			me = u
			t.mu.Lock()
			t.self = me
			t.mu.Unlock()
			t.log.Info("connected", "bot", "@"+me.UserName, "id", me.ID)
			// The menu is not needed to answer: a slow or rate-limited
			// setMyCommands does not hold up the first poll.
			menuDone = make(chan struct{})
			go func() {
				defer close(menuDone)
				t.registerCommands(ctx)
			}()
			offset, news = t.loadOffset(ctx, me.ID)
		}
		var err error
		offset, news, err = t.poll(ctx, me.ID, offset, news, d, healthy)
		return err
	})
	if menuDone != nil {
		defer func() { <-menuDone }()
	}

	// Let the messages being handled finish, within the grace.
	finished := make(chan struct{})
	go func() { q.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(t.opts.HandleGrace):
		t.log.Warn("stopping the messages still being handled")
		hcancel()
		<-finished
	}
	answered()
	t.confirm(ctx, offset)
	return err
}

// getMe makes one getMe call. A refused token or an unknown bot is a
// permanent error; Telegram's retry_after is kept.
func (t *Transport) getMe(ctx context.Context) (tgbotapi.User, error) {
	me, err := t.api.getMe(ctx)
	if err == nil {
		t.link.Up()
		return me, nil
	}
	switch apiCode(err) {
	case 401:
		return tgbotapi.User{}, chat.Permanent("Telegram refused the token", fmt.Errorf("token refused (%w): check [telegram] token or TRAINBOT_TELEGRAM_TOKEN", err))
	case 404:
		return tgbotapi.User{}, chat.Permanent("Telegram knows no such bot", fmt.Errorf("no such bot (%w): check [telegram] token and api_endpoint", err))
	}
	return tgbotapi.User{}, withRetryAfter(fmt.Errorf("cannot reach Telegram: %w", err))
}

// withRetryAfter makes a Telegram error that asks to wait a
// chat.RetryAfter, for reconnect.Loop.
func withRetryAfter(err error) error {
	if ra := retryAfter(err); ra > 0 {
		return chat.RetryAfter(ra, "Telegram asked to wait", err)
	}
	return err
}

// registerCommands sets the command menu: the English commands with Chinese
// descriptions that also give the Chinese word, which works as plain text.
func (t *Transport) registerCommands(ctx context.Context) {
	cmds := make([]tgbotapi.BotCommand, 0, len(chat.Commands))
	for _, c := range chat.Commands {
		cmds = append(cmds, tgbotapi.BotCommand{Command: c.Name, Description: CommandDescription(t.opts.Lang, c)})
	}
	if _, err := t.api.request(ctx, "setMyCommands", tgbotapi.NewSetMyCommands(cmds...)); err != nil {
		t.log.Warn("command menu not registered", "err", err)
		return
	}
	t.log.Debug("command menu registered", "commands", len(cmds))
}

// CommandDescription is a command's line in Telegram's menu:
// "开始训练（也可发“开始”）", or in English "start a run".
func CommandDescription(l i18n.Lang, c chat.Command) string {
	if l == i18n.En {
		return l.T(c.Help)
	}
	return fmt.Sprintf("%s（也可发“%s”）", c.HelpZH, c.Chinese)
}

var allowedUpdates = []string{tgbotapi.UpdateTypeMessage, tgbotapi.UpdateTypeEditedMessage, tgbotapi.UpdateTypeCallbackQuery,
	tgbotapi.UpdateTypeChannelPost, tgbotapi.UpdateTypeEditedChannelPost}

// poll long-polls getUpdates until ctx ends or a call fails, and returns
// the next offset and when the last update came (news), with the failure.
// The offset is stored before the updates are handed on (d queues them).
// An answered poll is healthy.
func (t *Transport) poll(ctx context.Context, botID, offset int64, news time.Time, d func(tgbotapi.Update), healthy func()) (int64, time.Time, error) {
	for {
		if ctx.Err() != nil {
			return offset, news, nil
		}
		if offset > 0 && time.Since(news) > offsetMaxAge {
			// Every update so far was confirmed by the polls since; the
			// next may be numbered at random, below the offset.
			t.log.Debug("no update for days; polling without an offset")
			offset = 0
		}
		cfg := tgbotapi.UpdateConfig{Offset: int(offset), Limit: 100, Timeout: int(t.opts.PollTimeout / time.Second), AllowedUpdates: allowedUpdates}
		began := time.Now()
		res, err := t.api.request(ctx, "getUpdates", cfg)
		var updates []tgbotapi.Update
		if err == nil {
			updates, err = t.decodeUpdates(res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return offset, news, nil
			}
			switch apiCode(err) {
			case 401:
				return offset, news, chat.Permanent("Telegram refused the token", fmt.Errorf("token refused (%w): check [telegram] token or TRAINBOT_TELEGRAM_TOKEN", err))
			case 409:
				err = fmt.Errorf("getUpdates conflict: another trainbot uses this token, or a webhook is set (deleteWebhook removes it): %w", err)
			}
			return offset, news, withRetryAfter(err)
		}
		t.link.Up()
		healthy()
		if len(updates) == 0 {
			// A long poll that came back at once with nothing (a server
			// without long polling, a proxy): not asked again at once.
			if chat.Sleep(ctx, t.opts.MinPoll-time.Since(began)) != nil {
				return offset, news, nil
			}
		}
		var fresh []tgbotapi.Update
		next := offset
		for _, u := range updates {
			if int64(u.UpdateID) < offset {
				continue // handled before
			}
			fresh = append(fresh, u)
			next = max(next, int64(u.UpdateID)+1)
		}
		if next != offset {
			offset, news = next, time.Now()
			t.saveOffset(ctx, botID, offset)
		}
		for _, u := range fresh {
			d(u)
		}
	}
}

// decodeUpdates reads a getUpdates result one update at a time, so an
// update the library cannot read is skipped instead of being fetched again
// forever.
func (t *Transport) decodeUpdates(res json.RawMessage) ([]tgbotapi.Update, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(res, &raws); err != nil {
		return nil, fmt.Errorf("telegram getUpdates: read the answer: %w", err)
	}
	updates := make([]tgbotapi.Update, 0, len(raws))
	for _, raw := range raws {
		var u tgbotapi.Update
		if err := json.Unmarshal(raw, &u); err != nil {
			var id struct {
				UpdateID int `json:"update_id"`
			}
			if json.Unmarshal(raw, &id) != nil {
				return nil, fmt.Errorf("telegram getUpdates: read an update: %w", err)
			}
			t.log.Warn("update skipped: it cannot be read", "update", id.UpdateID, "err", err)
			updates = append(updates, tgbotapi.Update{UpdateID: id.UpdateID})
			continue
		}
		updates = append(updates, u)
	}
	return updates, nil
}

// offsetMaxAge: Telegram numbers updates at random again after a week
// without any, so an older offset could hide new updates.
const offsetMaxAge = 6 * 24 * time.Hour

func offsetKey(botID int64) string { return "telegram.offset." + strconv.FormatInt(botID, 10) }

// loadOffset reads the stored offset of this bot, "OFFSET UNIXSECONDS",
// and when it was stored.
func (t *Transport) loadOffset(ctx context.Context, botID int64) (int64, time.Time) {
	if t.opts.State == nil {
		return 0, time.Now()
	}
	v, ok, err := t.opts.State.Get(ctx, offsetKey(botID))
	if err != nil {
		t.log.Warn("read the update offset", "err", err)
		return 0, time.Now()
	}
	if !ok {
		return 0, time.Now()
	}
	o, at, _ := strings.Cut(v, " ")
	offset, err1 := strconv.ParseInt(o, 10, 64)
	sec, err2 := strconv.ParseInt(at, 10, 64)
	if err1 != nil || err2 != nil || offset < 0 {
		t.log.Warn("stored update offset unreadable; starting from Telegram's", "value", v)
		return 0, time.Now()
	}
	return offset, time.Unix(sec, 0)
}

func (t *Transport) saveOffset(ctx context.Context, botID, offset int64) {
	if t.opts.State == nil {
		return
	}
	v := strconv.FormatInt(offset, 10) + " " + strconv.FormatInt(time.Now().Unix(), 10)
	if err := t.opts.State.Set(context.WithoutCancel(ctx), offsetKey(botID), v); err != nil {
		t.log.Error("store the update offset", "err", err)
	}
}

// confirm tells Telegram the updates before offset were handled.
func (t *Transport) confirm(ctx context.Context, offset int64) {
	if offset == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if _, err := t.api.request(cctx, "getUpdates", tgbotapi.UpdateConfig{Offset: int(offset), Limit: 1}); err != nil {
		t.log.Debug("confirm updates", "err", err)
	}
}

func chatOf(u tgbotapi.Update) int64 {
	switch {
	case u.CallbackQuery != nil && u.CallbackQuery.Message != nil && u.CallbackQuery.Message.Chat != nil:
		return u.CallbackQuery.Message.Chat.ID
	case u.CallbackQuery != nil && u.CallbackQuery.From != nil:
		return u.CallbackQuery.From.ID
	case u.Message != nil && u.Message.Chat != nil:
		return u.Message.Chat.ID
	case u.EditedMessage != nil && u.EditedMessage.Chat != nil:
		return u.EditedMessage.Chat.ID
	case u.ChannelPost != nil && u.ChannelPost.Chat != nil:
		return u.ChannelPost.Chat.ID
	case u.EditedChannelPost != nil && u.EditedChannelPost.Chat != nil:
		return u.EditedChannelPost.Chat.ID
	}
	return 0
}

// handleUpdate delivers one update; it never panics.
func (t *Transport) handleUpdate(ctx context.Context, deliver func(context.Context, chat.Message), u tgbotapi.Update) {
	defer func() {
		if v := recover(); v != nil {
			t.log.Error("panic while handling an update", "update", u.UpdateID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	switch {
	case u.CallbackQuery != nil:
		t.handleCallback(ctx, deliver, u.CallbackQuery)
	case u.Message != nil:
		t.handleMessage(ctx, deliver, u.Message, false)
	case u.EditedMessage != nil:
		t.handleMessage(ctx, deliver, u.EditedMessage, true)
	case u.ChannelPost != nil:
		t.handlePost(ctx, deliver, u.ChannelPost, false)
	case u.EditedChannelPost != nil:
		t.handlePost(ctx, deliver, u.EditedChannelPost, true)
	default:
		t.log.Debug("update ignored", "update", u.UpdateID)
	}
}

// handleMessage delivers a message (edited: an edit of one sent before)
// when it is meant for this bot.
func (t *Transport) handleMessage(ctx context.Context, deliver func(context.Context, chat.Message), m *tgbotapi.Message, edited bool) {
	if m.Chat != nil && m.Chat.IsChannel() {
		t.handlePost(ctx, deliver, m, edited)
		return
	}
	if m.From == nil || m.Chat == nil {
		return
	}
	if strings.TrimSpace(m.Text) == "" {
		// Stickers, photos, voice, members joining: nothing to answer.
		t.log.Debug("message without text ignored", "chat", m.Chat.ID, "user", m.From.ID)
		return
	}
	group := m.Chat.IsGroup() || m.Chat.IsSuperGroup()
	text, ok := t.addressed(m, group)
	if !ok {
		return
	}
	t.noteChat(m.Chat, m.From)
	deliver(ctx, chat.Message{Transport: Name, Chat: m.Chat.ID, ID: int64(m.MessageID), User: user(m.From), Text: text, Group: group, Edited: edited})
}

// handlePost delivers a channel post meant for this bot (a command, or one
// that mentions it). Nobody in particular sent it: the message's user is
// the channel, by its title (and the author's signature, when the channel
// signs posts), with no id.
func (t *Transport) handlePost(ctx context.Context, deliver func(context.Context, chat.Message), m *tgbotapi.Message, edited bool) {
	if m.Chat == nil || strings.TrimSpace(m.Text) == "" {
		return
	}
	text, ok := t.addressed(m, true)
	if !ok {
		return
	}
	name := m.Chat.Title
	if name == "" && m.Chat.UserName != "" {
		name = "@" + m.Chat.UserName
	}
	if m.AuthorSignature != "" {
		name += " (" + m.AuthorSignature + ")"
	}
	deliver(ctx, chat.Message{Transport: Name, Chat: m.Chat.ID, ID: int64(m.MessageID), User: chat.User{Name: name}, Text: text, Channel: true, Edited: edited})
}

// addressed returns the text of a message meant for this bot. A command
// addressed to another bot ("/status@OtherBot") is not. In a group, plain
// text is read only when it is a known command, mentions the bot, or
// replies to it, so a group's conversation does not get "unknown command"
// hints.
func (t *Transport) addressed(m *tgbotapi.Message, group bool) (string, bool) {
	text := strings.TrimSpace(m.Text)
	self := t.Self()
	mention := "@" + self.UserName
	if strings.HasPrefix(text, "/") {
		word, _, _ := strings.Cut(text, " ")
		if _, to, ok := strings.Cut(word, "@"); ok && self.UserName != "" && !strings.EqualFold(to, self.UserName) {
			return "", false
		}
		return text, true
	}
	if !group {
		return text, true
	}
	if self.UserName != "" {
		if i := strings.Index(strings.ToLower(text), strings.ToLower(mention)); i >= 0 {
			return strings.TrimSpace(text[:i] + text[i+len(mention):]), true
		}
	}
	if m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == self.ID {
		return text, true
	}
	if chat.Parse(text).Cmd != nil {
		return text, true
	}
	return "", false
}

// handleCallback delivers the button's data as a message, and then
// answers the press (so the button stops spinning), unless the handler's
// answer did (a refusal, shown as a toast).
func (t *Transport) handleCallback(ctx context.Context, deliver func(context.Context, chat.Message), q *tgbotapi.CallbackQuery) {
	p := &press{t: t, id: q.ID}
	defer p.Answer(ctx, "")
	if q.From == nil || strings.TrimSpace(q.Data) == "" {
		return
	}
	id, group := q.From.ID, false
	if q.Message != nil && q.Message.Chat != nil {
		id = q.Message.Chat.ID
		group = q.Message.Chat.IsGroup() || q.Message.Chat.IsSuperGroup()
	}
	deliver(ctx, chat.Message{Transport: Name, Chat: id, User: user(q.From), Text: q.Data, Callback: true, Group: group, Press: p})
}

// noteChat logs the first message of each chat since the start, with the
// ids the owner needs for [auth] operators and chats.
func (t *Transport) noteChat(c *tgbotapi.Chat, from *tgbotapi.User) {
	t.mu.Lock()
	if t.seenChats == nil {
		t.seenChats = map[int64]bool{}
	}
	seen := t.seenChats[c.ID]
	if !seen && len(t.seenChats) < 10000 {
		t.seenChats[c.ID] = true
	}
	t.mu.Unlock()
	if !seen {
		t.log.Info("message from a new chat", "chat", c.ID, "type", c.Type, "title", c.Title, "user", from.ID, "name", user(from).Name)
	}
}

func user(u *tgbotapi.User) chat.User {
	name := u.UserName
	if name == "" {
		name = strings.TrimSpace(u.FirstName + " " + u.LastName)
	}
	return chat.User{ID: u.ID, Name: name}
}

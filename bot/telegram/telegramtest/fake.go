// Package telegramtest is a fake Telegram Bot API server for tests, built
// on net/http/httptest and listening on 127.0.0.1. It answers getMe,
// getUpdates (a long poll with offsets: an update is confirmed, and
// dropped, when a poll asks for a higher offset), sendMessage, sendPhoto,
// sendMediaGroup, editMessageText, editMessageReplyMarkup,
// answerCallbackQuery and setMyCommands; it records every request and the
// messages the bot sent, and it can inject faults: 429 with retry_after,
// 500, slow answers and dropped connections.
//
// Tests push what users do (UserSays, GroupSays, Edit, ChannelPost, Press,
// Push) and wait for what the bot does (Await with a condition on
// Requests, Messages or Toast).
package telegramtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// FaultKind is what an injected fault does.
type FaultKind int

// Faults.
const (
	TooManyRequests FaultKind = iota + 1 // 429 with parameters.retry_after
	ServerError                          // 500
	Slow                                 // wait Delay, then answer normally
	Drop                                 // close the connection without an answer
	Unauthorized                         // 401, as for a revoked token
)

func (k FaultKind) String() string {
	switch k {
	case TooManyRequests:
		return "429"
	case ServerError:
		return "500"
	case Slow:
		return "slow"
	case Drop:
		return "drop"
	case Unauthorized:
		return "401"
	}
	return "none"
}

// Fault is injected into the next Times calls of Method ("*": any method
// but getUpdates).
type Fault struct {
	Method     string
	Kind       FaultKind
	Times      int // default 1; negative: until ClearFaults
	RetryAfter int // seconds, for TooManyRequests (default 1)
	Delay      time.Duration
}

// Request is one call the bot made.
type Request struct {
	Method string
	At     time.Time
	Params map[string]string // form fields (the first value of each)
	Files  map[string][]byte // uploaded files by field name
	Fault  FaultKind         // the fault injected, 0 if none
	Status int               // the HTTP status answered (0 when dropped)
}

// Message is a message the bot sent, as the fake holds it now.
type Message struct {
	ID        int
	Chat      int64
	Method    string // sendMessage, sendPhoto, sendMediaGroup
	Text      string // the text, or the caption of a photo
	ParseMode string
	ReplyTo   int
	Silent    bool // disable_notification
	Markup    *tgbotapi.InlineKeyboardMarkup
	Photo     []byte   // sendPhoto and sendMediaGroup: this message's image
	Edits     []string // texts of later edits, oldest first
	Sent      time.Time
}

// Buttons returns the callback data of the message's buttons, row by row.
func (m Message) Buttons() []string {
	var out []string
	if m.Markup == nil {
		return nil
	}
	for _, row := range m.Markup.InlineKeyboard {
		for _, b := range row {
			if b.CallbackData != nil {
				out = append(out, *b.CallbackData)
			}
		}
	}
	return out
}

// Server is the fake Bot API.
type Server struct {
	// URL is the base URL to give the bot as its API endpoint.
	URL   string
	Token string
	Bot   tgbotapi.User

	srv    *httptest.Server
	closed chan struct{}

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	all       []tgbotapi.Update
	raw       map[int]json.RawMessage // updates pushed as JSON, by id
	confirmed int                     // updates with a lower id were confirmed
	nextID    int                     // next update id
	nextMsg   int
	nextQuery int
	queries   map[string]bool
	toasts    map[string]string // the answer's text of each answered query
	requests  []Request
	messages  map[int]*Message
	faults    []Fault
	commands  []tgbotapi.BotCommand
}

// NewServer starts a fake server for a bot with the given token.
func NewServer(token string) *Server {
	s := &Server{
		Token:   token,
		Bot:     tgbotapi.User{ID: 4242, IsBot: true, FirstName: "Train", UserName: "TrainTestBot"},
		closed:  make(chan struct{}),
		changed: make(chan struct{}),
		nextID:  1000,
		nextMsg: 1,
		queries: map[string]bool{}, toasts: map[string]string{}, messages: map[int]*Message{}, raw: map[int]json.RawMessage{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server; polls waiting for updates return at once.
func (s *Server) Close() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Await waits until cond is true or timeout passes, re-checking after every
// request; it reports whether cond became true.
func (s *Server) Await(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// Conditions may also depend on things outside the fake: re-check
	// now and then.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	if f.Kind == TooManyRequests && f.RetryAfter <= 0 {
		f.RetryAfter = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// ClearFaults removes every fault not yet used.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault returns the fault for a call of method, if any.
func (s *Server) takeFault(method string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Method == method || (f.Method == "*" && method != "getUpdates") {
			if f.Times > 0 {
				s.faults[i].Times--
				if s.faults[i].Times == 0 {
					s.faults = slices.Delete(s.faults, i, i+1)
				}
			}
			return f, true
		}
	}
	return Fault{}, false
}

// Push queues an update (its UpdateID is set) and returns its id.
func (s *Server) Push(u tgbotapi.Update) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	u.UpdateID = s.nextID
	s.nextID++
	s.all = append(s.all, u)
	s.changedLocked()
	return u.UpdateID
}

// PushRaw queues an update given as a JSON object (its update_id is set),
// for updates the library's types cannot hold, and returns its id.
func (s *Server) PushRaw(object string) int {
	var m map[string]any
	if err := json.Unmarshal([]byte(object), &m); err != nil {
		panic("telegramtest: PushRaw: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	m["update_id"] = id
	b, _ := json.Marshal(m)
	s.raw[id] = b
	s.all = append(s.all, tgbotapi.Update{UpdateID: id})
	s.changedLocked()
	return id
}

// User is a Telegram user with the given id.
func User(id int64) *tgbotapi.User {
	return &tgbotapi.User{ID: id, FirstName: "User" + strconv.FormatInt(id, 10), UserName: "user" + strconv.FormatInt(id, 10)}
}

// UserSays pushes a text message from a user in their private chat with
// the bot, and returns the update id.
func (s *Server) UserSays(user int64, text string) int {
	return s.Push(tgbotapi.Update{Message: s.message(user, &tgbotapi.Chat{ID: user, Type: "private"}, text)})
}

// GroupSays pushes a text message from a user in a group.
func (s *Server) GroupSays(chat, user int64, text string) int {
	return s.Push(tgbotapi.Update{Message: s.message(user, &tgbotapi.Chat{ID: chat, Type: "supergroup", Title: "team"}, text)})
}

// Edit pushes an edit, to text, of a message a user sent in a group before
// (edited_message), and returns the update id.
func (s *Server) Edit(chat, user int64, messageID int, text string) int {
	return s.Push(tgbotapi.Update{EditedMessage: &tgbotapi.Message{MessageID: messageID, From: User(user),
		Chat: &tgbotapi.Chat{ID: chat, Type: "supergroup", Title: "team"}, Date: int(time.Now().Unix()) - 60, EditDate: int(time.Now().Unix()), Text: text}})
}

// ChannelPost pushes a post in a channel (channel_post: no sender user, the
// channel is the sender_chat), and returns the update id.
func (s *Server) ChannelPost(chat int64, text string) int {
	c := &tgbotapi.Chat{ID: chat, Type: "channel", Title: "announcements"}
	m := s.message(0, c, text)
	m.From, m.SenderChat = nil, c
	return s.Push(tgbotapi.Update{ChannelPost: m})
}

func (s *Server) message(user int64, chat *tgbotapi.Chat, text string) *tgbotapi.Message {
	s.mu.Lock()
	id := s.nextMsg
	s.nextMsg++
	s.mu.Unlock()
	return &tgbotapi.Message{MessageID: id, From: User(user), Chat: chat, Date: int(time.Now().Unix()), Text: text}
}

// Press pushes a press of a button with the given callback data on a
// message the bot sent, and returns the callback query id.
func (s *Server) Press(user int64, msg Message, data string) string {
	s.mu.Lock()
	s.nextQuery++
	id := "q" + strconv.Itoa(s.nextQuery)
	s.queries[id] = false
	s.mu.Unlock()
	chatType := "private"
	if msg.Chat < 0 {
		chatType = "supergroup"
	}
	s.Push(tgbotapi.Update{CallbackQuery: &tgbotapi.CallbackQuery{
		ID: id, From: User(user), Data: data, ChatInstance: "ci",
		Message: &tgbotapi.Message{MessageID: msg.ID, From: &s.Bot, Chat: &tgbotapi.Chat{ID: msg.Chat, Type: chatType}, Text: msg.Text},
	}})
	return id
}

// Answered reports whether the bot answered a callback query.
func (s *Server) Answered(queryID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[queryID]
}

// Toast returns the text the bot answered a callback query with (shown to
// the presser as a toast; "" for none), and whether it answered.
func (s *Server) Toast(queryID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.toasts[queryID], s.queries[queryID]
}

// Unconfirm makes every update pushed so far pending again, as if the
// bot's confirmations had been lost (a crash before its next poll).
func (s *Server) Unconfirm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.confirmed = 0
	s.changedLocked()
}

// Pending returns how many updates wait for confirmation.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.all {
		if u.UpdateID >= s.confirmed {
			n++
		}
	}
	return n
}

// Requests returns the calls of a method ("" for all), oldest first.
func (s *Server) Requests(method string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// Messages returns the messages the bot sent to a chat, oldest first.
func (s *Server) Messages(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if m.Chat == chat {
			c := *m
			c.Edits = slices.Clone(m.Edits)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return a.ID - b.ID })
	return out
}

// Commands returns the command menu the bot registered.
func (s *Server) Commands() []tgbotapi.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	token, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	req := Request{Method: method, At: time.Now(), Params: map[string]string{}, Files: map[string][]byte{}}
	if err := readForm(r, &req); err != nil {
		s.record(req, w, http.StatusBadRequest, errorBody(400, "Bad Request: "+err.Error(), 0))
		return
	}
	if !ok || token != s.Token {
		s.record(req, w, http.StatusUnauthorized, errorBody(401, "Unauthorized", 0))
		return
	}
	if f, ok := s.takeFault(method); ok {
		req.Fault = f.Kind
		switch f.Kind {
		case TooManyRequests:
			s.record(req, w, http.StatusTooManyRequests, errorBody(429, fmt.Sprintf("Too Many Requests: retry after %d", f.RetryAfter), f.RetryAfter))
			return
		case ServerError:
			s.record(req, w, http.StatusInternalServerError, errorBody(500, "Internal Server Error", 0))
			return
		case Unauthorized:
			s.record(req, w, http.StatusUnauthorized, errorBody(401, "Unauthorized", 0))
			return
		case Drop:
			s.record(req, nil, 0, nil)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case Slow:
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			case <-s.closed:
				t.Stop()
				return
			}
		}
	}
	if method == "getUpdates" {
		s.getUpdates(w, r, req)
		return
	}
	status, body := s.answer(req)
	s.record(req, w, status, body)
}

// record stores a request and writes the answer (w nil: none).
func (s *Server) record(req Request, w http.ResponseWriter, status int, body any) {
	req.Status = status
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.changedLocked()
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func okBody(result any) map[string]any { return map[string]any{"ok": true, "result": result} }

func errorBody(code int, desc string, retryAfter int) map[string]any {
	b := map[string]any{"ok": false, "error_code": code, "description": desc}
	if retryAfter > 0 {
		b["parameters"] = map[string]any{"retry_after": retryAfter}
	}
	return b
}

func readForm(r *http.Request, req *Request) error {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			return err
		}
		for k, v := range r.MultipartForm.Value {
			req.Params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			b, err := readFile(fhs[0])
			if err != nil {
				return err
			}
			req.Files[k] = b
		}
		return nil
	}
	if err := r.ParseForm(); err != nil {
		return err
	}
	for k, v := range r.PostForm {
		req.Params[k] = v[0]
	}
	return nil
}

func readFile(fh *multipart.FileHeader) ([]byte, error) {
	f, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// getUpdates answers a long poll: confirm what is below the offset, then
// return what is pending, waiting up to the timeout for something.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, req Request) {
	offset, _ := strconv.Atoi(req.Params["offset"])
	limit, _ := strconv.Atoi(req.Params["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(req.Params["timeout"])
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if offset > s.confirmed {
			s.confirmed = offset
		}
		out := []json.RawMessage{}
		for _, u := range s.all {
			if u.UpdateID >= s.confirmed && len(out) < limit {
				b, ok := s.raw[u.UpdateID]
				if !ok {
					b, _ = json.Marshal(u)
				}
				out = append(out, b)
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout == 0 {
			s.record(req, w, http.StatusOK, okBody(out))
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.record(req, w, http.StatusOK, okBody([]tgbotapi.Update{}))
			return
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
}

// answer handles every method but getUpdates.
func (s *Server) answer(req Request) (int, any) {
	p := req.Params
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	switch req.Method {
	case "getMe":
		return http.StatusOK, okBody(s.Bot)
	case "setMyCommands":
		var cmds []tgbotapi.BotCommand
		if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
			return http.StatusBadRequest, errorBody(400, "Bad Request: can't parse commands", 0)
		}
		s.mu.Lock()
		s.commands = cmds
		s.mu.Unlock()
		return http.StatusOK, okBody(true)
	case "answerCallbackQuery":
		s.mu.Lock()
		defer s.mu.Unlock()
		if answered, ok := s.queries[p["callback_query_id"]]; !ok || answered {
			return http.StatusBadRequest, errorBody(400, "Bad Request: query is too old and response timeout expired or query ID is invalid", 0)
		}
		if n := len(utf16.Encode([]rune(p["text"]))); n > 200 {
			return http.StatusBadRequest, errorBody(400, "Bad Request: MESSAGE_TOO_LONG", 0)
		}
		s.queries[p["callback_query_id"]] = true
		s.toasts[p["callback_query_id"]] = p["text"]
		s.changedLocked()
		return http.StatusOK, okBody(true)
	case "sendMessage":
		if chat == 0 {
			return http.StatusBadRequest, errorBody(400, "Bad Request: chat not found", 0)
		}
		text := p["text"]
		if text == "" {
			return http.StatusBadRequest, errorBody(400, "Bad Request: message text is empty", 0)
		}
		if n := len(utf16.Encode([]rune(Plain(text)))); n > 4096 {
			return http.StatusBadRequest, errorBody(400, "Bad Request: message is too long", 0)
		}
		m, err := s.newMessage(chat, "sendMessage", p)
		if err != nil {
			return http.StatusBadRequest, errorBody(400, "Bad Request: "+err.Error(), 0)
		}
		m.Text = text
		return http.StatusOK, okBody(s.store(m))
	case "sendPhoto":
		photo, ok := req.Files["photo"]
		if chat == 0 || !ok {
			return http.StatusBadRequest, errorBody(400, "Bad Request: there is no photo in the request", 0)
		}
		m, err := s.newMessage(chat, "sendPhoto", p)
		if err != nil {
			return http.StatusBadRequest, errorBody(400, "Bad Request: "+err.Error(), 0)
		}
		m.Text, m.Photo = p["caption"], photo
		return http.StatusOK, okBody(s.store(m))
	case "sendMediaGroup":
		var media []struct {
			Type, Media, Caption string
			ParseMode            string `json:"parse_mode"`
		}
		if err := json.Unmarshal([]byte(p["media"]), &media); err != nil || len(media) < 2 || len(media) > 10 {
			return http.StatusBadRequest, errorBody(400, "Bad Request: wrong number of media in the album", 0)
		}
		var out []tgbotapi.Message
		for _, it := range media {
			b, ok := req.Files[strings.TrimPrefix(it.Media, "attach://")]
			if !ok {
				return http.StatusBadRequest, errorBody(400, "Bad Request: wrong file identifier", 0)
			}
			m, err := s.newMessage(chat, "sendMediaGroup", p)
			if err != nil {
				return http.StatusBadRequest, errorBody(400, "Bad Request: "+err.Error(), 0)
			}
			m.Text, m.ParseMode, m.Photo = it.Caption, it.ParseMode, b
			out = append(out, s.store(m))
		}
		return http.StatusOK, okBody(out)
	case "editMessageText", "editMessageReplyMarkup":
		id, _ := strconv.Atoi(p["message_id"])
		s.mu.Lock()
		defer s.mu.Unlock()
		m, ok := s.messages[id]
		if !ok || m.Chat != chat {
			return http.StatusBadRequest, errorBody(400, "Bad Request: message to edit not found", 0)
		}
		markup, err := parseMarkup(p["reply_markup"])
		if err != nil {
			return http.StatusBadRequest, errorBody(400, "Bad Request: "+err.Error(), 0)
		}
		text := m.Text
		if req.Method == "editMessageText" {
			text = p["text"]
		}
		if text == m.Text && sameMarkup(markup, m.Markup) {
			return http.StatusBadRequest, errorBody(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", 0)
		}
		if req.Method == "editMessageText" {
			m.Text = text
			m.Edits = append(m.Edits, text)
		}
		m.Markup = markup
		return http.StatusOK, okBody(s.public(m))
	}
	return http.StatusNotFound, errorBody(404, "Not Found", 0)
}

func (s *Server) newMessage(chat int64, method string, p map[string]string) (*Message, error) {
	markup, err := parseMarkup(p["reply_markup"])
	if err != nil {
		return nil, err
	}
	replyTo, _ := strconv.Atoi(p["reply_to_message_id"])
	return &Message{Chat: chat, Method: method, ParseMode: p["parse_mode"], Markup: markup, ReplyTo: replyTo,
		Silent: p["disable_notification"] == "true", Sent: time.Now()}, nil
}

// store gives a message its id and keeps it.
func (s *Server) store(m *Message) tgbotapi.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.ID = s.nextMsg
	s.nextMsg++
	s.messages[m.ID] = m
	s.changedLocked()
	return s.public(m)
}

func (s *Server) public(m *Message) tgbotapi.Message {
	out := tgbotapi.Message{MessageID: m.ID, From: &s.Bot, Chat: &tgbotapi.Chat{ID: m.Chat, Type: "private"}, Date: int(m.Sent.Unix()), Text: m.Text, ReplyMarkup: m.Markup}
	if m.Chat < 0 {
		out.Chat.Type = "supergroup"
	}
	return out
}

func parseMarkup(s string) (*tgbotapi.InlineKeyboardMarkup, error) {
	if s == "" {
		return nil, nil
	}
	var m tgbotapi.InlineKeyboardMarkup
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("can't parse reply keyboard markup JSON object")
	}
	for _, row := range m.InlineKeyboard {
		for _, b := range row {
			if b.CallbackData != nil && len(*b.CallbackData) > 64 {
				return nil, fmt.Errorf("BUTTON_DATA_INVALID")
			}
		}
	}
	return &m, nil
}

func sameMarkup(a, b *tgbotapi.InlineKeyboardMarkup) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

var htmlUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "&quot;", "\"")

// unescapeHTML is the text a user sees of an HTML message (tags kept:
// the fake does not render them).
func unescapeHTML(s string) string { return htmlUnescaper.Replace(s) }

// Plain returns what a user sees of a text sent in HTML parse mode:
// entities decoded and the tags the bot uses removed.
func Plain(s string) string {
	s = strings.NewReplacer("<b>", "", "</b>", "", "<pre>", "", "</pre>", "", "<code>", "", "</code>", "").Replace(s)
	return unescapeHTML(s)
}

package dingtalk_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/trainbot/trainbot/bot/chattest"
)

// fake is DingTalk on 127.0.0.1: the stream gateway and its WebSocket
// (JSON frames, acks read back), the session webhook, access tokens, the
// robot OpenAPI and the media upload, as the protocol notes describe them.
type fake struct {
	srv                    *httptest.Server
	URL                    string
	clientID, clientSecret string

	mu        sync.Mutex
	link      chattest.Link  // the bot's connection
	refuse    []int          // HTTP statuses for the next gateway calls
	throttle  map[string]int // path → answers still to throttle
	acks      map[string]int // messageId → acks read
	sent      []sent
	media     map[string][]byte
	tokenAsks int
}

// sent is a message the bot sent.
type sent struct {
	Path  string // /robot/sendBySession, /v1.0/robot/oToMessages/batchSend, …
	To    string // staffId or conversation id ("" for the session webhook)
	Key   string // msgKey, or "markdown"
	Text  string
	Photo string // sampleImageMsg's photoURL
}

const accessToken = "at-123456"

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{clientID: "ding-app", clientSecret: "client-s3cret-value", throttle: map[string]int{},
		acks: map[string]int{}, media: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1.0/gateway/connections/open", f.open)
	mux.HandleFunc("GET /connect", f.connect)
	mux.HandleFunc("POST /v1.0/oauth2/accessToken", f.token)
	mux.HandleFunc("POST /robot/sendBySession", f.record)
	mux.HandleFunc("POST /v1.0/robot/oToMessages/batchSend", f.record)
	mux.HandleFunc("POST /v1.0/robot/groupMessages/send", f.record)
	mux.HandleFunc("POST /media/upload", f.upload)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	t.Cleanup(func() { f.Drop(); f.srv.Close() })
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fake) open(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ClientID      string `json:"clientId"`
		ClientSecret  string `json:"clientSecret"`
		Subscriptions []struct{ Type, Topic string }
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	var status int
	if len(f.refuse) > 0 {
		status, f.refuse = f.refuse[0], f.refuse[1:]
	}
	f.mu.Unlock()
	switch {
	case status != 0:
		writeJSON(w, status, map[string]string{"code": "Refused", "message": http.StatusText(status)})
	case in.ClientID != f.clientID || in.ClientSecret != f.clientSecret:
		writeJSON(w, 401, map[string]string{"code": "InvalidAuthentication", "message": "invalid client"})
	default:
		writeJSON(w, 200, map[string]string{"endpoint": "ws" + strings.TrimPrefix(f.URL, "http") + "/connect", "ticket": "tk-1"})
	}
}

var upgrader = websocket.Upgrader{}

func (f *fake) connect(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") != "tk-1" {
		http.Error(w, "bad ticket", http.StatusForbidden)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	_, closed := f.link.Open(ws)
	defer closed()
	for {
		var a struct {
			Code    int               `json:"code"`
			Headers map[string]string `json:"headers"`
		}
		if ws.ReadJSON(&a) != nil {
			return
		}
		if a.Code == 200 {
			f.mu.Lock()
			f.acks[a.Headers["messageId"]]++
			f.mu.Unlock()
		}
	}
}

func (f *fake) token(w http.ResponseWriter, r *http.Request) {
	var in struct{ AppKey, AppSecret string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	f.tokenAsks++
	f.mu.Unlock()
	if in.AppKey != f.clientID || in.AppSecret != f.clientSecret {
		writeJSON(w, 400, map[string]string{"code": "invalidClientSecret", "message": "bad secret"})
		return
	}
	writeJSON(w, 200, map[string]any{"accessToken": accessToken, "expireIn": 7200})
}

// throttled answers a throttling error when the path still has some.
func (f *fake) throttled(w http.ResponseWriter, path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.throttle[path] == 0 {
		return false
	}
	f.throttle[path]--
	if path == "/robot/sendBySession" {
		writeJSON(w, 200, map[string]any{"errcode": 130101, "errmsg": "send too fast"})
	} else {
		writeJSON(w, 429, map[string]string{"code": "Throttling", "message": "too fast"})
	}
	return true
}

func (f *fake) record(w http.ResponseWriter, r *http.Request) {
	if f.throttled(w, r.URL.Path) {
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var in struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Text string `json:"text"`
		} `json:"markdown"`
		MsgKey   string   `json:"msgKey"`
		MsgParam string   `json:"msgParam"`
		UserIDs  []string `json:"userIds"`
		Group    string   `json:"openConversationId"`
		Robot    string   `json:"robotCode"`
	}
	_ = json.Unmarshal(raw, &in)
	s := sent{Path: r.URL.Path, Key: in.MsgKey, Text: in.Markdown.Text}
	if r.URL.Path == "/robot/sendBySession" {
		s.Key = in.MsgType
		s.To = strings.TrimPrefix(r.URL.Query().Get("session"), "s-")
	} else {
		if r.Header.Get("x-acs-dingtalk-access-token") != accessToken {
			writeJSON(w, 401, map[string]string{"code": "InvalidAuthentication", "message": "token"})
			return
		}
		if in.Robot != f.clientID {
			writeJSON(w, 400, map[string]string{"code": "invalidRobotCode", "message": in.Robot})
			return
		}
		var p struct{ Text, PhotoURL string }
		_ = json.Unmarshal([]byte(in.MsgParam), &p)
		s.Text, s.Photo = p.Text, p.PhotoURL
		s.To = in.Group
		if len(in.UserIDs) == 1 {
			s.To = in.UserIDs[0]
		}
	}
	f.mu.Lock()
	f.sent = append(f.sent, s)
	f.mu.Unlock()
	if r.URL.Path == "/robot/sendBySession" {
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok"})
		return
	}
	writeJSON(w, 200, map[string]any{"processQueryKey": "q"})
}

func (f *fake) upload(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("access_token") != accessToken || r.URL.Query().Get("type") != "image" {
		writeJSON(w, 200, map[string]any{"errcode": 40014, "errmsg": "invalid access_token"})
		return
	}
	file, _, err := r.FormFile("media")
	if err != nil {
		writeJSON(w, 200, map[string]any{"errcode": 41001, "errmsg": "no media"})
		return
	}
	data, _ := io.ReadAll(file)
	f.mu.Lock()
	id := fmt.Sprintf("@lA%d", len(f.media)+1)
	f.media[id] = data
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok", "type": "image", "media_id": id})
}

// push writes a frame to the connected client; false when none is.
func (f *fake) push(v any) bool {
	return f.link.WriteJSON(v)
}

// Say pushes a robot message from staffId, in a group when group is not
// "", with message id msgID.
func (f *fake) Say(staffID, group, msgID, text string) bool {
	chat := staffID
	if group != "" {
		chat = group
	}
	data := map[string]any{"msgId": msgID, "conversationType": "1", "conversationId": "cid-" + staffID, "senderStaffId": staffID,
		"senderNick": "Nick " + staffID, "msgtype": "text", "text": map[string]string{"content": " " + text},
		"sessionWebhook":            f.URL + "/robot/sendBySession?session=s-" + url.QueryEscape(chat),
		"sessionWebhookExpiredTime": time.Now().Add(90 * time.Minute).UnixMilli()}
	if group != "" {
		data["conversationType"], data["conversationId"] = "2", group
	}
	raw, _ := json.Marshal(data)
	return f.push(map[string]any{"specVersion": "1.0", "type": "CALLBACK",
		"headers": map[string]string{"topic": "/v1.0/im/bot/messages/get", "messageId": "frame-" + msgID, "contentType": "application/json"},
		"data":    string(raw)})
}

// Ping sends a SYSTEM ping.
func (f *fake) Ping(id string) bool {
	return f.push(map[string]any{"specVersion": "1.0", "type": "SYSTEM",
		"headers": map[string]string{"topic": "ping", "messageId": id}, "data": `{"opaque":"x"}`})
}

// Drop closes the connection without a word.
func (f *fake) Drop() { f.link.Drop() }

// Sent is what the bot sent to a user (1:1) or group, by either path.
func (f *fake) Sent(to string) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, s := range f.sent {
		if s.To == to {
			out = append(out, s)
		}
	}
	return out
}

func (f *fake) Media(id string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.media[id]
}

func (f *fake) Acks(messageID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acks[messageID]
}

func (f *fake) Opened() int { return f.link.Opened() }

func (f *fake) connected() bool { return f.link.Connected() }

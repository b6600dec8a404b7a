package feishu_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/trainbot/trainbot/bot/chattest"
	"github.com/trainbot/trainbot/bot/feishu"
)

// fake is Feishu on 127.0.0.1: the long connection's discovery and its
// WebSocket speaking pbbp2 Frames (the codec is the package's, pinned to
// the SDK's bytes by frame_test.go; pings answered with pongs, acks read
// back), the tenant token, image upload, message create and patch — every
// REST answer JSON with its Content-Type, as Feishu sends it.
type fake struct {
	srv              *httptest.Server
	URL              string
	appID, appSecret string
	mu               sync.Mutex
	link             chattest.Link  // the bot's connection
	refuse           []int          // HTTP statuses for the next discoveries
	throttle         map[string]int // "messages" → answers still to throttle
	acks             map[string][]byte
	sent             []sent
	images           map[string][]byte
	patches          map[string][]string
	uuids            map[string]string // uuid → message id
	pings            int
	pingInterval     int    // seconds, in the discovery's ClientConfig
	pongConfig       []byte // when set, a pong with it is pushed on connect
	token            string // the valid tenant token
	tokens           int    // tokens handed out
	nextMsg, nextSeq int
}

// sent is a message the bot created.
type sent struct {
	Chat, Type, Content, ID string
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{appID: "cli_a1b2c3", appSecret: "app-s3cret-value", token: "t-tenant-token", pingInterval: 1, throttle: map[string]int{}, acks: map[string][]byte{},
		images: map[string][]byte{}, patches: map[string][]string{}, uuids: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /callback/ws/endpoint", f.endpoint)
	mux.HandleFunc("GET /ws", f.ws)
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			AppID     string `json:"app_id"`
			AppSecret string `json:"app_secret"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.AppID != f.appID || in.AppSecret != f.appSecret {
			writeJSON(w, 200, map[string]any{"code": 10014, "msg": "app secret invalid"})
			return
		}
		f.mu.Lock()
		f.tokens++
		token := f.token
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})
	})
	mux.HandleFunc("POST /open-apis/im/v1/images", f.image)
	mux.HandleFunc("POST /open-apis/im/v1/messages", f.message)
	mux.HandleFunc("PATCH /open-apis/im/v1/messages/{id}", f.patch)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	t.Cleanup(func() { f.Drop(); f.srv.Close() })
	return f
}

// authorized says whether a request carries the valid tenant token.
func (f *fake) authorized(r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return r.Header.Get("Authorization") == "Bearer "+f.token
}

// Revoke makes the tenant token handed out invalid; the next one is
// another.
func (f *fake) Revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token += "-renewed"
}

// Tokens is how many tenant tokens were handed out.
func (f *fake) Tokens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fake) endpoint(w http.ResponseWriter, r *http.Request) {
	var in struct{ AppID, AppSecret string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	var status int
	if len(f.refuse) > 0 {
		status, f.refuse = f.refuse[0], f.refuse[1:]
	}
	interval := f.pingInterval
	f.mu.Unlock()
	switch {
	case status != 0:
		if status == 429 {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, status, map[string]any{"code": status, "msg": http.StatusText(status)})
	case in.AppID != f.appID || in.AppSecret != f.appSecret:
		writeJSON(w, 200, map[string]any{"code": 1000040344, "msg": "app not found or secret invalid"})
	default:
		writeJSON(w, 200, map[string]any{"code": 0, "data": map[string]any{
			"URL":          "ws" + strings.TrimPrefix(f.URL, "http") + "/ws?device_id=d1&service_id=7&ticket=tk-secret",
			"ClientConfig": map[string]int{"PingInterval": interval, "ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0},
		}})
	}
}

var upgrader = websocket.Upgrader{}

func (f *fake) ws(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") != "tk-secret" {
		w.Header().Set("Handshake-Status", strconv.Itoa(514)) // auth failed
		http.Error(w, "bad ticket", http.StatusForbidden)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	wmu, closed := f.link.Open(ws)
	defer closed()
	f.mu.Lock()
	config := f.pongConfig
	f.mu.Unlock()
	if config != nil {
		pong := feishu.Frame{Method: 0, Service: 7, Headers: []feishu.Header{{Key: "type", Value: "pong"}}, Payload: config}
		wmu.Lock()
		_ = ws.WriteMessage(websocket.BinaryMessage, feishu.MarshalFrame(&pong))
		wmu.Unlock()
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		fr, err := feishu.UnmarshalFrame(data)
		if err != nil {
			return
		}
		if fr.Method == 0 && feishu.HeaderOf(&fr, "type") == "ping" {
			if fr.Service != 7 {
				return // a ping must name the service
			}
			f.mu.Lock()
			f.pings++
			f.mu.Unlock()
			pong := feishu.Frame{Method: 0, Service: 7, Headers: []feishu.Header{{Key: "type", Value: "pong"}}}
			b := feishu.MarshalFrame(&pong)
			wmu.Lock()
			_ = ws.WriteMessage(websocket.BinaryMessage, b)
			wmu.Unlock()
			continue
		}
		f.mu.Lock()
		f.acks[feishu.HeaderOf(&fr, "message_id")] = fr.Payload
		f.mu.Unlock()
	}
}

func (f *fake) image(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(r) {
		writeJSON(w, 401, map[string]any{"code": 99991663, "msg": "invalid token"})
		return
	}
	if r.FormValue("image_type") != "message" {
		writeJSON(w, 400, map[string]any{"code": 234001, "msg": "bad image_type"})
		return
	}
	file, _, err := r.FormFile("image")
	if err != nil {
		writeJSON(w, 400, map[string]any{"code": 234002, "msg": "no image"})
		return
	}
	data, _ := io.ReadAll(file)
	f.mu.Lock()
	key := fmt.Sprintf("img_%d", len(f.images)+1)
	f.images[key] = data
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "data": map[string]string{"image_key": key}})
}

func (f *fake) message(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(r) {
		writeJSON(w, 401, map[string]any{"code": 99991663, "msg": "invalid token"})
		return
	}
	f.mu.Lock()
	if f.throttle["messages"] > 0 {
		f.throttle["messages"]--
		f.mu.Unlock()
		writeJSON(w, 429, map[string]any{"code": 99991400, "msg": "request trigger frequency limit"})
		return
	}
	f.mu.Unlock()
	var in struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
		UUID      string `json:"uuid"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	prev, repeat := f.uuids[in.UUID]
	f.mu.Unlock()
	if in.UUID != "" && repeat { // Feishu sends a uuid once an hour
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "data": map[string]string{"message_id": prev}})
		return
	}
	if r.URL.Query().Get("receive_id_type") != "chat_id" {
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "bad receive_id_type"})
		return
	}
	f.mu.Lock()
	f.nextMsg++
	id := fmt.Sprintf("om_%d", f.nextMsg)
	f.sent = append(f.sent, sent{Chat: in.ReceiveID, Type: in.MsgType, Content: in.Content, ID: id})
	if in.UUID != "" {
		f.uuids[in.UUID] = id
	}
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "data": map[string]string{"message_id": id}})
}

func (f *fake) patch(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(r) {
		writeJSON(w, 401, map[string]any{"code": 99991663, "msg": "invalid token"})
		return
	}
	var in struct {
		Content string `json:"content"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	f.patches[r.PathValue("id")] = append(f.patches[r.PathValue("id")], in.Content)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok"})
}

// push sends an event frame.
func (f *fake) push(messageID string, event any) bool {
	payload, _ := json.Marshal(event)
	return f.pushParts(messageID, payload, 1)
}

// pushParts sends a payload split in n frames, last part first (the
// parts of one message_id are joined by seq, whatever their order).
func (f *fake) pushParts(messageID string, payload []byte, n int) bool {
	ws, wmu := f.link.Current()
	if ws == nil {
		return false
	}
	size := (len(payload) + n - 1) / n
	wmu.Lock()
	defer wmu.Unlock()
	for i := n - 1; i >= 0; i-- {
		f.mu.Lock()
		f.nextSeq++
		seq := f.nextSeq
		f.mu.Unlock()
		part := payload[min(i*size, len(payload)):min((i+1)*size, len(payload))]
		fr := feishu.Frame{SeqID: uint64(seq), Service: 7, Method: 1, Payload: part,
			Headers: []feishu.Header{{Key: "type", Value: "event"}, {Key: "message_id", Value: messageID},
				{Key: "sum", Value: strconv.Itoa(n)}, {Key: "seq", Value: strconv.Itoa(i)}, {Key: "trace_id", Value: "tr"}}}
		if ws.WriteMessage(websocket.BinaryMessage, feishu.MarshalFrame(&fr)) != nil {
			return false
		}
	}
	return true
}

// Say pushes im.message.receive_v1 from openID in chatID (p2p unless
// group).
func (f *fake) Say(openID, chatID, messageID, text string, group bool) bool {
	content, _ := json.Marshal(map[string]string{"text": text})
	chatType := "p2p"
	if group {
		chatType = "group"
	}
	return f.push("frame-"+messageID, map[string]any{"schema": "2.0",
		"header": map[string]string{"event_id": "ev-" + messageID, "event_type": "im.message.receive_v1", "app_id": f.appID, "tenant_key": "tk"},
		"event": map[string]any{
			"sender":  map[string]any{"sender_id": map[string]string{"open_id": openID, "union_id": "on_x"}, "sender_type": "user"},
			"message": map[string]any{"message_id": messageID, "chat_id": chatID, "chat_type": chatType, "message_type": "text", "content": string(content)},
		}})
}

// Click pushes card.action.trigger for a button whose value is cmd.
func (f *fake) Click(openID, chatID, eventID, cmd string) bool {
	return f.push("frame-"+eventID, map[string]any{"schema": "2.0",
		"header": map[string]string{"event_id": eventID, "event_type": "card.action.trigger", "app_id": f.appID},
		"event": map[string]any{"operator": map[string]string{"open_id": openID},
			"action":  map[string]any{"tag": "button", "value": map[string]string{"cmd": cmd}},
			"context": map[string]string{"open_message_id": "om_card", "open_chat_id": chatID}}})
}

func (f *fake) Drop() { f.link.Drop() }

func (f *fake) Sent(chatID string) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, s := range f.sent {
		if s.Chat == chatID {
			out = append(out, s)
		}
	}
	return out
}

func (f *fake) Ack(messageID string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acks[messageID]
}

func (f *fake) Image(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[key]
}

func (f *fake) Opened() int { return f.link.Opened() }

func (f *fake) connected() bool { return f.link.Connected() }

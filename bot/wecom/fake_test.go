package wecom_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/trainbot/trainbot/bot/chattest"
)

// fake is WeCom's long-connection server as @wecom/aibot-node-sdk 1.0.7
// speaks to it, on 127.0.0.1: aibot_subscribe checked against bot_id and
// secret, a receipt for every request (upload init/chunk/finish with ids),
// callbacks and events pushed by the test.
type fake struct {
	srv           *httptest.Server
	URL           string
	botID, secret string

	mu        sync.Mutex
	link      chattest.Link  // the bot's connection, once subscribed
	refuse    []int          // HTTP statuses to answer the next upgrades with
	throttle  map[string]int // cmd → receipts still to answer with 45009
	mute      bool           // answer no ping
	frames    []wsFrame      // requests received, pings left out
	callbacks map[string]string
	chunks    map[string][][]byte
}

// wsFrame is a frame as the fake reads it.
type wsFrame struct {
	Cmd     string `json:"cmd"`
	Headers struct {
		ReqID string `json:"req_id"`
	} `json:"headers"`
	Body json.RawMessage `json:"body"`
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{botID: "bot-1", secret: "s3cr3t-long-connection", throttle: map[string]int{},
		callbacks: map[string]string{}, chunks: map[string][][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = "ws" + strings.TrimPrefix(f.srv.URL, "http")
	t.Cleanup(f.close)
	return f
}

func (f *fake) close() {
	f.Drop()
	f.srv.Close()
}

var upgrader = websocket.Upgrader{}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if len(f.refuse) > 0 {
		status := f.refuse[0]
		f.refuse = f.refuse[1:]
		f.mu.Unlock()
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	f.mu.Unlock()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var sub wsFrame
	if ws.ReadJSON(&sub) != nil || sub.Cmd != "aibot_subscribe" {
		return
	}
	var cred struct {
		BotID  string `json:"bot_id"`
		Secret string `json:"secret"`
	}
	_ = json.Unmarshal(sub.Body, &cred)
	if cred.BotID != f.botID || cred.Secret != f.secret {
		_ = ws.WriteJSON(map[string]any{"headers": map[string]string{"req_id": sub.Headers.ReqID}, "errcode": 853000, "errmsg": "invalid bot_id or secret"})
		return
	}
	wmu, closed := f.link.Open(ws)
	defer closed()
	f.write(ws, wmu, map[string]any{"headers": map[string]string{"req_id": sub.Headers.ReqID}, "errcode": 0, "errmsg": "ok"})
	for {
		var fr wsFrame
		if ws.ReadJSON(&fr) != nil {
			return
		}
		f.answer(ws, wmu, fr)
	}
}

func (f *fake) write(ws *websocket.Conn, wmu *sync.Mutex, v any) {
	wmu.Lock()
	defer wmu.Unlock()
	_ = ws.WriteJSON(v)
}

// answer records a request and writes its receipt.
func (f *fake) answer(ws *websocket.Conn, wmu *sync.Mutex, fr wsFrame) {
	receipt := map[string]any{"headers": map[string]string{"req_id": fr.Headers.ReqID}, "errcode": 0, "errmsg": "ok"}
	f.mu.Lock()
	if fr.Cmd == "ping" {
		mute := f.mute
		f.mu.Unlock()
		if !mute {
			f.write(ws, wmu, receipt)
		}
		return
	}
	if f.throttle[fr.Cmd] > 0 {
		f.throttle[fr.Cmd]--
		f.mu.Unlock()
		receipt["errcode"], receipt["errmsg"] = 45009, "api freq out of limit"
		f.write(ws, wmu, receipt)
		return
	}
	f.frames = append(f.frames, fr)
	switch fr.Cmd {
	case "aibot_upload_media_init":
		id := fmt.Sprintf("up%d", len(f.chunks)+1)
		f.chunks[id] = nil
		receipt["body"] = map[string]string{"upload_id": id}
	case "aibot_upload_media_chunk":
		var c struct {
			UploadID string `json:"upload_id"`
			Index    int    `json:"chunk_index"`
			Data     string `json:"base64_data"`
		}
		_ = json.Unmarshal(fr.Body, &c)
		raw, _ := base64.StdEncoding.DecodeString(c.Data)
		if c.Index != len(f.chunks[c.UploadID]) {
			receipt["errcode"], receipt["errmsg"] = 40058, "bad chunk_index"
		} else {
			f.chunks[c.UploadID] = append(f.chunks[c.UploadID], raw)
		}
	case "aibot_upload_media_finish":
		var c struct {
			UploadID string `json:"upload_id"`
		}
		_ = json.Unmarshal(fr.Body, &c)
		receipt["body"] = map[string]string{"media_id": "media-" + c.UploadID}
	}
	f.mu.Unlock()
	f.write(ws, wmu, receipt)
}

// push writes a frame to the connected client; false when none is.
func (f *fake) push(v any) bool {
	return f.link.WriteJSON(v)
}

// Say pushes a text message from user in a 1:1 chat (chatid "" ) or a
// group, with message id msgid.
func (f *fake) Say(user, chatid, msgid, text string) bool {
	body := map[string]any{"msgid": msgid, "aibotid": f.botID, "chattype": "single", "from": map[string]string{"userid": user},
		"msgtype": "text", "text": map[string]string{"content": text}}
	if chatid != "" {
		body["chattype"], body["chatid"] = "group", chatid
	}
	reqID := "cb_" + msgid
	f.mu.Lock()
	f.callbacks[reqID] = chatid
	if chatid == "" {
		f.callbacks[reqID] = user
	}
	f.mu.Unlock()
	return f.push(map[string]any{"cmd": "aibot_msg_callback", "headers": map[string]string{"req_id": reqID}, "body": body})
}

// Click pushes a click on a template card button.
func (f *fake) Click(user, msgid, key string) bool {
	body := map[string]any{"msgid": msgid, "chattype": "single", "from": map[string]string{"userid": user},
		"msgtype": "event", "event": map[string]any{"eventtype": "template_card_event",
			"template_card_event": map[string]string{"event_key": key, "task_id": "t"}}}
	return f.push(map[string]any{"cmd": "aibot_event_callback", "headers": map[string]string{"req_id": "ev_" + msgid}, "body": body})
}

// Evict says that another connection took the bot over.
func (f *fake) Evict() bool {
	return f.push(map[string]any{"cmd": "aibot_event_callback", "headers": map[string]string{"req_id": "ev_x"},
		"body": map[string]any{"msgid": "x", "msgtype": "event", "event": map[string]string{"eventtype": "disconnected_event"}}})
}

// Drop closes the connection without a word.
func (f *fake) Drop() { f.link.Drop() }

// sent is one message the bot sent, as a chat shows it.
type sent struct {
	Cmd     string
	Chat    string // userid or chatid
	MsgType string
	Text    string   // stream content or markdown
	Images  [][]byte // inline images of a stream reply
	MediaID string
	Buttons []string // the keys of a template card
}

// Sent is what the bot sent to chat (a userid or chatid), in order.
func (f *fake) Sent(chatRef string) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, fr := range f.frames {
		var b struct {
			ChatID   string `json:"chatid"`
			MsgType  string `json:"msgtype"`
			Markdown struct {
				Content string `json:"content"`
			} `json:"markdown"`
			Stream struct {
				Content string `json:"content"`
				Items   []struct {
					Image struct {
						Base64 string `json:"base64"`
					} `json:"image"`
				} `json:"msg_item"`
			} `json:"stream"`
			Image struct {
				MediaID string `json:"media_id"`
			} `json:"image"`
			Card struct {
				Buttons []struct {
					Key string `json:"key"`
				} `json:"button_list"`
			} `json:"template_card"`
		}
		_ = json.Unmarshal(fr.Body, &b)
		s := sent{Cmd: fr.Cmd, Chat: b.ChatID, MsgType: b.MsgType}
		switch fr.Cmd {
		case "aibot_respond_msg":
			s.Chat = f.callbacks[fr.Headers.ReqID]
			s.Text = b.Stream.Content
			for _, it := range b.Stream.Items {
				raw, _ := base64.StdEncoding.DecodeString(it.Image.Base64)
				s.Images = append(s.Images, raw)
			}
		case "aibot_send_msg":
			s.Text, s.MediaID = b.Markdown.Content, b.Image.MediaID
			for _, btn := range b.Card.Buttons {
				s.Buttons = append(s.Buttons, btn.Key)
			}
		default:
			continue
		}
		if s.Chat == chatRef {
			out = append(out, s)
		}
	}
	return out
}

// Upload is the bytes uploaded as media id.
func (f *fake) Upload(mediaID string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []byte
	for _, c := range f.chunks[strings.TrimPrefix(mediaID, "media-")] {
		out = append(out, c...)
	}
	return out
}

func (f *fake) Subscribed() int { return f.link.Opened() }

func (f *fake) connected() bool { return f.link.Connected() }

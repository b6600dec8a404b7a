package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// frame is every message on the long connection, both ways: {cmd,
// headers:{req_id}, body}. A receipt has no cmd and carries errcode.
type frame struct {
	Cmd     string          `json:"cmd,omitempty"`
	Headers headers         `json:"headers"`
	Body    json.RawMessage `json:"body,omitempty"`
	ErrCode *int            `json:"errcode,omitempty"`
	ErrMsg  string          `json:"errmsg,omitempty"`
}

type headers struct {
	ReqID string `json:"req_id"`
}

// Commands of the protocol (@wecom/aibot-node-sdk 1.0.7).
const (
	cmdSubscribe     = "aibot_subscribe"
	cmdPing          = "ping"
	cmdMsgCallback   = "aibot_msg_callback"
	cmdEventCallback = "aibot_event_callback"
	cmdRespond       = "aibot_respond_msg"
	cmdSend          = "aibot_send_msg"
	cmdUploadInit    = "aibot_upload_media_init"
	cmdUploadChunk   = "aibot_upload_media_chunk"
	cmdUploadFinish  = "aibot_upload_media_finish"
)

// maxFrame is the largest frame read (a callback is a few KB).
const maxFrame = 4 << 20

// CodeError is a receipt with a non-zero errcode.
type CodeError struct {
	Cmd  string
	Code int
	Msg  string
}

func (e *CodeError) Error() string {
	return fmt.Sprintf("wecom %s: errcode %d: %s", e.Cmd, e.Code, e.Msg)
}

// errNoReceipt: the server did not answer a request in time.
var errNoReceipt = errors.New("no receipt")

// conn is one live connection: one writer at a time (gorilla allows one
// concurrent writer), one reader goroutine (read), and the requests that
// wait for their receipts.
type conn struct {
	ws  *websocket.Conn
	log *slog.Logger
	seq *atomic.Int64

	wmu sync.Mutex // one writer

	mu      sync.Mutex
	waiting map[string]chan frame
	closed  bool
	done    chan struct{}
}

// dial opens the connection; a refusal of the upgrade says the HTTP status.
func dial(ctx context.Context, d *websocket.Dialer, url string, log *slog.Logger, seq *atomic.Int64) (*conn, error) {
	ws, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, &statusError{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	ws.SetReadLimit(maxFrame)
	return &conn{ws: ws, log: log, seq: seq, waiting: map[string]chan frame{}, done: make(chan struct{})}, nil
}

// statusError is an HTTP answer instead of a WebSocket upgrade.
type statusError struct {
	status     int
	retryAfter string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("connect: the server answered HTTP %d %s", e.status, http.StatusText(e.status))
}

// after is the Retry-After the server asked for, 0 when none.
func (e *statusError) after() time.Duration {
	if s, err := strconv.Atoi(e.retryAfter); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// reqID is "<cmd>_<ms>_<n>", as the Node SDK makes them.
func (c *conn) reqID(cmd string) string {
	return fmt.Sprintf("%s_%d_%d", cmd, time.Now().UnixMilli(), c.seq.Add(1))
}

// write sends one frame, under the write lock, with a deadline.
func (c *conn) write(f frame) error {
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// request sends a frame and waits for its receipt, for at most timeout. A
// non-zero errcode is a *CodeError.
func (c *conn) request(ctx context.Context, f frame, timeout time.Duration) (frame, error) {
	ch := make(chan frame, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return frame{}, errClosed
	}
	c.waiting[f.Headers.ReqID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, f.Headers.ReqID)
		c.mu.Unlock()
	}()
	if err := c.write(f); err != nil {
		return frame{}, fmt.Errorf("wecom %s: %w", f.Cmd, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.ErrCode != nil && *r.ErrCode != 0 {
			return r, &CodeError{Cmd: f.Cmd, Code: *r.ErrCode, Msg: r.ErrMsg}
		}
		return r, nil
	case <-t.C:
		return frame{}, fmt.Errorf("wecom %s: %w within %s", f.Cmd, errNoReceipt, timeout)
	case <-c.done:
		return frame{}, fmt.Errorf("wecom %s: %w", f.Cmd, errClosed)
	case <-ctx.Done():
		return frame{}, ctx.Err()
	}
}

var errClosed = errors.New("the connection closed")

// receipt hands a receipt to the request waiting for it; false: none was.
func (c *conn) receipt(f frame) bool {
	c.mu.Lock()
	ch, ok := c.waiting[f.Headers.ReqID]
	delete(c.waiting, f.Headers.ReqID)
	c.mu.Unlock()
	if ok {
		ch <- f // buffered, and a request gets one receipt
	}
	return ok
}

// read returns the next frame.
func (c *conn) read() (frame, error) {
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return frame{}, fmt.Errorf("unreadable frame: %w", err)
	}
	return f, nil
}

// close ends the connection; the requests waiting fail.
func (c *conn) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

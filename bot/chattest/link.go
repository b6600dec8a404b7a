package chattest

import (
	"sync"

	"github.com/gorilla/websocket"
)

// Link is a loopback fake's current WebSocket connection to the bot, the
// one it pushes frames on, with a lock that gives it one writer at a time.
// The zero value has no connection.
type Link struct {
	mu     sync.Mutex
	conn   *websocket.Conn
	wmu    *sync.Mutex
	opened int
}

// Open makes ws the current connection, counts it and returns its write
// lock; the handler defers closed, which forgets ws unless a newer
// connection took its place.
func (l *Link) Open(ws *websocket.Conn) (wmu *sync.Mutex, closed func()) {
	wmu = &sync.Mutex{}
	l.mu.Lock()
	l.conn, l.wmu = ws, wmu
	l.opened++
	l.mu.Unlock()
	return wmu, func() {
		l.mu.Lock()
		if l.conn == ws {
			l.conn = nil
		}
		l.mu.Unlock()
	}
}

// Current is the connection and its write lock; ws is nil when there is none.
func (l *Link) Current() (ws *websocket.Conn, wmu *sync.Mutex) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn, l.wmu
}

// WriteJSON writes v on the current connection; false when there is none
// or the write failed.
func (l *Link) WriteJSON(v any) bool {
	ws, wmu := l.Current()
	if ws == nil {
		return false
	}
	wmu.Lock()
	defer wmu.Unlock()
	return ws.WriteJSON(v) == nil
}

// Drop closes the connection without a word, as a network that fails.
func (l *Link) Drop() {
	l.mu.Lock()
	ws := l.conn
	l.conn = nil
	l.mu.Unlock()
	if ws != nil {
		ws.Close()
	}
}

// Opened counts the connections opened so far.
func (l *Link) Opened() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened
}

// Connected reports whether there is a current connection.
func (l *Link) Connected() bool {
	ws, _ := l.Current()
	return ws != nil
}

package deliver

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/history"
)

// Store is what the pipeline needs of the store's outbox.
type Store interface {
	// EnqueueOutbox stores an envelope; added is false when one with its
	// destination and key was stored before.
	EnqueueOutbox(ctx context.Context, it history.OutboxItem) (id int64, added bool, err error)
	// PendingOutbox returns what is not delivered yet ("" for every
	// transport), oldest first.
	PendingOutbox(ctx context.Context, transport string) ([]history.OutboxItem, error)
	// MarkOutboxSent records a delivery.
	MarkOutboxSent(ctx context.Context, id int64, at time.Time) error
	// MarkOutboxRetry records a failed attempt and when the next is due.
	MarkOutboxRetry(ctx context.Context, id int64, next time.Time, lastError string) error
	// MarkOutboxFailed records a refusal for good.
	MarkOutboxFailed(ctx context.Context, id int64, at time.Time, lastError string) error
	// PruneOutbox deletes what was delivered before sentBefore.
	PruneOutbox(ctx context.Context, sentBefore time.Time) (int64, error)
}

// store writes a durable envelope to the outbox; added is false when one
// with its key was stored for its destination before.
func (p *Pipeline) store(e Envelope) (int64, bool, error) {
	payload, err := encodeReply(e.Reply)
	if err != nil {
		return 0, false, err
	}
	key := e.Reply.Key
	if key == "" {
		key = p.autoKey()
	}
	// Bookkeeping lands even when the caller is being cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.opts.Store.EnqueueOutbox(ctx, history.OutboxItem{Transport: e.To.Transport, Chat: e.To.Chat, Key: key, Payload: payload, NotBefore: e.NotBefore})
}

// itemOf turns a pending outbox row into a lane's item.
func (p *Pipeline) itemOf(row history.OutboxItem, s chat.Sender) (*item, error) {
	r, err := decodeReply(row.Payload)
	if err != nil {
		return nil, err
	}
	e := Envelope{To: chat.ChatKey{Transport: row.Transport, Chat: row.Chat}, Reply: r, Durable: true, NotBefore: row.NotBefore}
	// Envelopes are split before they are stored; one stored whole (by an
	// earlier trainbot) goes whole, its charts after its text.
	it := &item{env: e}
	if parts := split(e, s); len(parts) == 1 {
		it = parts[0]
	}
	it.id, it.attempts, it.next = row.ID, row.Attempts, row.NextAt
	return it, nil
}

// recorder writes the outcomes of attempts that could not be written when
// they happened (the disk is full), every pause, until they land. The lane
// already acts on the outcome: a delivered reply is not sent again while
// this process lives.
type recorder struct {
	log   *slog.Logger
	pause time.Duration

	started atomic.Bool

	mu     sync.Mutex
	writes map[int64]func(context.Context) error // the newest write of each outbox row
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

func newRecorder(log *slog.Logger, pause time.Duration) *recorder {
	return &recorder{log: log, pause: pause, writes: map[int64]func(context.Context) error{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// write records an outcome now, or later when it cannot be now.
func (r *recorder) write(id int64, w func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.writes, id) // this outcome replaces an older one not yet written
	if err := w(ctx); err != nil {
		r.log.Error("outbox: outcome not recorded; trying again", "id", id, "retry_in", r.pause, "err", err)
		r.writes[id] = w
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// again tries every write left once more and returns how many still fail.
func (r *recorder) again() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, w := range r.writes {
		if w(ctx) == nil {
			delete(r.writes, id)
		}
	}
	return len(r.writes)
}

func (r *recorder) run() {
	defer close(r.done)
	t := time.NewTicker(r.pause)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-t.C:
			r.mu.Lock()
			n := len(r.writes)
			r.mu.Unlock()
			if n > 0 {
				r.again()
			}
		}
	}
}

// close stops the recorder after a last try; it returns how many outcomes
// are still not recorded.
func (r *recorder) close() int {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	if r.started.Load() {
		<-r.done
	}
	return r.again()
}

// storedReply is how a Reply is kept in the outbox.
type storedReply struct {
	Text    string           `json:"text,omitempty"`
	Images  []storedImage    `json:"images,omitempty"`
	Buttons [][]storedButton `json:"buttons,omitempty"`
	Kind    chat.Kind        `json:"kind"`
	Alert   string           `json:"alert,omitempty"`
	RunID   int64            `json:"run_id,omitempty"`
	Key     string           `json:"key,omitempty"`
	ReplyTo int64            `json:"reply_to,omitempty"`
}

type storedImage struct {
	Name    string `json:"name"`
	PNG     []byte `json:"png"`
	Caption string `json:"caption,omitempty"`
	Command string `json:"command,omitempty"`
}

type storedButton struct {
	Label string `json:"label"`
	Data  string `json:"data"`
	URL   string `json:"url,omitempty"`
}

func encodeReply(r chat.Reply) ([]byte, error) {
	s := storedReply{Text: r.Text, Kind: r.Kind, Alert: r.Alert, RunID: r.RunID, Key: r.Key, ReplyTo: r.ReplyTo}
	for _, img := range r.Images {
		s.Images = append(s.Images, storedImage(img))
	}
	for _, row := range r.Buttons {
		var out []storedButton
		for _, b := range row {
			out = append(out, storedButton(b))
		}
		s.Buttons = append(s.Buttons, out)
	}
	return json.Marshal(s)
}

func decodeReply(b []byte) (chat.Reply, error) {
	var s storedReply
	if err := json.Unmarshal(b, &s); err != nil {
		return chat.Reply{}, err
	}
	r := chat.Reply{Text: s.Text, Kind: s.Kind, Alert: s.Alert, RunID: s.RunID, Key: s.Key, ReplyTo: s.ReplyTo}
	for _, img := range s.Images {
		r.Images = append(r.Images, chat.Image(img))
	}
	for _, row := range s.Buttons {
		var out []chat.Button
		for _, b := range row {
			out = append(out, chat.Button(b))
		}
		r.Buttons = append(r.Buttons, out)
	}
	return r, nil
}

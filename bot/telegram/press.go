package telegram

import (
	"context"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/trainbot/trainbot/bot/chat"
)

// Button presses are answered off the chat's path: a press's answer is one
// answerCallbackQuery, made by one of pressWorkers, so that a flood of
// presses (a stranger's, each answered with the refusal) holds back no
// chat's messages. Telegram shows the answer's text as a toast to the
// presser alone, and stops the button's spinner.
const (
	pressWorkers      = 4
	maxPressesWaiting = 64  // more are not answered: the spinner stops on its own
	maxToast          = 200 // characters of an answer's text
	pressTimeout      = 10 * time.Second
)

// pressAnswer is the answer of one callback query.
type pressAnswer struct {
	id, text string
}

// press is a callback query waiting for its answer (chat.Press).
type press struct {
	t  *Transport
	id string

	mu       sync.Mutex
	answered bool
}

var _ chat.Press = (*press)(nil)

// Answer queues the press's one answer; it reports false when the press
// was answered before or too many answers are waiting.
func (p *press) Answer(_ context.Context, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answered {
		return false
	}
	p.answered = true
	select {
	case p.t.presses <- pressAnswer{id: p.id, text: clipUTF16(text, maxToast)}:
		return true
	default:
		p.t.log.Debug("press not answered: too many waiting", "query", p.id)
		return false
	}
}

// answerPresses starts the workers that answer presses, until ctx ends;
// the func it returns answers those still waiting (while ctx lasts) and
// waits for the workers. It is called once every press was handled.
func (t *Transport) answerPresses(ctx context.Context) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range pressWorkers {
		wg.Go(func() {
			for {
				select {
				case a := <-t.presses:
					t.answerPress(ctx, a)
				case <-stop:
					for {
						select {
						case a := <-t.presses:
							t.answerPress(ctx, a)
						default:
							return
						}
					}
				}
			}
		})
	}
	return func() {
		close(stop)
		wg.Wait()
	}
}

// answerPress makes the one attempt at answering a press.
func (t *Transport) answerPress(ctx context.Context, a pressAnswer) {
	if ctx.Err() != nil {
		return
	}
	actx, cancel := context.WithTimeout(ctx, pressTimeout)
	defer cancel()
	if _, err := t.api.request(actx, "answerCallbackQuery", tgbotapi.NewCallback(a.id, a.text)); err != nil {
		t.log.Debug("press not answered", "query", a.id, "err", err)
	}
}

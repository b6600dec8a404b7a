package chat

import "context"

type answeredKey struct{}

// WithAnswer returns a context for handling a message whose answer is
// posted after the handler returns, and the function to call once it is
// posted (or, empty, not posted): work a handler leaves for later (存档's
// second message) waits for it with Answered, so that a chat never gets
// the second answer before the first.
func WithAnswer(ctx context.Context) (context.Context, func()) {
	ch := make(chan struct{})
	done := false
	return context.WithValue(ctx, answeredKey{}, ch), func() {
		if !done {
			done = true
			close(ch)
		}
	}
}

// Answered is closed once the answer of the message being handled in ctx
// is posted; nil when ctx is not a WithAnswer context (nothing to wait
// for).
func Answered(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(answeredKey{}).(chan struct{})
	return ch
}

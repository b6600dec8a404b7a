package command

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/gpufree"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
)

// GPUFree keeps the chats' requests to be told once when GPUs are free
// (通知空闲; bot/gpufree.Watcher).
type GPUFree interface {
	// Watch adds the chat's request for n GPUs with memory bytes free each
	// (0: any), or renews it when the chat has it already (renewed), and
	// returns when it expires. who is who asked.
	Watch(ctx context.Context, key chat.ChatKey, who string, n int, memory uint64) (expires time.Time, renewed bool, err error)
	// Cancel drops every request of the chat and returns how many there
	// were.
	Cancel(ctx context.Context, key chat.ChatKey) (int, error)
}

var _ GPUFree = (*gpufree.Watcher)(nil)

// maxFreeMemory bounds the size 通知空闲 takes: more than any GPU has.
const maxFreeMemory = 1 << 40

// offWords cancel a chat's requests: 通知空闲 关, /notifyfree off.
var offWords = []string{"off", "cancel", "stop", "关", "关闭", "取消", "停"}

// freeRequest is what 通知空闲's arguments ask for.
type freeRequest struct {
	n      int
	memory uint64
	off    bool
}

// parseNotifyFree reads 通知空闲's arguments: a number of GPUs (1 to
// gpufree.MaxGPUs, default 1) and a size with its unit (config's sizes:
// 20GiB, 20G, 20000MiB, 20 GiB), in either order, or one of offWords. A
// plain number is the count, never a size: "通知空闲 2 20" is refused
// rather than read as 20 bytes. bad is the answer when they cannot be read.
func parseNotifyFree(l i18n.Lang, args []string) (q freeRequest, bad string) {
	if len(args) > 0 && slices.Contains(offWords, strings.ToLower(args[0])) {
		if len(args) > 1 {
			return q, l.T(i18n.NotifyFreeExtra, args[1])
		}
		return freeRequest{off: true}, ""
	}
	// "20 GiB": a unit typed apart from its number.
	var words []string
	for i := 0; i < len(args); i++ {
		w := args[i]
		if i+1 < len(args) && isNumber(w) && isLetters(args[i+1]) {
			if _, err := config.ParseByteSize(w + args[i+1]); err == nil {
				w += args[i+1]
				i++
			}
		}
		words = append(words, w)
	}
	q.n = 1
	nSet, memSet := false, false
	for _, w := range words {
		switch {
		case nSet && memSet:
			return q, l.T(i18n.NotifyFreeExtra, w)
		case isDigits(w) && !nSet:
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > gpufree.MaxGPUs {
				return q, l.T(i18n.NotifyFreeBadN, w, gpufree.MaxGPUs)
			}
			q.n, nSet = n, true
		case isDigits(w):
			// A second plain number: a size without its unit.
			return q, l.T(i18n.NotifyFreeBadSize, w)
		case startsNumber(w) && !memSet:
			v, err := config.ParseByteSize(w)
			if err != nil || isNumber(w) {
				return q, l.T(i18n.NotifyFreeBadSize, w)
			}
			if v > maxFreeMemory || v < 0 { // < 0: past int64 ("1e300G")
				return q, l.T(i18n.NotifyFreeTooBig, w, gpufree.Size(maxFreeMemory))
			}
			q.memory, memSet = uint64(v), true
		case !nSet && !memSet:
			return q, l.T(i18n.NotifyFreeBadN, w, gpufree.MaxGPUs)
		case !memSet:
			return q, l.T(i18n.NotifyFreeBadSize, w)
		default:
			return q, l.T(i18n.NotifyFreeExtra, w)
		}
	}
	return q, ""
}

func isDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// isNumber: digits with at most a decimal point, no unit.
func isNumber(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) < 0
}

func startsNumber(s string) bool { return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '.') }

func isLetters(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) || r > unicode.MaxASCII }) < 0
}

// notifyFree answers 通知空闲 [n] [memory] and 通知空闲 关.
func (r *Router) notifyFree(ctx context.Context, m chat.Message, l i18n.Lang, p chat.Parsed) chat.Reply {
	if r.GPUFree == nil {
		return chat.Reply{Text: l.T(i18n.NotifyFreeNoGPU)}
	}
	q, bad := parseNotifyFree(l, p.Args)
	if bad != "" {
		return chat.Reply{Text: bad + readAs(l, p)}
	}
	if q.off {
		n, err := r.GPUFree.Cancel(ctx, m.ChatKey())
		switch {
		case err != nil:
			r.log().Error("cancel the GPU watches", "chat", m.ChatKey().String(), "err", err)
			return chat.Reply{Text: l.T(i18n.SaveFailed, err.Error())}
		case n == 0:
			return chat.Reply{Text: l.T(i18n.NotifyFreeNone)}
		}
		return chat.Reply{Text: l.T(i18n.NotifyFreeCancelled, n)}
	}
	expires, renewed, err := r.GPUFree.Watch(ctx, m.ChatKey(), who(m), q.n, q.memory)
	switch {
	case errors.Is(err, gpufree.ErrTooMany):
		return chat.Reply{Text: l.T(i18n.NotifyFreeLimit, gpufree.MaxPerChat)}
	case errors.Is(err, gpufree.ErrBadCount):
		return chat.Reply{Text: l.T(i18n.NotifyFreeBadN, strconv.Itoa(q.n), gpufree.MaxGPUs)}
	case err != nil:
		r.log().Error("watch for free GPUs", "chat", m.ChatKey().String(), "err", err)
		return chat.Reply{Text: l.T(i18n.SaveFailed, err.Error())}
	}
	msg := i18n.NotifyFreeSet
	if renewed {
		msg = i18n.NotifyFreeRenewed
	}
	return chat.Reply{Text: l.T(msg, gpufree.Want(l, q.n, q.memory), render.StartedText(expires, r.now()), gpufree.OffCommand(l))}
}

package push

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// ServerChan limits (https://sct.ftqq.com/, the SDK's README at
// https://github.com/easychen/serverchan-sdk): title "最大长度为 32",
// desp (markdown) "最大长度为 32KB". Both are taken as bytes, which is
// never more than the characters the service counts.
const (
	serverchanAPI      = "https://sctapi.ftqq.com"
	serverchanTitleMax = 32
	serverchanDespMax  = 32<<10 - 512 // room for the JSON around it
)

// serverchanUID is the uid inside a Server酱³ SendKey: sctp{uid}t….
var serverchanUID = regexp.MustCompile(`^sctp(\d+)t`)

// serverchan is the ServerChan (Server酱) API, both of its forms, chosen
// by the SendKey as the official SDKs do:
//
//   - Turbo, a key "SCT…": POST https://sctapi.ftqq.com/KEY.send;
//   - Server酱³, a key "sctp{uid}t…": POST
//     https://{uid}.push.ft07.com/send/KEY.send.
//
// With an API base of one's own (a self-hosted or test server) every
// request goes there instead: BASE/KEY.send for a Turbo key and
// BASE/send/KEY.send for a Server酱³ one. The body is JSON {"title",
// "desp"} (and "noip":1, Turbo only: the message page does not show the
// server's IP); the answer {"code":0,"message":"",…}.
type serverchan struct {
	url   string // where the key's messages go, key included
	turbo bool
	lang  i18n.Lang
}

func newServerChan(o Options) (dialect, error) {
	base := o.URL
	m := serverchanUID.FindStringSubmatch(o.Key)
	switch {
	case strings.HasPrefix(o.Key, "sctp") && m == nil:
		return nil, errors.New("a Server酱³ SendKey starts with sctp, its uid (digits) and t")
	case m != nil && base == serverchanAPI:
		base = "https://" + m[1] + ".push.ft07.com"
	}
	if m != nil {
		return &serverchan{url: base + "/send/" + o.Key + ".send", lang: o.Lang}, nil
	}
	return &serverchan{url: base + "/" + o.Key + ".send", turbo: true, lang: o.Lang}, nil
}

type serverchanMsg struct {
	Title string `json:"title"`
	Desp  string `json:"desp,omitempty"`
	NoIP  int    `json:"noip,omitempty"`
}

// messages makes one message of a reply: the free tier sends 5 a day, so
// a longer text is cut (with a note) rather than spent in parts. The
// title is the first line; desp the text after it, or the whole text
// when the title had to be cut. Markdown joins lines without two
// trailing spaces.
func (s *serverchan) messages(r chat.Reply) ([]any, error) {
	why := s.lang.T(i18n.PushNoServerChan)
	text := textOf(s.lang, r, imagesNotSent(s.lang, r, why))
	title := firstLine(text, serverchanTitleMax)
	desp := text
	if first, rest, _ := strings.Cut(text, "\n"); first == title {
		desp = rest
	}
	m := serverchanMsg{Title: title}
	if desp != "" {
		m.Desp = chat.SplitText(strings.ReplaceAll(desp, "\n", "  \n"), serverchanDespMax, 1, s.lang)[0]
	}
	if s.turbo {
		m.NoIP = 1
	}
	return []any{m}, nil
}

func (s *serverchan) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	return postJSON(ctx, s.url, msg)
}

// result: code 0 is success. ServerChan documents no list of codes: the
// day's quota used up ("超过当天的发送次数限制", the free tier's 5) is
// known by its message and tried again an hour later, until the next
// day; a code of 5xx is the server's and temporary; every other code (a
// bad SendKey, a bad title) is permanent. HTTP 429 means the IP made too
// many calls in 24 hours ("stop calling for 24 hours"): tried again after
// Retry-After, else a day.
func (s *serverchan) result(status int, h http.Header, body []byte) *Error {
	e := codeResult(status, h, body, 0, func(code int, msg string) (bool, time.Duration) {
		switch {
		case strings.Contains(msg, "次数限制"):
			return true, time.Hour
		case code >= 500 && code < 600:
			return true, 0
		}
		return false, 0
	})
	if e != nil && status == http.StatusTooManyRequests && h.Get("Retry-After") == "" {
		e.After = 24 * time.Hour
	}
	return e
}

package push

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Slack incoming webhook and Block Kit limits
// (https://api.slack.com/messaging/webhooks,
// https://api.slack.com/reference/block-kit/blocks).
const (
	slackHeaderMax   = 150   // characters of a header block's plain_text
	slackSectionMax  = 3000  // characters of a section's or a context element's text
	slackBlocksMax   = 50    // blocks of a message
	slackTextMax     = 40000 // characters of the top-level text (Slack truncates beyond)
	slackLabelMax    = 75    // characters of a button's text
	slackActionsMax  = 25    // elements of an actions block
	slackSectionsMax = slackBlocksMax - 3
)

// slack is a Slack incoming webhook: POST
// https://hooks.slack.com/services/T…/B…/TOKEN with {"text": …,
// "blocks": […]}, answered 200 "ok"; errors are HTTP statuses with a word
// in the body (400 invalid_blocks, 403 invalid_token, 404 no_service, 410
// channel_is_archived, 429 with Retry-After). A webhook can neither upload
// files nor take interactive buttons: charts become a line that links
// the run's page, buttons with a command a line saying what to send.
type slack struct {
	url  string
	lang i18n.Lang
}

type slackMsg struct {
	Text   string       `json:"text"` // the fallback, for notifications
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string     `json:"type"` // header, section, actions, context
	Text     *slackText `json:"text,omitempty"`
	Elements []any      `json:"elements,omitempty"` // slackButton (actions), slackText (context)
}

type slackText struct {
	Type  string `json:"type"` // plain_text, mrkdwn
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

type slackButton struct {
	Type string    `json:"type"` // button
	Text slackText `json:"text"`
	URL  string    `json:"url"`
}

// slackEscaper escapes the three characters Slack's mrkdwn reads as
// control characters
// (https://api.slack.com/reference/surfaces/formatting#escaping).
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (s *slack) messages(r chat.Reply) ([]any, error) {
	page := pageURL(r)
	var blocks []slackBlock
	first, rest, _ := strings.Cut(strings.TrimLeft(r.Text, "\n"), "\n")
	if title := cutRunes(first, slackHeaderMax); strings.TrimSpace(title) != "" {
		blocks = append(blocks, slackBlock{Type: "header", Text: &slackText{Type: "plain_text", Text: title, Emoji: true}})
		if title != first { // the header was cut: the whole line opens the body
			rest = strings.TrimRight(first+"\n"+rest, "\n")
		}
	}
	for _, part := range slackSections(rest, s.lang) {
		blocks = append(blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: part}})
	}
	var buttons []any
	var lines []string
	if r.Kind == chat.KindAlert { // as buttonLines: the buttons of notices would be noise
		for _, row := range r.Buttons {
			for _, b := range row {
				switch {
				case b.URL != "" && len(buttons) < slackActionsMax:
					buttons = append(buttons, slackButton{Type: "button", Text: slackText{Type: "plain_text", Text: cutRunes(b.Label, slackLabelMax), Emoji: true}, URL: b.URL})
				case b.URL != "":
					lines = append(lines, slackEscape("↪ "+b.Label+": ")+slackLink(b.URL, b.URL))
				default:
					lines = append(lines, slackEscape(strings.TrimLeft(s.lang.T(i18n.PushButton, b.Label, b.Data), "\n")))
				}
			}
		}
	}
	lines = append(lines, s.chartLines(r, page)...)
	if len(buttons) > 0 {
		blocks = append(blocks, slackBlock{Type: "actions", Elements: buttons})
	}
	if ctx := joinUpTo(lines, slackSectionMax); ctx != "" {
		blocks = append(blocks, slackBlock{Type: "context", Elements: []any{slackText{Type: "mrkdwn", Text: ctx}}})
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	// Cut before escaping, which makes a character at most five.
	fallback := slackEscape(cutRunes(textOf(s.lang, r, s.chartNotes(r)), slackTextMax/5))
	return []any{slackMsg{Text: fallback, Blocks: blocks}}, nil
}

// slackNoImages is why a Slack webhook shows no chart.
func slackNoImages(l i18n.Lang) string {
	return l.T(i18n.PushNoSlack)
}

// chartLines are the context lines of the reply's charts, escaped: each
// linking the run's page when the reply has one, else imagesNotSent's
// note.
func (s *slack) chartLines(r chat.Reply, page string) []string {
	if page == "" {
		var out []string
		for _, n := range imagesNotSent(s.lang, r, slackNoImages(s.lang)) {
			out = append(out, slackEscape(n))
		}
		return out
	}
	open := s.lang.T(i18n.PushOpenPage)
	var out []string
	for _, im := range r.Images {
		out = append(out, slackEscape(chartLabel(im)+": ")+slackLink(page, open))
	}
	return out
}

// chartNotes are the chart lines of the fallback text, unescaped.
func (s *slack) chartNotes(r chat.Reply) []string {
	page := pageURL(r)
	if page == "" {
		return imagesNotSent(s.lang, r, slackNoImages(s.lang))
	}
	var out []string
	for _, im := range r.Images {
		out = append(out, chartLabel(im)+": "+page)
	}
	return out
}

// chartLabel names a chart in a line: "📈 run-3-loss.png (run #3 mnist ·
// loss)".
func chartLabel(im chat.Image) string {
	if im.Caption == "" {
		return "📈 " + im.Name
	}
	return "📈 " + im.Name + " (" + im.Caption + ")"
}

// pageURL is the run's web page: the first URL button's, "" when the bot
// has no public pages.
func pageURL(r chat.Reply) string {
	for _, row := range r.Buttons {
		for _, b := range row {
			if b.URL != "" {
				return b.URL
			}
		}
	}
	return ""
}

func slackEscape(s string) string { return slackEscaper.Replace(s) }

// slackLink is mrkdwn's <url|text>; "|" would end the URL and ">" the link.
func slackLink(u, text string) string {
	u = strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", "&", "&amp;").Replace(u)
	return "<" + u + "|" + strings.ReplaceAll(slackEscape(text), "|", "¦") + ">"
}

// slackSections cuts text into escaped mrkdwn sections of at most
// slackSectionMax bytes (so characters too), at most slackSectionsMax of
// them. Escaping makes text longer, so it is cut before, and again
// smaller while an escaped part is too long: at 600 bytes a part always
// fits ("&" → "&amp;" is the longest growth, five times).
func slackSections(text string, l i18n.Lang) []string {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	for limit := slackSectionMax; ; limit /= 2 {
		var out []string
		fits := true
		for _, p := range chat.SplitText(text, limit, slackSectionsMax, l) {
			e := slackEscape(p)
			if len(e) > slackSectionMax {
				fits = false
				break
			}
			if strings.TrimSpace(e) != "" { // Slack refuses an empty section
				out = append(out, e)
			}
		}
		if fits || limit <= slackSectionMax/5 {
			return out
		}
	}
}

// joinUpTo joins lines with "\n" while the result stays within max bytes.
func joinUpTo(lines []string, max int) string {
	var b strings.Builder
	for _, l := range lines {
		if b.Len()+len(l)+1 > max {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

// cutRunes is s cut to at most n characters, ending with "…" when cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (s *slack) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	return postJSON(ctx, s.url, msg)
}

// result: 2xx ("ok") is success; the error words come as the body of a
// 4xx, permanent but for 429 (after Retry-After); 5xx is temporary.
func (s *slack) result(status int, h http.Header, body []byte) *Error {
	return httpError(status, h, body)
}

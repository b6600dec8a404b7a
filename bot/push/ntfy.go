package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// ntfy limits (https://docs.ntfy.sh/publish/#limitations).
const (
	ntfyMessageMax = 4096 - 96 // bytes of a message; a longer one becomes an attachment file
	ntfyTitleMax   = 250       // bytes of a title (ours: a notification shows one line)
	ntfyFileMax    = 2 << 20   // bytes of an attachment on ntfy.sh (a self-hosted default is 15 MB)
	ntfyActionsMax = 3         // action buttons a message may carry
)

// ntfyTopic is what an ntfy server takes as a topic name.
var ntfyTopic = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)

// ntfy is an ntfy server's publish API (https://docs.ntfy.sh/publish/):
// text as JSON to the server root (POST {base}/ with the topic in the
// body), a chart as an attachment (PUT {base}/{topic}, the file as the
// body, Filename header). An access token goes as "Authorization: Bearer".
// It answers 200 with the message, else {"code":40301,"http":403,"error":…}.
type ntfy struct {
	base, topic, token string
	lang               i18n.Lang
}

func newNtfy(o Options) (dialect, error) {
	if o.Topic == "" {
		return nil, errors.New("no topic")
	}
	if !ntfyTopic.MatchString(o.Topic) {
		return nil, errors.New("the topic must be 1 to 64 letters, digits, '-' or '_'")
	}
	return &ntfy{base: o.URL, topic: o.Topic, token: o.Key, lang: o.Lang}, nil
}

// ntfyMsg is a JSON publish (https://docs.ntfy.sh/publish/#publish-as-json).
type ntfyMsg struct {
	Topic    string       `json:"topic"`
	Title    string       `json:"title,omitempty"`
	Message  string       `json:"message"`
	Priority int          `json:"priority"`
	Tags     []string     `json:"tags,omitempty"`
	Click    string       `json:"click,omitempty"`
	Actions  []ntfyAction `json:"actions,omitempty"`
}

// ntfyAction is a "view" action: a button that opens a URL.
type ntfyAction struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	URL    string `json:"url"`
}

// ntfyFile is a chart, uploaded as an attachment.
type ntfyFile struct {
	name, message string
	data          []byte
}

// ntfyLow is the priority of what follows a reply's first message: the
// rest of a long text and the charts ring quietly (the first rang).
const ntfyLow = 2

// ntfyPriority is a reply's priority (1 min … 5 urgent) and its tags
// (shown as emoji before the title: https://docs.ntfy.sh/emojis/).
func ntfyPriority(r chat.Reply) (int, []string) {
	var p int
	var tags []string
	switch chat.SeverityOf(r) {
	case chat.SeverityCritical:
		p, tags = 5, []string{"rotating_light"}
	case chat.SeverityWarning:
		p, tags = 4, []string{"warning"}
	case chat.SeverityInfo:
		p = 3
		if r.Alert == chat.AlertFinished {
			tags = []string{"white_check_mark"}
		}
	default:
		p, tags = ntfyLow, []string{"chart_with_upwards_trend"}
	}
	if r.Alert != "" {
		tags = append(tags, r.Alert) // a word tag: "oom"
	}
	return p, tags
}

func (n *ntfy) messages(r chat.Reply) ([]any, error) {
	var files []any
	var notes []string
	for _, im := range r.Images {
		data, err := fitImage(im.PNG, ntfyFileMax)
		if err != nil {
			notes = append(notes, n.lang.T(i18n.PushChartNotSent, im.Name, err))
			continue
		}
		name := im.Name
		if !bytes.Equal(data, im.PNG) { // re-encoded as JPEG
			name = strings.TrimSuffix(name, path.Ext(name)) + ".jpg"
		}
		files = append(files, ntfyFile{name: name, message: im.Caption, data: data})
	}
	text := textOf(n.lang, r, notes)
	title, rest, _ := strings.Cut(text, "\n")
	if rest == "" || len(title) > ntfyTitleMax {
		title, rest = firstLine(text, ntfyTitleMax), text
		if rest == title {
			title = "" // one short line: the message alone
		}
	}
	priority, tags := ntfyPriority(r)
	var click string
	var actions []ntfyAction
	for _, row := range r.Buttons {
		for _, b := range row {
			if b.URL == "" {
				continue
			}
			if click == "" {
				click = b.URL
			}
			if len(actions) < ntfyActionsMax {
				actions = append(actions, ntfyAction{Action: "view", Label: b.Label, URL: b.URL})
			}
		}
	}
	var out []any
	for i, part := range splitText(rest, ntfyMessageMax, n.lang) {
		m := ntfyMsg{Topic: n.topic, Title: title, Message: part, Priority: priority, Tags: tags, Click: click, Actions: actions}
		if i > 0 {
			m.Priority, m.Tags, m.Actions = ntfyLow, nil, nil
		}
		out = append(out, m)
	}
	return append(out, files...), nil
}

func (n *ntfy) request(ctx context.Context, msg any, _ time.Time) (*http.Request, error) {
	var req *http.Request
	switch m := msg.(type) {
	case ntfyMsg:
		body, err := encodeJSON(m)
		if err != nil {
			return nil, err
		}
		if req, err = jsonRequest(ctx, n.base+"/", body); err != nil {
			return nil, err
		}
	case ntfyFile:
		var err error
		req, err = http.NewRequestWithContext(ctx, http.MethodPut, n.base+"/"+url.PathEscape(n.topic), bytes.NewReader(m.data))
		if err != nil {
			return nil, errors.New("bad server URL")
		}
		req.Header.Set("Content-Type", http.DetectContentType(m.data))
		req.Header.Set("User-Agent", "trainbot")
		req.Header.Set("Filename", m.name)
		req.Header.Set("Priority", strconv.Itoa(ntfyLow))
		if m.message != "" {
			// Headers are ASCII: ntfy decodes RFC 2047 words ("=?utf-8?b?…?=").
			req.Header.Set("Message", mime.BEncoding.Encode("utf-8", m.message))
		}
	default:
		return nil, errors.New("unknown ntfy message")
	}
	if n.token != "" {
		req.Header.Set("Authorization", "Bearer "+n.token)
	}
	return req, nil
}

// ntfy's daily quotas (42905 attachment bandwidth, 42908 messages): a
// minute's wait does not help.
var ntfyDaily = map[int]bool{42905: true, 42908: true}

// result reads ntfy's answer: 2xx is success; 429 (42901 too many
// requests) may be retried after Retry-After or a minute, 408 and 5xx
// at once; 401/403 (a bad token, a reserved topic), 400 (40014:
// attachments not allowed) and 413 (41301: attachment too large) are
// permanent.
func (n *ntfy) result(status int, h http.Header, body []byte) *Error {
	e := httpError(status, h, body)
	if e == nil {
		return nil
	}
	var res struct {
		Code  int    `json:"code"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &res) == nil && (res.Code != 0 || res.Error != "") {
		e.Code, e.Msg = res.Code, res.Error
	}
	if ntfyDaily[e.Code] && h.Get("Retry-After") == "" {
		e.After = time.Hour
	}
	return e
}

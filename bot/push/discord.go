package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Discord webhook limits
// (https://discord.com/developers/docs/resources/webhook#execute-webhook,
// https://discord.com/developers/docs/resources/message#embed-object-embed-limits,
// https://discord.com/developers/docs/reference#uploading-files).
const (
	discordTitleMax = 256     // characters of an embed's title
	discordDescMax  = 4096    // characters of an embed's description
	discordFilesMax = 10      // files of a message
	discordFileMax  = 8 << 20 // bytes of a file: the oldest and smallest upload limit
	discordBodyMax  = 25 << 20
)

// Embed colours by severity.
const (
	discordRed    = 0xE74C3C // critical
	discordOrange = 0xE67E22 // warning
	discordGreen  = 0x2ECC71 // info
	discordBlue   = 0x3498DB // progress
)

// discord is a Discord channel webhook: POST
// https://discord.com/api/webhooks/ID/TOKEN?wait=true with one embed
// (title, description, colour, footer), as JSON, or as multipart/form-data
// with a payload_json part and a files[n] part per chart when the reply
// has charts. With wait=true Discord answers 200 and the message; errors
// are {"code":…,"message":…} (400 50035 invalid form body, 404 10015
// unknown webhook), 429 {"retry_after": seconds, "global": …}.
type discord struct {
	url  string // with wait=true
	lang i18n.Lang
}

// discordMsg is one message: its payload and the files it attaches.
type discordMsg struct {
	payload discordPayload
	files   []discordFile
}

type discordFile struct {
	name, contentType string
	caption           string // the attachment's description (alt text)
	data              []byte
}

type discordPayload struct {
	Username        string              `json:"username"`
	Content         string              `json:"content"`
	Embeds          []discordEmbed      `json:"embeds"`
	Attachments     []discordAttachment `json:"attachments,omitempty"`
	AllowedMentions discordMentions     `json:"allowed_mentions"`
}

type discordEmbed struct {
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	URL         string         `json:"url,omitempty"`
	Color       int            `json:"color"`
	Image       *discordImage  `json:"image,omitempty"`
	Footer      *discordFooter `json:"footer,omitempty"`
	Timestamp   string         `json:"timestamp,omitempty"`
}

type discordImage struct {
	URL string `json:"url"` // attachment://NAME
}

type discordFooter struct {
	Text string `json:"text"`
}

type discordAttachment struct {
	ID          int    `json:"id"` // n of files[n]
	Filename    string `json:"filename"`
	Description string `json:"description,omitempty"`
}

// discordMentions with an empty parse list: no @everyone, role or user
// in a training log pings anyone.
type discordMentions struct {
	Parse []string `json:"parse"`
}

func newDiscord(o Options) (dialect, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, errors.New("the webhook URL does not parse")
	}
	if q := u.Query(); q.Get("wait") != "true" {
		q.Set("wait", "true") // answer with the message, so that a 200 means it was posted
		u.RawQuery = q.Encode()
	}
	return &discord{url: u.String(), lang: o.Lang}, nil
}

func discordColor(r chat.Reply) int {
	switch chat.SeverityOf(r) {
	case chat.SeverityCritical:
		return discordRed
	case chat.SeverityWarning:
		return discordOrange
	case chat.SeverityInfo:
		return discordGreen
	}
	return discordBlue
}

func (d *discord) messages(r chat.Reply) ([]any, error) {
	files, notes := d.files(r)
	text := textOf(d.lang, r, notes)
	first, rest, _ := strings.Cut(text, "\n")
	title := cutRunes(first, discordTitleMax)
	if title != first { // the title was cut: the whole line opens the description
		rest = strings.TrimRight(first+"\n"+rest, "\n")
	}
	var parts []string
	if strings.TrimSpace(rest) != "" {
		parts = splitText(rest, discordDescMax, d.lang) // bytes, so at most as many characters
	}
	if title == "" && len(parts) == 0 && len(files) == 0 {
		return nil, nil
	}
	footer := &discordFooter{Text: "trainbot"}
	if r.RunID > 0 {
		footer.Text += " · run #" + strconv.FormatInt(r.RunID, 10)
	}
	color, page := discordColor(r), pageURL(r)
	var out []any
	for i := 0; i == 0 || i < len(parts); i++ {
		e := discordEmbed{Color: color, Footer: footer}
		if i < len(parts) {
			e.Description = parts[i]
		}
		m := discordMsg{payload: discordPayload{Username: "trainbot", AllowedMentions: discordMentions{Parse: []string{}}}}
		if i == 0 {
			e.Title, e.URL = title, page
			if len(files) > 0 {
				e.Image = &discordImage{URL: "attachment://" + files[0].name}
			}
			m.files = files
			for n, f := range files {
				m.payload.Attachments = append(m.payload.Attachments, discordAttachment{ID: n, Filename: f.name, Description: cutRunes(f.caption, 1024)})
			}
		}
		m.payload.Embeds = []discordEmbed{e}
		out = append(out, m)
	}
	return out, nil
}

// files are the charts to attach, each at most discordFileMax bytes
// (fitImage), at most discordFilesMax of them and discordBodyMax in all,
// and the notes for those left out and of the captions.
func (d *discord) files(r chat.Reply) (files []discordFile, notes []string) {
	total := 64 << 10 // the payload and the parts' headers
	seen := map[string]bool{}
	for i, im := range r.Images {
		data, err := fitImage(im.PNG, discordFileMax)
		switch {
		case err != nil:
		case len(files) == discordFilesMax:
			err = fmt.Errorf("more than %d files in one message", discordFilesMax)
		case total+len(data) > discordBodyMax:
			err = fmt.Errorf("the message would be over %d MiB", discordBodyMax>>20)
		}
		if err != nil {
			notes = append(notes, d.lang.T(i18n.PushChartNotSent, im.Name, err))
			continue
		}
		total += len(data)
		ct := http.DetectContentType(data) // fitImage may have made a JPEG
		name := discordFilename(im.Name, ct, i, seen)
		files = append(files, discordFile{name: name, contentType: ct, caption: im.Caption, data: data})
		if im.Caption != "" {
			notes = append(notes, "📈 "+im.Caption)
		}
	}
	return files, notes
}

// discordFilename is a chart's file name as attachment:// can name it
// (letters, digits, '.', '-', '_'), with the extension of its type and
// unique in the message.
func discordFilename(name, contentType string, i int, seen map[string]bool) string {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".png"), ".PNG")
	base = strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, base)
	if strings.Trim(base, "_.") == "" {
		base = "chart-" + strconv.Itoa(i+1)
	}
	ext := ".png"
	if contentType == "image/jpeg" {
		ext = ".jpg"
	}
	out := base + ext
	for n := 2; seen[out]; n++ {
		out = base + "-" + strconv.Itoa(n) + ext
	}
	seen[out] = true
	return out
}

func (d *discord) request(ctx context.Context, msg any, now time.Time) (*http.Request, error) {
	m := msg.(discordMsg)
	p := m.payload
	p.Embeds = slices.Clone(p.Embeds)
	for i := range p.Embeds {
		p.Embeds[i].Timestamp = now.UTC().Format(time.RFC3339)
	}
	payload, err := encodeJSON(p)
	if err != nil {
		return nil, err
	}
	if len(m.files) == 0 {
		return jsonRequest(ctx, d.url, payload)
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, err
	}
	part.Write(payload)
	for n, f := range m.files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"; filename="%s"`, n, f.name)) // a discordFilename needs no quoting
		h.Set("Content-Type", f.contentType)
		part, err := w.CreatePart(h)
		if err != nil {
			return nil, err
		}
		part.Write(f.data)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	req, err := jsonRequest(ctx, d.url, b.Bytes())
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", w.FormDataContentType()) // not JSON: the parts
	return req, nil
}

// result: 2xx is success (200 and the message with wait=true, 204
// without); 4xx permanent but for 429, which is retried after its
// retry_after (seconds, rounded up to the millisecond), else
// X-RateLimit-Reset-After or Retry-After; 5xx temporary. The error holds
// Discord's code and message.
func (d *discord) result(status int, h http.Header, body []byte) *Error {
	e := httpError(status, h, body)
	if e == nil {
		return nil
	}
	var res struct {
		Code       int             `json:"code"`
		Message    string          `json:"message"`
		Errors     json.RawMessage `json:"errors"`
		RetryAfter *float64        `json:"retry_after"`
	}
	if json.Unmarshal(body, &res) == nil {
		if res.Message != "" {
			e.Code, e.Msg = res.Code, res.Message
			if len(res.Errors) > 0 { // 50035 says which field in errors
				e.Msg += ": " + snippet(res.Errors)
			}
		}
		if status == http.StatusTooManyRequests && res.RetryAfter != nil {
			e.After = secondsAfter(*res.RetryAfter)
			return e
		}
	}
	if status == http.StatusTooManyRequests {
		if s, err := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Reset-After")), 64); err == nil {
			e.After = secondsAfter(s)
		}
	}
	return e
}

// secondsAfter is a pause given in seconds, rounded up to the
// millisecond, at most an hour.
func secondsAfter(s float64) time.Duration {
	switch {
	case math.IsNaN(s) || s < 0:
		return 0
	case s > 3600:
		return time.Hour
	}
	return time.Duration(math.Ceil(s*1000)) * time.Millisecond
}

package push

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
)

// Email limits. Providers refuse mails over about 20–25 MB (Gmail 25 MB,
// QQ mail and 163 less); the rate limit they hold users to is per day
// (Gmail about 500 recipients a day, QQ mail and 163 their own), which
// Spec's per-minute window cannot express, so ours is low.
const (
	mailMax        = 10 << 20 // bytes of a mail: charts past it are left out
	mailSubjectMax = 120      // bytes of the subject's text before encoding
	mailTimeout    = 30 * time.Second
	mailRetry      = time.Minute // the wait after a 4xx reply
)

// email sends one mail per reply over SMTP (net/smtp): multipart/related
// holding multipart/alternative (text/plain and text/html) and the
// charts as inline image/png parts the HTML shows by Content-ID. TLS is
// implicit (MailTLS), STARTTLS (required: never plain text instead) or
// none; AUTH PLAIN when a username is set.
type email struct {
	addr string // host:port
	host string
	from *mail.Address
	to   []*mail.Address
	user string
	pass string
	mode string
	tls  *tls.Config
	lang i18n.Lang
}

// mailMsg is one mail before its Date and Message-ID.
type mailMsg struct {
	subject   string // encoded, folded
	important bool   // a critical alert
	ctype     string // the top-level Content-Type
	body      []byte // CRLF lines
}

func newEmail(o Options) (dialect, error) {
	m := o.Mail
	host, port, err := net.SplitHostPort(m.SMTP)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("smtp: want \"host:port\", got %q", m.SMTP)
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return nil, fmt.Errorf("from %q: %v", m.From, err)
	}
	if from.Name == "" {
		from.Name = "trainbot"
	}
	if len(m.To) == 0 {
		return nil, errors.New("no recipients (to)")
	}
	var to []*mail.Address
	for _, s := range m.To {
		a, err := mail.ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("to %q: %v", s, err)
		}
		to = append(to, a)
	}
	mode := m.TLS
	if mode == "" {
		mode = MailSTARTTLS
	}
	switch {
	case mode != MailSTARTTLS && mode != MailTLS && mode != MailNoTLS:
		return nil, fmt.Errorf("tls: want %s, got %q", strings.Join(MailTLSModes, ", "), m.TLS)
	case mode == MailNoTLS && m.Password != "":
		return nil, errors.New(`tls "none" would send the password in plain text: use "starttls" or "tls"`)
	case (m.Username == "") != (m.Password == ""):
		return nil, errors.New("give both a username and a password, or neither")
	}
	cfg := &tls.Config{}
	if m.TLSConfig != nil {
		cfg = m.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	return &email{addr: m.SMTP, host: host, from: from, to: to, user: m.Username, pass: m.Password, mode: mode, tls: cfg, lang: o.Lang}, nil
}

func (e *email) messages(r chat.Reply) ([]any, error) {
	// Which charts fit: a bound on the text parts (quoted-printable
	// writes a byte of UTF-8 as three) and on each chart's base64 lines.
	size := 6*len(r.Text) + 8<<10
	var charts []chat.Image
	var notes []string
	left := 0
	for _, im := range r.Images {
		n := base64Lines(len(im.PNG)) + len(im.Caption) + 512
		if size+n > mailMax {
			left++
			continue
		}
		size += n
		charts = append(charts, im)
		if im.Caption != "" {
			notes = append(notes, "📈 "+im.Caption)
		}
	}
	var leftOut []string
	if left > 0 {
		leftOut = []string{e.lang.T(i18n.PushNotShown, left, e.lang.T(i18n.PushMailTooLarge, mailMax>>20))}
	}
	cids := contentIDs(charts)

	var alt bytes.Buffer
	aw := multipart.NewWriter(&alt)
	if err := qpPart(aw, "text/plain; charset=utf-8", textOf(e.lang, r, append(notes, leftOut...))); err != nil {
		return nil, err
	}
	if err := qpPart(aw, "text/html; charset=utf-8", mailHTML(e.lang, r, charts, cids, leftOut)); err != nil {
		return nil, err
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}

	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	p, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {"multipart/alternative; boundary=" + aw.Boundary()}})
	if err != nil {
		return nil, err
	}
	p.Write(alt.Bytes())
	for i, im := range charts {
		name := cids[i][:strings.LastIndexByte(cids[i], '@')]
		p, err := w.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {`image/png; name="` + name + `"`},
			"Content-Transfer-Encoding": {"base64"},
			"Content-Id":                {"<" + cids[i] + ">"},
			"Content-Disposition":       {`inline; filename="` + name + `"`},
		})
		if err != nil {
			return nil, err
		}
		writeBase64(p, im.PNG)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return []any{&mailMsg{
		subject:   mailSubject(r),
		important: chat.SeverityOf(r) == chat.SeverityCritical,
		ctype:     `multipart/related; type="multipart/alternative"; boundary=` + w.Boundary(),
		body:      body.Bytes(),
	}}, nil
}

// mailSubject is "[trainbot] " and the text's first line, RFC 2047
// encoded when it is not ASCII (base64 words, folded between words).
func mailSubject(r chat.Reply) string {
	s := "[trainbot]"
	if first := strings.TrimSpace(firstLine(r.Text, mailSubjectMax)); first != "" {
		s += " " + first
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] < ' ' {
			return strings.ReplaceAll(mime.BEncoding.Encode("utf-8", s), "?= =?", "?=\r\n =?")
		}
	}
	return s
}

// contentIDs names each chart's part "run-3-loss.png@trainbot": its file
// name in letters, digits, '.', '-' and '_', numbered when two are alike.
func contentIDs(charts []chat.Image) []string {
	var out []string
	seen := map[string]bool{}
	for i, im := range charts {
		name := strings.Map(func(r rune) rune {
			if r < utf8.RuneSelf && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return r
			}
			return '_'
		}, im.Name)
		if name == "" || name[0] == '.' {
			name = fmt.Sprintf("chart-%d.png", i+1)
		}
		if seen[name] {
			name = fmt.Sprintf("%d-%s", i+1, name)
		}
		seen[name] = true
		out = append(out, name+"@trainbot")
	}
	return out
}

// severityColors colour an alert's first line in the HTML part.
var severityColors = map[chat.Severity]string{chat.SeverityCritical: "#c62828", chat.SeverityWarning: "#e65100", chat.SeverityInfo: "#2e7d32"}

// mailHTML is the HTML part: the text escaped (the first line bold, in the
// severity's colour), each chart by its Content-ID with its caption, the
// buttons (a URL as a link, a command as the words to send) and notes.
func mailHTML(l i18n.Lang, r chat.Reply, charts []chat.Image, cids []string, notes []string) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\n<body style=\"font-family:sans-serif;font-size:14px\">\n")
	first, rest, _ := strings.Cut(strings.TrimLeft(r.Text, "\n"), "\n")
	style := "font-weight:bold"
	if c, ok := severityColors[chat.SeverityOf(r)]; ok && r.Kind == chat.KindAlert {
		style += ";color:" + c
	}
	fmt.Fprintf(&b, "<p style=\"%s\">%s</p>\n", style, htmlLines(first))
	if rest != "" {
		fmt.Fprintf(&b, "<p>%s</p>\n", htmlLines(rest))
	}
	for i, im := range charts {
		alt := im.Caption
		if alt == "" {
			alt = im.Name
		}
		fmt.Fprintf(&b, "<p><img src=\"cid:%s\" alt=\"%s\" style=\"max-width:100%%\">", html.EscapeString(cids[i]), html.EscapeString(alt))
		if im.Caption != "" {
			fmt.Fprintf(&b, "<br>%s", html.EscapeString(im.Caption))
		}
		b.WriteString("</p>\n")
	}
	for _, btn := range alertButtons(r) {
		if btn.URL != "" {
			fmt.Fprintf(&b, "<p>↪ <a href=\"%s\">%s</a></p>\n", html.EscapeString(btn.URL), html.EscapeString(btn.Label))
			continue
		}
		fmt.Fprintf(&b, "<p>%s</p>\n", htmlLines(strings.TrimLeft(l.T(i18n.PushButton, btn.Label, btn.Data), "\n")))
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "<p>%s</p>\n", htmlLines(n))
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// htmlLines escapes s and breaks its lines with <br>.
func htmlLines(s string) string {
	return strings.ReplaceAll(html.EscapeString(s), "\n", "<br>\n")
}

// qpPart writes a quoted-printable part of multipart w.
func qpPart(w *multipart.Writer, ctype, text string) error {
	p, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {ctype}, "Content-Transfer-Encoding": {"quoted-printable"}})
	if err != nil {
		return err
	}
	q := quotedprintable.NewWriter(p)
	if _, err := io.WriteString(q, text); err != nil {
		return err
	}
	return q.Close()
}

// writeBase64 writes data as base64 in lines of 76 characters.
func writeBase64(w io.Writer, data []byte) {
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		io.WriteString(w, enc[:76]+"\r\n")
		enc = enc[76:]
	}
	io.WriteString(w, enc+"\r\n")
}

// base64Lines is the size of n bytes written by writeBase64.
func base64Lines(n int) int {
	enc := (n + 2) / 3 * 4
	return enc + 2*(enc/76+1)
}

// header is the mail's header, dated now, with a new Message-ID.
func (e *email) header(m *mailMsg, now time.Time) []byte {
	var to []string
	for _, a := range e.to {
		to = append(to, a.String())
	}
	var id [8]byte
	rand.Read(id[:])
	domain := e.from.Address[strings.LastIndexByte(e.from.Address, '@')+1:]
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\n", e.from)
	fmt.Fprintf(&b, "To: %s\r\n", strings.Join(to, ",\r\n "))
	fmt.Fprintf(&b, "Subject: %s\r\n", m.subject)
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s.%s@%s>\r\n", now.UTC().Format("20060102150405"), hex.EncodeToString(id[:]), domain)
	b.WriteString("MIME-Version: 1.0\r\n")
	if m.important {
		b.WriteString("X-Priority: 1 (Highest)\r\nImportance: high\r\n")
	}
	b.WriteString("X-Mailer: trainbot\r\n")
	fmt.Fprintf(&b, "Content-Type: %s\r\n\r\n", m.ctype)
	return b.Bytes()
}

// deliver makes one SMTP transaction: connect (TLS, or STARTTLS that the
// server must offer), AUTH, MAIL FROM, RCPT TO each recipient, DATA,
// QUIT. It takes at most ctx's time or 30 s; the connection is closed on
// every path.
func (e *email) deliver(ctx context.Context, msg any, now time.Time) *Error {
	m := msg.(*mailMsg)
	deadline := time.Now().Add(mailTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dialer := &net.Dialer{Deadline: deadline}
	var conn net.Conn
	var err error
	if e.mode == MailTLS {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: e.tls}).DialContext(ctx, "tcp", e.addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", e.addr)
	}
	if err != nil {
		return mailError("connect", err)
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	// net/smtp takes no context: a cancelled ctx ends the connection's
	// deadline instead.
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })()

	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return mailError("greeting", err)
	}
	defer c.Close()
	if e.mode == MailSTARTTLS {
		if err := c.Hello("localhost"); err != nil {
			return mailError("hello", err)
		}
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return &Error{Op: "starttls", Msg: `the server does not offer STARTTLS: nothing sent in plain text (for an implicit-TLS port such as 465 set tls = "tls")`}
		}
		if err := c.StartTLS(e.tls); err != nil {
			return mailError("starttls", err)
		}
	}
	if e.user != "" {
		if err := c.Auth(smtp.PlainAuth("", e.user, e.pass, e.host)); err != nil {
			return mailError("auth", err)
		}
	}
	if err := c.Mail(e.from.Address); err != nil {
		return mailError("mail from", err)
	}
	for _, a := range e.to {
		if err := c.Rcpt(a.Address); err != nil {
			return mailError("rcpt to "+a.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return mailError("data", err)
	}
	if _, err := w.Write(append(e.header(m, now), m.body...)); err != nil {
		w.Close()
		return mailError("data", err)
	}
	if err := w.Close(); err != nil {
		return mailError("data", err)
	}
	c.Quit() // the mail was taken: a failed QUIT changes nothing
	return nil
}

// mailError maps a failed SMTP step: a 4xx reply may be retried after a
// minute, a 5xx reply is permanent (535 authentication failed, 550
// mailbox unavailable, 553, 554), as is a failed TLS handshake or
// certificate (the host, the port or tls is wrong); network errors and
// timeouts are temporary. The code goes in Error.Code, the server's text
// in Msg.
func mailError(op string, err error) *Error {
	var te *textproto.Error
	if errors.As(err, &te) {
		e := &Error{Op: op, Code: te.Code, Msg: snippet([]byte(te.Msg))}
		switch {
		case te.Code >= 500:
		case te.Code >= 400:
			e.Temporary, e.After = true, mailRetry
		default: // an unexpected positive reply
			e.Temporary = true
		}
		return e
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return &Error{Op: op, Msg: err.Error(), Temporary: true}
	}
	if tlsFailure(err) {
		return &Error{Op: op, Msg: "TLS: " + err.Error()}
	}
	return &Error{Op: op, Msg: err.Error(), Temporary: true}
}

// tlsFailure reports whether err is a TLS handshake or certificate error
// (settings, not the network): a certificate that does not verify, an
// alert from the server, an answer that is not TLS.
func tlsFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return true // the server's TLS alert
	}
	var (
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
		record   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &record) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		strings.Contains(err.Error(), "tls: ")
}

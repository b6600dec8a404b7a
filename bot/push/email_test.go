package push

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/trainbot/trainbot/bot/chat"
)

const (
	mailUser = "trainbot@lab.example"
	mailPass = "app-password-9f8e7d6c"
)

// smtpConfig is how a test SMTP server behaves.
type smtpConfig struct {
	tls     string // MailSTARTTLS (offered), MailTLS (a TLS listener) or MailNoTLS (none)
	user    string // AUTH PLAIN is offered and checked when set
	pass    string
	rcptErr error // what RCPT answers
	dataErr error // what DATA answers, after reading the message
}

// smtpEvent is one command a session took: "AUTH", "MAIL", "RCPT", "DATA".
type smtpEvent struct {
	cmd string
	arg string
	tls bool // the connection was TLS then
}

// smtpMail is one message the server took.
type smtpMail struct {
	from string
	to   []string
	data []byte
}

// smtpServer is a go-smtp server on 127.0.0.1 that records what it was
// told.
type smtpServer struct {
	addr   string
	pool   *x509.CertPool // trusts its certificate
	cfg    smtpConfig
	mu     sync.Mutex
	events []smtpEvent
	mails  []smtpMail
}

func newSMTP(t *testing.T, cfg smtpConfig) *smtpServer {
	t.Helper()
	cert, pool := testCert(t)
	s := &smtpServer{pool: pool, cfg: cfg}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{s: s, c: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.AllowInsecureAuth = false
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	switch cfg.tls {
	case MailSTARTTLS:
		srv.TLSConfig = tlsCfg
	case MailTLS:
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return s
}

func (s *smtpServer) record(c *smtp.Conn, cmd, arg string) {
	_, isTLS := c.TLSConnectionState()
	s.mu.Lock()
	s.events = append(s.events, smtpEvent{cmd: cmd, arg: arg, tls: isTLS})
	s.mu.Unlock()
}

func (s *smtpServer) got() ([]smtpEvent, []smtpMail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]smtpEvent(nil), s.events...), append([]smtpMail(nil), s.mails...)
}

// smtpSession is one connection's session (a new one after STARTTLS).
type smtpSession struct {
	s      *smtpServer
	c      *smtp.Conn
	authed bool
	from   string
	to     []string
}

var _ smtp.AuthSession = (*smtpSession)(nil)

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.s.cfg.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		ss.s.record(ss.c, "AUTH", user)
		if user != ss.s.cfg.user || pass != ss.s.cfg.pass {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.record(ss.c, "MAIL", from)
	if ss.s.cfg.user != "" && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.record(ss.c, "RCPT", to)
	if ss.s.cfg.rcptErr != nil {
		return ss.s.cfg.rcptErr
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.record(ss.c, "DATA", "")
	if ss.s.cfg.dataErr != nil {
		return ss.s.cfg.dataErr
	}
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, smtpMail{from: ss.from, to: ss.to, data: data})
	ss.s.mu.Unlock()
	return nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *smtpSession) Logout() error { return nil }

// testCert makes a self-signed certificate for 127.0.0.1 and localhost,
// and a pool that trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "trainbot test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// mailOptions are an email channel's options against s.
func (s *smtpServer) mailOptions(mode, user, pass string) Options {
	return Options{Kind: Email, Name: "lab", Mail: Mail{
		SMTP: s.addr, From: "trainbot <" + mailUser + ">", To: []string{"ana@lab.example", "王伟 <wei@lab.example>"},
		Username: user, Password: pass, TLS: mode, TLSConfig: &tls.Config{RootCAs: s.pool},
	}}
}

// oomAlert is an OOM alert with one chart and a retry button.
func oomAlert(t *testing.T) chat.Reply {
	return chat.Reply{Text: "💥 run #3 (mnist) hit out-of-memory: CUDA out of memory\n显存不足 · peak 23.6 GiB of 24 GiB\nlast line: RuntimeError: CUDA out of memory",
		Kind: chat.KindAlert, Alert: chat.AlertOOM, RunID: 3, Key: "run:3:alert:oom:1",
		Images:  []chat.Image{{Name: "run-3-loss.png", PNG: testPNG(t, 64, 48, false), Caption: "run #3 mnist · loss"}},
		Buttons: [][]chat.Button{{{Label: "Retry with half batch", Data: "开始 mnist batch_size=32"}}}}
}

// mailParts is a received mail taken apart.
type mailParts struct {
	msg        *mail.Message
	subject    string
	plain, htm string
	png        []byte
	pngHeader  map[string]string
}

func parseMail(t *testing.T, data []byte) mailParts {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := mailParts{msg: msg, pngHeader: map[string]string{}}
	if out.subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/related" {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	related := multipart.NewReader(msg.Body, params["boundary"])
	for i := 0; ; i++ {
		p, err := related.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mt, params, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch {
		case i == 0 && mt == "multipart/alternative":
			alt := multipart.NewReader(p, params["boundary"])
			for {
				q, err := alt.NextPart() // undoes quoted-printable
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(q)
				switch q.Header.Get("Content-Type") {
				case "text/plain; charset=utf-8":
					out.plain = string(b)
				case "text/html; charset=utf-8":
					out.htm = string(b)
				default:
					t.Errorf("alternative part %q", q.Header.Get("Content-Type"))
				}
			}
		case mt == "image/png":
			for _, k := range []string{"Content-Transfer-Encoding", "Content-Id", "Content-Disposition"} {
				out.pngHeader[k] = p.Header.Get(k)
			}
			if out.png, err = io.ReadAll(base64.NewDecoder(base64.StdEncoding, p)); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("part %d is %q", i, mt)
		}
	}
	return out
}

func TestEmailOOMAlertWithChart(t *testing.T) {
	s := newSMTP(t, smtpConfig{tls: MailSTARTTLS, user: mailUser, pass: mailPass})
	c := newChannel(t, s.mailOptions(MailSTARTTLS, mailUser, mailPass))
	if c.Name() != "email:lab" {
		t.Errorf("name %q", c.Name())
	}
	if n, err := c.Send(context.Background(), 0, oomAlert(t), 0); err != nil || n != 1 {
		t.Fatalf("sent %d, %v; want one mail", n, err)
	}
	events, mails := s.got()
	if len(mails) != 1 {
		t.Fatalf("%d mails, want 1", len(mails))
	}
	m := mails[0]
	if m.from != mailUser || strings.Join(m.to, ",") != "ana@lab.example,wei@lab.example" {
		t.Errorf("envelope from %q to %q", m.from, m.to)
	}
	for _, e := range events {
		if !e.tls {
			t.Errorf("%s %s over plain text", e.cmd, e.arg)
		}
	}
	if len(events) == 0 || events[0].cmd != "AUTH" || events[0].arg != mailUser {
		t.Errorf("events %+v, want AUTH first", events)
	}
	p := parseMail(t, m.data)
	h := p.msg.Header
	if want := "[trainbot] 💥 run #3 (mnist) hit out-of-memory: CUDA out of memory"; p.subject != want {
		t.Errorf("subject %q, want %q", p.subject, want)
	}
	if d, err := h.Date(); err != nil || !d.Equal(fakeNow) {
		t.Errorf("Date %q: %v, want %s", h.Get("Date"), err, fakeNow)
	}
	to, err := h.AddressList("To")
	if err != nil || len(to) != 2 || to[1].Name != "王伟" || to[1].Address != "wei@lab.example" {
		t.Errorf("To %q: %v", h.Get("To"), err)
	}
	if from, err := mail.ParseAddress(h.Get("From")); err != nil || from.Address != mailUser {
		t.Errorf("From %q", h.Get("From"))
	}
	if id := h.Get("Message-Id"); !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@lab.example>") {
		t.Errorf("Message-ID %q", id)
	}
	if h.Get("MIME-Version") != "1.0" || h.Get("X-Priority") != "1 (Highest)" || h.Get("Importance") != "high" {
		t.Errorf("MIME-Version %q, X-Priority %q, Importance %q", h.Get("MIME-Version"), h.Get("X-Priority"), h.Get("Importance"))
	}
	for _, want := range []string{"显存不足 · peak 23.6 GiB", "↪ Retry with half batch: send「开始 mnist batch_size=32」to the bot", "📈 run #3 mnist · loss"} {
		if !strings.Contains(p.plain, want) {
			t.Errorf("text/plain lacks %q:\n%s", want, p.plain)
		}
	}
	for _, want := range []string{`color:#c62828">💥 run #3 (mnist)`, `<img src="cid:run-3-loss.png@trainbot" alt="run #3 mnist · loss"`, "显存不足 · peak 23.6 GiB of 24 GiB<br>", "send「开始 mnist batch_size=32」"} {
		if !strings.Contains(p.htm, want) {
			t.Errorf("text/html lacks %q:\n%s", want, p.htm)
		}
	}
	if p.pngHeader["Content-Id"] != "<run-3-loss.png@trainbot>" || p.pngHeader["Content-Disposition"] != `inline; filename="run-3-loss.png"` {
		t.Errorf("image part headers %v", p.pngHeader)
	}
	img, err := png.Decode(bytes.NewReader(p.png))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 64 || b.Dy() != 48 {
		t.Errorf("image is %v, want 64×48", b)
	}
	for _, line := range strings.Split(string(m.data), "\r\n") {
		if len(line) > 998 {
			t.Errorf("a line of %d bytes, over SMTP's 998", len(line))
		}
	}
}

func TestEmailTLSModesDeliver(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		user, pass string
	}{
		{MailSTARTTLS, mailUser, mailPass},
		{MailTLS, mailUser, mailPass},
		{MailNoTLS, "", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := newSMTP(t, smtpConfig{tls: tc.mode, user: tc.user, pass: tc.pass})
			c := newChannel(t, s.mailOptions(tc.mode, tc.user, tc.pass))
			if err := send(c, chat.Reply{Text: "📈 run #5 (bert) step 1200/5000, loss 0.412", Kind: chat.KindProgress}); err != nil {
				t.Fatal(err)
			}
			events, mails := s.got()
			if len(mails) != 1 {
				t.Fatalf("%d mails, want 1", len(mails))
			}
			for _, e := range events {
				if e.tls != (tc.mode != MailNoTLS) {
					t.Errorf("%s with TLS %v", e.cmd, e.tls)
				}
			}
			p := parseMail(t, mails[0].data)
			if p.subject != "[trainbot] 📈 run #5 (bert) step 1200/5000, loss 0.412" || p.msg.Header.Get("X-Priority") != "" {
				t.Errorf("subject %q, X-Priority %q", p.subject, p.msg.Header.Get("X-Priority"))
			}
		})
	}
}

// STARTTLS that the server does not offer: nothing goes out in plain text.
func TestEmailSTARTTLSRequired(t *testing.T) {
	s := newSMTP(t, smtpConfig{tls: MailNoTLS})
	c := newChannel(t, s.mailOptions(MailSTARTTLS, mailUser, mailPass))
	err := send(c, oomAlert(t))
	if !chat.IsPermanent(err) || !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("got %v, want a permanent error about STARTTLS", err)
	}
	if events, mails := s.got(); len(events) != 0 || len(mails) != 0 {
		t.Errorf("the server saw %+v and %d mails, want nothing", events, len(mails))
	}
}

func TestEmailErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	busy := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	for _, tc := range []struct {
		name      string
		server    smtpConfig
		pass      string
		trust     bool // the client trusts the server's certificate
		addr      string
		code      int
		temporary bool
		after     time.Duration
		says      string
	}{
		{"wrong password", smtpConfig{tls: MailSTARTTLS, user: mailUser, pass: "the-right-one"}, mailPass, true, "", 535, false, 0, "Authentication failed"},
		{"451 from RCPT", smtpConfig{tls: MailTLS, user: mailUser, pass: mailPass, rcptErr: busy}, mailPass, true, "", 451, true, time.Minute, "try again later"},
		{"451 from DATA", smtpConfig{tls: MailTLS, user: mailUser, pass: mailPass, dataErr: busy}, mailPass, true, "", 451, true, time.Minute, "try again later"},
		{"550 from RCPT", smtpConfig{tls: MailTLS, user: mailUser, pass: mailPass, rcptErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "mailbox unavailable"}}, mailPass, true, "", 550, false, 0, "mailbox unavailable"},
		{"unknown CA", smtpConfig{tls: MailSTARTTLS, user: mailUser, pass: mailPass}, mailPass, false, "", 0, false, 0, "certificate"},
		{"TLS to a plain port", smtpConfig{tls: MailNoTLS}, mailPass, true, "", 0, false, 0, "TLS"},
		{"refused port", smtpConfig{}, mailPass, true, refused, 0, true, 0, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			s := newSMTP(t, tc.server)
			mode := tc.server.tls
			if tc.name == "TLS to a plain port" || tc.addr != "" {
				mode = MailTLS
			}
			o = s.mailOptions(mode, mailUser, tc.pass)
			if tc.addr != "" {
				o.Mail.SMTP = tc.addr
			}
			if !tc.trust {
				o.Mail.TLSConfig = nil
			}
			err := send(newChannel(t, o), oomAlert(t))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want an *Error", err)
			}
			permanent, after := chat.Classify(err)
			if pe.Code != tc.code || pe.Temporary != tc.temporary || pe.After != tc.after || permanent == tc.temporary || after != tc.after {
				t.Errorf("got code %d temporary %v after %s (%v), want %d %v %s", pe.Code, pe.Temporary, pe.After, err, tc.code, tc.temporary, tc.after)
			}
			if s := err.Error(); !strings.Contains(s, tc.says) || strings.Contains(s, tc.pass) {
				t.Errorf("error %q: want it to say %q and never the password", s, tc.says)
			}
			if tc.code != 0 && !strings.Contains(err.Error(), fmt.Sprintf("error code %d", tc.code)) {
				t.Errorf("error %q does not tell the code %d", err, tc.code)
			}
			if _, mails := s.got(); len(mails) != 0 {
				t.Errorf("%d mails taken", len(mails))
			}
		})
	}
}

func TestEmailNewRefuses(t *testing.T) {
	base := Mail{SMTP: "127.0.0.1:25", From: mailUser, To: []string{"ana@lab.example"}}
	for name, m := range map[string]Mail{
		"none with a password": {SMTP: base.SMTP, From: base.From, To: base.To, Username: mailUser, Password: mailPass, TLS: MailNoTLS},
		"no port":              {SMTP: "smtp.example.org", From: base.From, To: base.To},
		"no recipients":        {SMTP: base.SMTP, From: base.From},
		"bad from":             {SMTP: base.SMTP, From: "trainbot", To: base.To},
		"bad tls":              {SMTP: base.SMTP, From: base.From, To: base.To, TLS: "ssl"},
	} {
		_, err := New(Options{Kind: Email, Mail: m})
		if err == nil || strings.Contains(err.Error(), mailPass) {
			t.Errorf("%s: got %v, want an error without the password", name, err)
		}
	}
	if _, err := New(Options{Kind: Email, Mail: base}); err != nil {
		t.Errorf("a relay without a password: %v", err)
	}
	c, err := New(Options{Kind: Email, Mail: base, PerMinute: 60})
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := c.Pace(0); len(own) != 1 || own[0].N != 60 || own[0].Per != time.Minute {
		t.Errorf("pace %v, want 60 a minute (raised from 10)", own)
	}
}

// Charts past 10 MiB are left out, with a note in both parts.
func TestEmailLeavesOutChartsPastTheLimit(t *testing.T) {
	s := newSMTP(t, smtpConfig{tls: MailNoTLS})
	c := newChannel(t, s.mailOptions(MailNoTLS, "", ""))
	big := bytes.Repeat([]byte{0x89}, 3<<20) // not decoded: sent as is; 4 MiB in base64
	r := chat.Reply{Text: "📊 report", Kind: chat.KindProgress, Images: []chat.Image{
		{Name: "a.png", PNG: big}, {Name: "b.png", PNG: big}, {Name: "c.png", PNG: big}}}
	if err := send(c, r); err != nil {
		t.Fatal(err)
	}
	_, mails := s.got()
	if len(mails) != 1 {
		t.Fatalf("%d mails", len(mails))
	}
	if n := len(mails[0].data); n > mailMax {
		t.Errorf("mail of %d bytes, over %d", n, mailMax)
	}
	p := parseMail(t, mails[0].data)
	note := "1 chart not shown here: the mail would pass 10 MiB"
	if !strings.Contains(p.plain, note) || !strings.Contains(p.htm, note) || strings.Contains(p.htm, "cid:c.png") || !strings.Contains(p.htm, "cid:b.png") {
		t.Errorf("plain %q\nhtml %q\nwant two charts and a note for the third", p.plain, p.htm)
	}
}

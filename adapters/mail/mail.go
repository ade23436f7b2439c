// Package mail is the SMTP adapter of domain.Mailer: the e-mail that tells a buyer their order
// is paid, in the buyer's language, as text and HTML, through any SMTP server
// (github.com/wneessen/go-mail).
//
// A mail is sent at least once: the relay sends it again when SendOrderMail fails, also when
// the server may already have taken it (the connection broke after the data). Every attempt
// carries the same Message-ID, <OrderMail.ID@Config.MessageIDDomain>, and the same codes, so a
// buyer who gets it twice sees one mail twice, and mail clients that thread by Message-ID show
// one.
//
// Nothing here logs: the codes, the order link (its key opens the order) and the body never
// reach a log line, and the errors name the order number and the server's reply only.
package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"cardshop/adapters/i18n"
	"cardshop/domain"
)

// TLSMode is how the connection to the SMTP server is encrypted.
type TLSMode string

// The TLS modes.
const (
	// TLSNone sends in clear text: a server on loopback or a private network only (Mailpit).
	TLSNone TLSMode = "none"
	// TLSStartTLS connects in clear text and upgrades with STARTTLS, which the server must
	// offer (port 587).
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit speaks TLS from the first byte (port 465).
	TLSImplicit TLSMode = "tls"
)

// ParseTLSMode reads a TLS mode's name.
func ParseTLSMode(s string) (TLSMode, error) {
	switch m := TLSMode(strings.ToLower(strings.TrimSpace(s))); m {
	case TLSNone, TLSStartTLS, TLSImplicit:
		return m, nil
	}
	return "", fmt.Errorf("mail: want a TLS mode none, starttls or tls, got %q", s)
}

// DefaultTimeout bounds one connection's dial and each of its SMTP commands when
// Config.Timeout is zero.
const DefaultTimeout = 15 * time.Second

// Config is the SMTP server and the sender.
type Config struct {
	Addr     string        // the server's host:port
	Username string        // SMTP AUTH user; empty: no authentication
	Password domain.Secret // SMTP AUTH password
	From     string        // the sender's address
	FromName string        // the sender's display name ("Card shop"); empty: the address alone
	TLS      TLSMode       // none | starttls | tls; empty: starttls
	// Timeout bounds the dial and each SMTP command of one attempt (DefaultTimeout when zero);
	// the caller's context bounds the whole attempt.
	Timeout time.Duration
	// HELO is the name the client greets the server with; empty: this machine's host name.
	HELO string
	// MessageIDDomain is the right-hand side of every Message-ID; empty: the From address's
	// domain.
	MessageIDDomain string
	// LinkOnly leaves the codes out of every mail, whatever an OrderMail carries: the mail
	// shows the order page's link only (CARDSHOP_MAIL_CODES=false).
	LinkOnly bool
	// Location is the time zone the mail shows the payment time in; nil: UTC.
	Location *time.Location
	// RootCAs are the authorities the server's certificate must chain to (a private relay's,
	// a test server's); nil: the system's.
	RootCAs *x509.CertPool
}

// Mailer sends order mails over SMTP. It is safe for concurrent use: every SendOrderMail
// opens its own connection.
type Mailer struct {
	cfg  Config
	host string
	port int
	tpl  *templates
	cat  *i18n.Catalogue
}

var _ domain.Mailer = (*Mailer)(nil)

// New checks cfg and returns a Mailer that writes its texts from cat.
func New(cfg Config, cat *i18n.Catalogue) (*Mailer, error) {
	if cat == nil {
		return nil, errors.New("mail: no message catalogue")
	}
	host, portStr, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, fmt.Errorf("mail: the SMTP address must be host:port, got %q", cfg.Addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("mail: the SMTP port must be 1-65535, got %q", portStr)
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil || from.Name != "" {
		return nil, fmt.Errorf("mail: the From address must be a bare address such as shop@example.com, got %q", cfg.From)
	}
	cfg.From = from.Address
	if cfg.TLS == "" {
		cfg.TLS = TLSStartTLS
	}
	if _, err := ParseTLSMode(string(cfg.TLS)); err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("mail: negative timeout %s", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MessageIDDomain == "" {
		cfg.MessageIDDomain = cfg.From[strings.LastIndexByte(cfg.From, '@')+1:]
	}
	if !validIDDomain(cfg.MessageIDDomain) {
		return nil, fmt.Errorf("mail: the Message-ID domain must be a host name, got %q", cfg.MessageIDDomain)
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	tpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	return &Mailer{cfg: cfg, host: host, port: port, tpl: tpl, cat: cat}, nil
}

// SendOrderMail renders m in its language and hands it to the SMTP server on a connection of
// its own. An error means the server refused it, or the outcome is unknown: the caller sends
// it again, and the copy carries the same Message-ID.
func (ml *Mailer) SendOrderMail(ctx context.Context, m domain.OrderMail) error {
	msg, err := ml.message(m)
	if err != nil {
		return err
	}
	c, err := ml.client()
	if err != nil {
		return fmt.Errorf("mail: order %s: %w", m.OrderNo, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: order %s not sent (or its outcome is unknown): %w", m.OrderNo, err)
	}
	return nil
}

// MessageID is the Message-ID (without its angle brackets) every attempt at m carries.
func (ml *Mailer) MessageID(m domain.OrderMail) string {
	return m.ID + "@" + ml.cfg.MessageIDDomain
}

// message builds the MIME message of m: headers, and the text and HTML alternatives.
func (ml *Mailer) message(m domain.OrderMail) (*gomail.Msg, error) {
	if !validIDLocal(m.ID) {
		return nil, fmt.Errorf("mail: order %s: the mail's id %q cannot be a Message-ID", m.OrderNo, m.ID)
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("mail: order %s: bad recipient address: %w", m.OrderNo, err)
	}
	if ml.cfg.LinkOnly {
		m.Codes = nil
	}
	lang, ok := i18n.Parse(m.Lang)
	if !ok {
		lang = i18n.Chinese
	}
	body, err := ml.tpl.render(ml.view(lang, m))
	if err != nil {
		return nil, fmt.Errorf("mail: order %s: %w", m.OrderNo, err)
	}
	msg, err := ml.newMsg()
	if err != nil {
		return nil, err
	}
	if err := msg.To(to.Address); err != nil {
		return nil, fmt.Errorf("mail: order %s: recipient: %w", m.OrderNo, err)
	}
	msg.Subject(body.subject)
	msg.SetMessageIDWithValue(ml.MessageID(m))
	msg.SetDate()
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, body.text)
	msg.AddAlternativeString(gomail.TypeTextHTML, body.html)
	return msg, nil
}

// client is a go-mail client for one attempt, configured from cfg.
func (ml *Mailer) client() (*gomail.Client, error) {
	opts := []gomail.Option{gomail.WithPort(ml.port), gomail.WithTimeout(ml.cfg.Timeout),
		gomail.WithTLSConfig(&tls.Config{ServerName: ml.host, RootCAs: ml.cfg.RootCAs, MinVersion: tls.VersionTLS12})}
	switch ml.cfg.TLS {
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	}
	if ml.cfg.HELO != "" {
		opts = append(opts, gomail.WithHELO(ml.cfg.HELO))
	}
	if ml.cfg.Username != "" {
		// The strongest mechanism the server offers; PLAIN and LOGIN only on an encrypted link.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(ml.cfg.Username), gomail.WithPassword(ml.cfg.Password.Reveal()))
	}
	return gomail.NewClient(ml.host, opts...)
}

// validIDDomain reports whether s can be a Message-ID's right-hand side: a host name's letters,
// digits, dots and hyphens.
func validIDDomain(s string) bool {
	if s == "" || len(s) > 253 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// validIDLocal reports whether s can be a Message-ID's left-hand side: RFC 5322's dot-atom
// text (letters, digits, "!#$%&'*+-/=?^_`{|}~" and inner dots).
func validIDLocal(s string) bool {
	if s == "" || len(s) > 128 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-/=?^_`{|}~.", r)) {
			return false
		}
	}
	return true
}

// newMsg is a message from the shop's sender: UTF-8, quoted-printable, no User-Agent header.
func (ml *Mailer) newMsg() (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithCharset(gomail.CharsetUTF8), gomail.WithEncoding(gomail.EncodingQP),
		gomail.WithNoDefaultUserAgent())
	var err error
	if ml.cfg.FromName != "" {
		err = msg.FromFormat(ml.cfg.FromName, ml.cfg.From)
	} else {
		err = msg.From(ml.cfg.From)
	}
	if err != nil {
		return nil, fmt.Errorf("mail: from: %w", err)
	}
	return msg, nil
}

// Package alertpush pushes alerts to the channels admins configure (domain.AlertPusher):
// Telegram through the Bot API's sendMessage, a WeCom (企业微信) group robot through its
// webhook, e-mail through the shop's SMTP mailer, and a webhook signed as the storefront's is
// (package webhook). Each answer is read precisely: a definite refusal (an invalid token or
// key, a chat the bot is not in) is a domain.PushRefusedError, a rate limit a
// domain.RetryAfterError with the wait the service asked for (Telegram's retry_after; WeCom
// names none, so its one-minute window), and anything else (a timeout, a 5xx, a reply that
// does not parse) an error to try again.
//
// Telegram and WeCom take no idempotency key: a push whose answer was lost (a timeout after
// the request left) is sent again and may show twice. The relay keeps that window small: one
// relay holds a push at a time (its lease), marks it sent as soon as the answer comes, and the
// request's timeout is short. E-mail carries the push's id as its Message-ID and the webhook
// as its event id, so their receivers can drop a copy.
//
// It imports the domain, package webhook and the standard library only. A secret never appears
// in an error: the Bot API's token is part of its URL, so errors name the method, not the URL.
package alertpush

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"cardshop/adapters/webhook"
	"cardshop/domain"
)

// Default endpoints and timeout.
const (
	DefaultTelegramURL = "https://api.telegram.org"
	DefaultWeComURL    = "https://qyapi.weixin.qq.com"
	DefaultTimeout     = 10 * time.Second
	// weComWindow is how long a rate-limited WeCom robot is left alone: its limit is counted
	// per minute and its reply names no retry time.
	weComWindow = time.Minute
)

// Mailer sends an alert's e-mail: plain text, with id as the Message-ID's local part.
type Mailer interface {
	SendAlertMail(ctx context.Context, to, id, subject, text string) error
}

// Config configures a Pusher.
type Config struct {
	TelegramURL string // the Bot API's base URL; empty: DefaultTelegramURL (tests: the simulator)
	WeComURL    string // the robots' base URL; empty: DefaultWeComURL
	Timeout     time.Duration
	HTTPClient  *http.Client // nil: a client of its own with Timeout
	// Mailer sends the e-mail channels' pushes; nil: they fail (no SMTP is configured).
	Mailer Mailer
	// Shop names the shop in every message ("cardshop" when empty).
	Shop string
}

// Pusher is the domain.AlertPusher of every channel type. It is safe for concurrent use.
type Pusher struct {
	cfg  Config
	http *http.Client
}

var _ domain.AlertPusher = (*Pusher)(nil)

// New returns a Pusher.
func New(cfg Config) *Pusher {
	if cfg.TelegramURL == "" {
		cfg.TelegramURL = DefaultTelegramURL
	}
	if cfg.WeComURL == "" {
		cfg.WeComURL = DefaultWeComURL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Shop == "" {
		cfg.Shop = "cardshop"
	}
	cfg.TelegramURL = strings.TrimRight(cfg.TelegramURL, "/")
	cfg.WeComURL = strings.TrimRight(cfg.WeComURL, "/")
	hc := &http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
		if hc.Timeout == 0 {
			hc.Timeout = cfg.Timeout
		}
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Pusher{cfg: cfg, http: hc}
}

// errNoMailer fails an e-mail push on a shop without SMTP.
var errNoMailer = errors.New("no SMTP mailer is configured (CARDSHOP_SMTP_HOST)")

// Push sends p to c by c's type.
func (ps *Pusher) Push(ctx context.Context, c domain.AlertChannel, p domain.AlertPush) error {
	switch c.Type {
	case domain.ChannelTelegram:
		return ps.telegram(ctx, c, p)
	case domain.ChannelWeCom:
		return ps.weCom(ctx, c, p)
	case domain.ChannelEmail:
		if ps.cfg.Mailer == nil {
			return &domain.PushRefusedError{Reason: errNoMailer.Error()}
		}
		if err := ps.cfg.Mailer.SendAlertMail(ctx, c.Target, p.ID, ps.subject(p), ps.text(p)); err != nil {
			return fmt.Errorf("alert e-mail %s: %w", p.ID, err)
		}
		return nil
	case domain.ChannelWebhook:
		return ps.webhook(ctx, c, p)
	}
	return &domain.PushRefusedError{Reason: fmt.Sprintf("unknown channel type %q", c.Type)}
}

// subject is the push's one-line summary.
func (ps *Pusher) subject(p domain.AlertPush) string {
	s := "[" + ps.cfg.Shop + "] " + p.Kind
	if p.Product != 0 {
		s += fmt.Sprintf(" · product %d", p.Product)
	}
	if p.OrderNo != "" {
		s += " · order " + string(p.OrderNo)
	}
	return s
}

// text is the push's message: the summary, the alert's message and when it was raised (UTC).
func (ps *Pusher) text(p domain.AlertPush) string {
	return ps.subject(p) + "\n" + p.Message + "\n" + p.At.UTC().Format("2006-01-02 15:04:05 UTC")
}

// clipBytes cuts s to at most n bytes on a character boundary, marking the cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// clipRunes cuts s to at most n characters, marking the cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// webhook posts the push as a signed event of type "alert" (or "alert.test"), its data the
// push itself, with the push's id as the event id.
func (ps *Pusher) webhook(ctx context.Context, c domain.AlertChannel, p domain.AlertPush) error {
	cl, err := webhook.New(webhook.Config{URL: c.Target, Secret: c.Secret.Reveal(), Timeout: ps.cfg.Timeout})
	if err != nil {
		return &domain.PushRefusedError{Reason: "webhook: " + err.Error()}
	}
	data, err := jsonPush(p)
	if err != nil {
		return err
	}
	typ := "alert"
	if p.Kind == "test" {
		typ = "alert.test"
	}
	return cl.Notify(ctx, domain.Notification{ID: p.ID, Type: typ, At: p.At, Attempt: 1, Data: data})
}

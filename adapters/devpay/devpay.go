// Package devpay is cardshop's built-in "dev" payment provider: a domain.PaymentGateway whose
// pay page is served by cardshop itself, so that a newcomer can buy a code end to end in a
// browser without any provider account. Nothing is charged: the buyer presses "Pay" or "Fail".
//
// It imports the domain and the standard library only. Its HMAC is its own (not
// adapters/paysig): the dev provider's keys, headers and body must never be mistaken for the
// legacy callback's, and a dev secret must not verify anything else.
//
// # Enabling it
//
// It must be impossible to enable by accident in production. New takes an explicit secret and
// refuses a short or weak one. Bootstrap enables the provider only when CARDSHOP_DEV_PAYMENTS=true
// (which `make run` sets), and refuses to start with CARDSHOP_DEV_PAYMENTS=true together with
// CARDSHOP_ADAPTERS=real unless CARDSHOP_DEV_PAYMENTS_ALLOW_REAL=true as well. The secret may
// be random per process (NewSecret): pages and notifications are made and checked by the same
// process, and a pay link from before a restart then simply stops working.
//
// # Routes
//
// The HTTP adapter mounts, next to the notify route every provider has:
//
//	GET  /dev/pay/{order_no}           → Gateway.PayPage(query)
//	POST /dev/pay/{order_no}/confirm   → Gateway.Confirm(ctx, form, deliver)
//	POST /api/payments/dev/notify      → the notify use case, like any provider's
//
// Both page functions answer a complete Page (status, text/html, body) to write as it
// is, with Cache-Control: no-store. The {order_no} of the path is cosmetic: the order number
// that counts is the signed one in the parameters. deliver is the function the notify route
// calls for provider "dev" (the notify use case): Confirm hands it the notification as if it
// had arrived over HTTP, so the dev notification goes through exactly the verification and
// ledger path of a real provider's.
//
// # The pay link
//
// Create returns PayURL = <base URL>/dev/pay/<order_no>?<params>, where the parameters are
// order_no, ref, amount (minor units), currency, subject, expires (unix seconds), return (the
// return URL, may be empty) and sig: the hex HMAC-SHA256, with a key derived from the secret
// for pages only, of the url.Values encoding (sorted keys) of all the others. The page needs no
// lookup: everything it shows is in the signed link.
//
// # The notification
//
// A POST with a JSON body and two headers:
//
//	Devpay-Timestamp: <unix seconds>
//	Devpay-Signature: v1=<hex HMAC-SHA256 of "<timestamp>." + body>   (key derived for notifications)
//	{"event_id":"evt_…","order_no":"…","provider_ref":"dev_…","outcome":"paid"|"failed",
//	 "amount":1999,"currency":"CNY","reason":"…"}
//
// amount is in the currency's minor units. Verify checks the signature in constant time and
// the timestamp within 5 minutes of the request's arrival, then parses the body strictly
// (unknown fields, trailing data, a bad order number, outcome or currency are refused). The
// reply is 200 {"received":true} when accepted, 400 {"received":false} when refused.
//
// # The provider's own state
//
// The gateway keeps the payments it created and their outcome (open, paid, failed, expired) in
// a map in memory: what Query answers and what a second press on the page meets. Pressing the
// same button again resends the same notification (same event id: the shop's dedupe is
// exercised); pressing the other one after a final outcome changes nothing. Close and the
// link's expiry make the payment expired: a later press shows "this payment has expired" and
// sends nothing.
package devpay

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"cardshop/domain"
)

// Name is the provider's name, as in /api/payments/dev/notify.
const Name domain.Provider = "dev"

// MinSecretLength is the shortest accepted secret.
const MinSecretLength = 16

// minDistinct is the fewest different characters a secret must have ("aaaaaaaaaaaaaaaa" and
// "abababab…" are not secrets).
const minDistinct = 6

// Tolerance is how far a notification's timestamp may be from its arrival, either way.
const Tolerance = 5 * time.Minute

// forget is how long after its expiry a payment that never became final is kept in the map.
const forget = 24 * time.Hour

// Config is what New needs.
type Config struct {
	// Secret keys the pay links and the notifications. Required, at least MinSecretLength
	// characters of some variety.
	Secret string
	// BaseURL is cardshop's public base URL as the buyer's browser reaches it
	// ("http://127.0.0.1:8080"): http or https, no query or fragment; a path is a prefix.
	BaseURL string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// state is where a dev payment stands at the dev provider.
type state int

const (
	stOpen state = iota + 1
	stPaid
	stFailed
	stExpired
)

// payment is the dev provider's record of one payment.
type payment struct {
	orderNo  domain.OrderNo
	ref      string
	amount   domain.Money
	currency domain.Currency
	expires  time.Time
	state    state
	eventID  string // the notification of the final outcome, resent as it is on a second press
	payURL   string
}

// Gateway is the dev provider. It is safe for concurrent use.
type Gateway struct {
	pageKey   []byte
	notifyKey []byte
	base      string
	now       func() time.Time

	mu       sync.Mutex
	payments map[string]*payment         // by provider ref
	byOrder  map[domain.OrderNo]*payment // the order's newest payment
}

var _ domain.PaymentGateway = (*Gateway)(nil)

// New returns the dev provider. It refuses an empty, short or weak secret and a base URL that
// is not an absolute http(s) URL.
func New(c Config) (*Gateway, error) {
	if len(c.Secret) < MinSecretLength {
		return nil, fmt.Errorf("dev payment secret must be at least %d characters", MinSecretLength)
	}
	distinct := map[rune]bool{}
	for _, r := range c.Secret {
		distinct[r] = true
	}
	if len(distinct) < minDistinct {
		return nil, fmt.Errorf("dev payment secret is too weak: fewer than %d different characters", minDistinct)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, errors.New("dev payment base URL must be an absolute http(s) URL without query or fragment")
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	return &Gateway{
		pageKey:   derive(c.Secret, "cardshop devpay page v1"),
		notifyKey: derive(c.Secret, "cardshop devpay notify v1"),
		base:      strings.TrimRight(u.String(), "/"),
		now:       now,
		payments:  map[string]*payment{},
		byOrder:   map[domain.OrderNo]*payment{},
	}, nil
}

// NewSecret returns a random secret, for a bootstrap that has none configured.
func NewSecret() string { return randomHex(32) }

// derive gives each use of the secret its own key, so that a page signature can never pass as
// a notification signature.
func derive(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}

// Format keeps the keys out of any printout of the gateway.
func (g *Gateway) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, "devpay.Gateway{base: "+g.base+", keys: [REDACTED]}")
}

// Provider is "dev".
func (g *Gateway) Provider() domain.Provider { return Name }

// Supports reports true for every currency the shop sells in.
func (g *Gateway) Supports(c domain.Currency) bool {
	known, err := domain.ParseCurrency(c.Code)
	return err == nil && known == c
}

// Create records the payment and returns its signed pay link. A retry for the same order,
// amount and currency while its payment is still open returns the same payment.
func (g *Gateway) Create(_ context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	if _, err := domain.ParseOrderNo(string(r.OrderNo)); err != nil {
		return domain.PaymentCreated{}, domain.Invalid("order_no", "malformed")
	}
	if r.Amount <= 0 {
		return domain.PaymentCreated{}, domain.Invalid("amount", "must be positive")
	}
	if !g.Supports(r.Currency) {
		return domain.PaymentCreated{}, domain.Invalid("currency", "not a currency the shop sells in")
	}
	if err := checkReturnURL(r.ReturnURL); err != nil {
		return domain.PaymentCreated{}, err
	}
	now := g.now()
	if !r.ExpiresAt.After(now) {
		return domain.PaymentCreated{}, domain.Invalid("expires_at", "must be in the future")
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune(now)
	if p := g.byOrder[r.OrderNo]; p != nil && p.state == stOpen && now.Before(p.expires) &&
		p.amount == r.Amount && p.currency == r.Currency {
		return domain.PaymentCreated{ProviderRef: p.ref, PayURL: p.payURL}, nil
	}
	lk := link{
		OrderNo: r.OrderNo, Ref: "dev_" + randomHex(12), Amount: r.Amount, Currency: r.Currency,
		Subject: cleanSubject(r.Subject), Expires: r.ExpiresAt.Unix(), Return: r.ReturnURL,
	}
	p := &payment{orderNo: lk.OrderNo, ref: lk.Ref, amount: lk.Amount, currency: lk.Currency,
		expires: time.Unix(lk.Expires, 0), state: stOpen}
	p.payURL = g.base + "/dev/pay/" + string(lk.OrderNo) + "?" + g.sign(lk).Encode()
	g.payments[p.ref] = p
	g.byOrder[p.orderNo] = p
	return domain.PaymentCreated{ProviderRef: p.ref, PayURL: p.payURL}, nil
}

// cleanSubject makes a subject fit for the page: what is not a graphic character (controls,
// invalid UTF-8, non-characters) becomes a space, and a long one is cut at maxSubject bytes.
func cleanSubject(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsGraphic(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) <= maxSubject {
		return s
	}
	cut := maxSubject - len("…")
	for !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// prune forgets payments long past their expiry; the caller holds mu.
func (g *Gateway) prune(now time.Time) {
	for ref, p := range g.payments {
		if now.Sub(p.expires) > forget {
			delete(g.payments, ref)
			if g.byOrder[p.orderNo] == p {
				delete(g.byOrder, p.orderNo)
			}
		}
	}
}

// lookup returns the recorded payment of p (by its ref, else the order's newest), or nil. The
// caller holds mu.
func (g *Gateway) lookup(p domain.Payment) *payment {
	if p.ProviderRef != "" {
		return g.payments[p.ProviderRef]
	}
	return g.byOrder[p.OrderNo]
}

// current is rec's state at now: an open payment past its expiry is expired. The caller holds mu.
func (rec *payment) current(now time.Time) state {
	if rec.state == stOpen && !now.Before(rec.expires) {
		rec.state = stExpired
	}
	return rec.state
}

// Query answers what the dev provider recorded. A payment it does not know (created before a
// restart of this process) is pending: only its own link can still settle it.
func (g *Gateway) Query(_ context.Context, p domain.Payment) (domain.PaymentState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.lookup(p)
	if rec == nil {
		return domain.PaymentState{Outcome: domain.OutcomePending, ProviderRef: p.ProviderRef}, nil
	}
	if rec.orderNo != p.OrderNo {
		return domain.PaymentState{}, fmt.Errorf("dev payment %s belongs to another order", rec.ref)
	}
	out := domain.PaymentState{ProviderRef: rec.ref, Amount: rec.amount, Currency: rec.currency}
	switch rec.current(g.now()) {
	case stPaid:
		out.Outcome = domain.OutcomePaid
	case stFailed:
		out.Outcome = domain.OutcomeFailed
	case stExpired:
		out.Outcome = domain.OutcomeExpired
	default:
		out.Outcome = domain.OutcomePending
	}
	return out, nil
}

// Close makes the payment expired, so that a later press on its page pays nothing.
// ErrAlreadyPaid when it was paid. A payment the provider does not know is recorded as expired
// (its link may still be out there).
func (g *Gateway) Close(_ context.Context, p domain.Payment) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.lookup(p)
	if rec == nil {
		if p.ProviderRef == "" {
			return nil // nothing was created at the dev provider
		}
		rec = &payment{orderNo: p.OrderNo, ref: p.ProviderRef, amount: p.Amount, currency: p.Currency,
			expires: g.now(), state: stExpired}
		g.payments[rec.ref] = rec
		return nil
	}
	if rec.orderNo != p.OrderNo {
		return fmt.Errorf("dev payment %s belongs to another order", rec.ref)
	}
	switch rec.current(g.now()) {
	case stPaid:
		return domain.ErrAlreadyPaid
	case stOpen:
		rec.state = stExpired
	default: // failed or expired already: nothing to close
	}
	return nil
}

// Refund returns the pretend money at once: the dev provider moves none, so a refund of an
// order it paid always succeeds, with the refund number as its reference.
func (g *Gateway) Refund(_ context.Context, _ domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if r.RefundNo == "" {
		return domain.RefundState{}, domain.Invalid("refund_no", "required")
	}
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: "dev_refund_" + r.RefundNo}, nil
}

// RefundIdempotent is true: the dev provider moves no money; a refund number always answers
// the same.
func (g *Gateway) RefundIdempotent() bool { return true }
